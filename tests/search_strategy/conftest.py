"""A small tiled-matmul task and a tuning loop driven with the dummy builder and runner."""

import pytest

from metaschedule.builder import BuilderInput
from metaschedule.database import TuningRecord
from metaschedule.runner import RunnerInput
from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner
from metaschedule.testing.tuning_records import matmul


def tile_ij(sch):
    """Split i and j of block C by sampled tiles: a space of (divisor pairs) points."""
    block = sch.get_block("C")
    i, j, _ = sch.get_loops(block)
    sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=16))
    sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=16))


def tile_i(sch):
    """Split i only: matmul(8) gives a space of 4 points."""
    block = sch.get_block("C")
    i = sch.get_loops(block)[0]
    sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=16))


def decisions(sch):
    """The sampling decisions of a schedule's trace, as a hashable key."""
    trace = sch.trace
    return tuple(
        tuple(d) if isinstance(d, list) else d
        for d in (trace.decisions.get(i) for i in trace.insts)
        if d is not None
    )


def drive(ctx, database=None, max_trials=8, num_trials_per_iter=4, cost_model=None):
    """pre_tuning -> (generate -> build -> run -> commit -> notify)* -> post_tuning;
    returns the batches of candidates."""
    builder, runner = DummyBuilder(), DummyRunner()
    ctx.pre_tuning(max_trials, num_trials_per_iter, database=database, cost_model=cost_model)
    batches = []
    for _ in range(100):
        cands = ctx.generate_measure_candidates()
        if cands is None:
            break
        batches.append(cands)
        built = builder.build([BuilderInput(c.sch.mod, ctx.target) for c in cands])
        futures = runner.run(
            [RunnerInput(b.artifact_path, "cpu", c.args_info) for b, c in zip(built, cands)]
        )
        results = [f.result() for f in futures]
        if database is not None:
            workload = database.commit_workload(ctx.mod)
            for c, r in zip(cands, results):
                database.commit_tuning_record(
                    TuningRecord(c.sch.trace, workload, r.run_secs, ctx.target, c.args_info)
                )
        ctx.notify_runner_results(cands, results)
    else:
        raise AssertionError("the strategy never finished")
    ctx.post_tuning()
    return batches


@pytest.fixture
def task():
    return matmul(16)


@pytest.fixture(name="drive")
def drive_fixture():
    return drive


@pytest.fixture(name="decisions")
def decisions_fixture():
    return decisions


@pytest.fixture(name="tile_ij")
def tile_ij_fixture():
    return tile_ij


@pytest.fixture(name="tile_i")
def tile_i_fixture():
    return tile_i
