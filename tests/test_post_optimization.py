"""Droplet post-optimization: the grid of decisions, the statistical walk, the wiring."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import metaschedule as ms
from metaschedule.database import TuningRecord, Workload
from metaschedule.post_optimization import (
    Droplet,
    Measurer,
    PostOpt,
    Space,
    post_optimize,
    significantly_faster,
)
from metaschedule.schedule import Schedule
from metaschedule.testing import op_matmul
from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner

TARGET = ms.Target("llvm -num-cores 2")
BLOCK = "T_matmul_NN"


def _tiled_record(n: int = 32, inner=(1, 1, 1, 32), run_secs=(1.0,)) -> TuningRecord:
    """A record whose trace tiles the matmul's j loop into four (a known start point)."""
    func = op_matmul(n, n, n)
    sch = Schedule(func)
    block = sch.get_block(BLOCK)
    i, j, k = sch.get_loops(block)
    factors = sch.sample_perfect_tile(j, n=4, max_innermost_factor=64, decision=list(inner))
    sch.split(j, factors)
    unroll = sch.sample_categorical([0, 16, 64], [1 / 3] * 3, decision=0)
    sch.annotate(sch.get_block("root"), "meta_schedule.unroll_explicit", unroll)
    return TuningRecord(
        sch.trace, Workload(ms.tir.IRModule({"main": func})), list(run_secs), TARGET
    )


class LandscapeMeasurer(Measurer):
    """A test double: run time depends on the innermost tile of j, best at 8; noise-free
    samples that differ slightly per round (so the t-test has a spread to look at)."""

    def __init__(self):
        super().__init__(builder=None, runner=None)
        self.calls = 0

    def measure(self, mods, target, args_info, repeat):
        results, errors = [], []
        for mod in mods:
            if mod is None:
                results.append(None)
                errors.append("rejected")
                continue
            self.calls += 1
            sch = Schedule(mod)
            inner = sch.get(sch.get_loops(sch.get_block(BLOCK))[-2]).extent.value
            cost = 1.0 + abs(np.log2(inner) - 3)
            results.append([cost * (1 + 0.01 * r) for r in range(repeat)])
            errors.append(None)
        return results, errors


def test_welch_test_needs_a_real_difference():
    assert significantly_faster([1.0, 1.01, 0.99], [2.0, 2.02, 1.98], 0.05)
    assert not significantly_faster([1.0, 1.5, 0.6], [1.1, 0.7, 1.4], 0.05)
    assert not significantly_faster([2.0, 2.1], [1.0, 1.1], 0.05)  # slower is never better
    assert not significantly_faster([1.0], [2.0], 0.05)  # one sample: no evidence
    assert significantly_faster([1.0, 1.0], [2.0, 2.0], 0.05)  # no spread, clearly apart


def test_space_grid_round_trips_and_reproduces_the_record():
    record = _tiled_record()
    space = Space(record, record.workload, TARGET)
    names = [k.name for k in space.knobs]
    assert names == ["SamplePerfectTile", "SampleCategorical"]
    tiles = space.knobs[0].values
    assert all(int(np.prod(t)) == 32 for t in tiles) and len(tiles) == len(
        {tuple(t) for t in tiles}
    )
    assert space.dims[1] == 3
    for point in range(0, space.size, 7):
        assert space.knob2point(space.point2knob(point)) == point
    assert space.get_value(0, space.start[0]) == [1, 1, 1, 32]
    trace = space.template(create=False)
    assert trace.get_decision(space.knobs[0].inst) == [1, 1, 1, 32]
    sch = space.template()
    assert sch is not None
    assert Space.add_space([[1, 2]], [[1, 2], [2, 1]], limit=10) == [[1, 2], [2, 1]]
    assert len(Space.add_space([], [[i] for i in range(20)], limit=5)) == 5


def test_droplet_climbs_to_a_better_point_and_never_worse(tmp_path):
    record = _tiled_record(inner=(1, 1, 1, 32))
    log = str(tmp_path / "droplet.jsonl")
    droplet = Droplet(record, None, TARGET, log, measurer=LandscapeMeasurer())
    result = droplet.tune(n_trial=60)
    assert result.measured > 0 and result.moves >= 1
    assert np.mean(result.best_samples) < np.mean(result.start_samples)
    best_tile = droplet.space.get_value(0, result.best[0])
    assert best_tile[-1] in (8, 16) or best_tile[-2] == 8  # moved towards the optimum
    with open(log, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f]
    assert len(lines) == result.measured + 1  # every neighbour plus the start
    better = droplet.best_record()
    assert better is not None and better.run_secs == result.best_samples


def test_droplet_keeps_the_start_when_nothing_is_significantly_better():
    class Flat(LandscapeMeasurer):
        def measure(self, mods, target, args_info, repeat):
            rng = np.random.default_rng(self.calls)
            self.calls += 1
            return [None if m is None else list(1 + 0.2 * rng.random(repeat)) for m in mods], [
                None
            ] * len(mods)

    droplet = Droplet(_tiled_record(), None, TARGET, None, measurer=Flat())
    result = droplet.tune(n_trial=20)
    assert result.measured == 20
    if not result.improved:
        assert droplet.best_record() is None
    else:  # a move only on a significant difference
        assert significantly_faster(result.best_samples, result.start_samples, 0.2)


def test_post_optimize_commits_only_improvements():
    record = _tiled_record(inner=(1, 1, 1, 32), run_secs=(6.0,))
    db = ms.Database.create("memory")
    workload = db.commit_workload(record.workload.mod)
    db.commit_tuning_record(TuningRecord(record.trace, workload, [6.0], TARGET))
    mod = record.workload.mod
    results = post_optimize(
        db, [mod], TARGET, trials=40, builder=DummyBuilder(), runner=DummyRunner()
    )
    assert len(results) == 1 and results[0].droplet is not None
    assert results[0].droplet.measured > 0
    best = db.query_tuning_record(mod, TARGET)
    assert best.mean_run_sec <= 6.0
    assert len(db) == 1 + int(results[0].committed)


@pytest.mark.compiler
def test_droplet_on_a_real_matmul_is_never_slower(tmp_path):
    record = _tiled_record(n=64, inner=(1, 2, 2, 16))
    droplet = Droplet(record, None, TARGET, str(tmp_path / "log.jsonl"))
    try:
        result = droplet.tune(n_trial=6, number=2, repeat=3)
    finally:
        droplet.space.measurer.close()
    assert result.measured == 6
    assert np.mean(result.best_samples) <= np.mean(result.start_samples)


@pytest.mark.compiler
def test_postopt_on_a_work_dir(tmp_path):
    db = ms.Database.create("json", work_dir=str(tmp_path))
    record = _tiled_record(n=32, inner=(1, 1, 2, 16), run_secs=(1.0,))
    workload = db.commit_workload(record.workload.mod)
    db.commit_tuning_record(TuningRecord(record.trace, workload, [1.0], TARGET))
    post = PostOpt(str(tmp_path), TARGET, trials=3)
    post.run()
    assert len(post.results) == 1 and post.results[0].droplet.measured == 3
    assert os.path.exists(tmp_path / "logs" / "droplet_0.jsonl")
    with pytest.raises(FileNotFoundError):
        PostOpt(str(tmp_path / "missing"), TARGET)


def test_tune_tir_with_post_optimization(tmp_path):
    def template(sch):
        loop = sch.get_loops(sch.get_block(BLOCK))[1]
        sch.split(loop, sch.sample_perfect_tile(loop, n=2))

    db = ms.tune_tir(
        op_matmul(16, 16, 16),
        "cpu",
        str(tmp_path),
        4,
        num_trials_per_iter=4,
        builder=DummyBuilder(),
        runner=DummyRunner(),
        space=template,
        strategy="replay-trace",
        cost_model="random",
        database="memory",
        post_optimization=True,
    )
    assert len(db) >= 4  # the search's records, plus an improvement if one was found
    logs = os.listdir(tmp_path / "logs" / "droplet_main")
    assert logs == ["droplet_0.jsonl"]


def test_droplet_starts_from_the_best_as_the_database_ranks_it(tmp_path):
    """A schedule re-measured by a final selection counts by its latest record: a lucky
    first timing that the re-measurement overturned is not the start point."""
    from metaschedule.post_optimization.droplet import _best_record  # local: private helper

    lucky = _tiled_record(inner=(1, 1, 1, 32), run_secs=(1.0,))
    steady = _tiled_record(inner=(1, 1, 4, 8), run_secs=(2.0,))
    db = ms.database.JSONDatabase(
        str(tmp_path / "wl.json"), str(tmp_path / "rec.json"), allow_missing=True
    )
    wl = db.commit_workload(lucky.workload.mod)
    for record, secs in [(lucky, 1.0), (steady, 2.0), (lucky, 4.0), (steady, 3.0)]:
        db.commit_tuning_record(TuningRecord(record.trace, wl, [secs], TARGET))
    db.close()
    best = _best_record(str(tmp_path / "rec.json"), str(tmp_path / "wl.json"))
    assert best.run_secs == [3.0]
    assert best.trace.as_json() == steady.trace.as_json()
