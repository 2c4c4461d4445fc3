"""TVM users' reports, guarded: a postprocessor that always fails, a strategy without
candidates, and a run time of zero must end tuning cleanly, never hang or crash."""

import math
import time

import pytest

from metaschedule.postproc import PyPostproc
from metaschedule.search_strategy import EvolutionarySearch, PySearchStrategy, ReplayTrace
from metaschedule.space_generator import ScheduleFn
from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner
from metaschedule.testing.tuning_records import matmul
from metaschedule.tir_integration import tune_tir
from metaschedule.utils import derived_object


def template(sch):
    i, j, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, sch.sample_perfect_tile(i, n=2))
    sch.split(j, sch.sample_perfect_tile(j, n=2))


@derived_object
class AlwaysFails(PyPostproc):
    """Rejects every schedule (TVM issues 12330, 18380: the search hung)."""

    calls = 0

    def _initialize_with_tune_context(self, context):
        pass

    def apply(self, sch):
        AlwaysFails.calls += 1
        return False

    def clone(self):
        return self


def dummy_tune(tmp_path, strategy, space=None, runner=None, trials=16, **kwargs):
    return tune_tir(
        matmul(16),
        "cpu",
        str(tmp_path),
        trials,
        num_trials_per_iter=4,
        space=space or template,
        strategy=strategy,
        cost_model="random",
        builder=DummyBuilder(),
        runner=runner or DummyRunner(),
        **kwargs,
    )


@pytest.mark.parametrize(
    "strategy",
    [
        ReplayTrace(max_fail_count=10),
        EvolutionarySearch(
            population_size=8, init_min_unmeasured=2, genetic_num_iters=1, max_fail_count=3
        ),
    ],
)
def test_a_postprocessor_that_always_fails_ends_the_task(tmp_path, strategy, caplog):
    AlwaysFails.calls = 0
    space = ScheduleFn(template, postprocs=[AlwaysFails()], mutator_probs={})
    start = time.monotonic()
    db = dummy_tune(tmp_path, strategy, space=space)
    assert time.monotonic() - start < 120  # bounded attempts, no hang
    assert len(db) == 0  # nothing to measure, and no exception
    assert 0 < AlwaysFails.calls <= 10_000
    log = (tmp_path / "logs" / "task_0_main.log").read_text()
    assert "failures: AlwaysFails:" in log  # the strategy says why it gave up


@derived_object
class NoCandidates(PySearchStrategy):
    """Yields empty batches forever (TVM issue 18423: a crash)."""

    def _initialize_with_tune_context(self, context):
        pass

    def pre_tuning(
        self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None
    ):
        pass

    def post_tuning(self):
        pass

    def generate_measure_candidates(self):
        return []

    def notify_runner_results(self, measure_candidates, results):
        pass

    def clone(self):
        return NoCandidates()


def test_a_strategy_without_candidates_ends_the_task_cleanly(tmp_path):
    db = dummy_tune(tmp_path, NoCandidates())
    assert len(db) == 0
    log = (tmp_path / "logs" / "task_0_main.log").read_text()
    assert "without a candidate" in log


@pytest.mark.parametrize("cost_model", ["random", "xgb", "mlp"])
def test_a_run_time_of_zero_does_not_crash(tmp_path, cost_model):
    # Every measurement says 0 s (a timer too coarse for the kernel): the cost model's
    # normalisation and the GFLOPS of the statistics must not divide by zero.
    runner = DummyRunner(f_run_secs=lambda path: [0.0, 0.0])
    db = tune_tir(
        matmul(16),
        "cpu",
        str(tmp_path),
        12,
        num_trials_per_iter=4,
        space=template,
        strategy=EvolutionarySearch(population_size=8, init_min_unmeasured=2, genetic_num_iters=1),
        cost_model=cost_model,
        builder=DummyBuilder(),
        runner=runner,
    )
    records = db.get_all_tuning_records()
    assert len(records) >= 12  # the trials, then the final selection's (medians: [0.0])
    assert all(r.run_secs in ([0.0, 0.0], [0.0]) for r in records)
    stats = (tmp_path / "logs" / "task_scheduler.log").read_text()
    assert "Tuning finished" in stats
    assert "nan" not in stats.lower() and "inf " not in stats.lower()
    assert not any(math.isnan(x) for r in records for x in r.run_secs)
