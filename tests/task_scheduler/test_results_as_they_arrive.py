"""Each result is committed as soon as it arrives, so an interruption (an error, Ctrl-C)
mid-batch loses nothing that was measured; and tuning again resumes the budget."""

import os

import pytest
from scheduler_testing import split_template

from metaschedule.database import MemoryDatabase
from metaschedule.measure_callback import AddToDatabase, PyMeasureCallback
from metaschedule.runner import RunnerFuture
from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner
from metaschedule.testing.tuning_records import matmul
from metaschedule.tir_integration import tune_tir
from metaschedule.utils import derived_object


class StopAtRun(DummyRunner):
    """Futures 0..k-1 of the first batch are done; taking the result of future k raises
    ``error`` (a measurement that blows up, or Ctrl-C while waiting)."""

    def __init__(self, k, error):
        super().__init__()
        self.k, self.error, self.count = k, error, 0

    def _future(self, inp):
        index = self.count
        self.count += 1
        if index < self.k:
            return super()._future(inp)

        def result():
            raise self.error

        return RunnerFuture(lambda: False, result)


def wide_template(sch):
    """Every loop of block C split in four by sampled tiles: thousands of schedules, so
    that a few seeded draws never repeat one (a resumed run counts distinct schedules)."""
    block = sch.get_block("C")
    for loop in sch.get_loops(block):
        sch.split(loop, sch.sample_perfect_tile(loop, n=4))


def tune(tmp_path, runner, trials=8, **kwargs):
    kwargs.setdefault("space", split_template)
    return tune_tir(
        matmul(16),
        "cpu",
        str(tmp_path),
        trials,
        num_trials_per_iter=4,
        strategy="replay-trace",
        cost_model="random",
        builder=DummyBuilder(),
        runner=runner,
        task_scheduler="round-robin",
        **kwargs,
    )


@pytest.mark.parametrize(
    "error", [RuntimeError("the measuring machine caught fire"), KeyboardInterrupt()]
)
def test_results_that_arrived_before_an_interruption_are_saved(tmp_path, error):
    db = MemoryDatabase()
    with pytest.raises(type(error)) as info:
        tune(tmp_path, StopAtRun(3, error), database=db)
    assert len(db) == 3  # the three measured before the fourth blew up
    if isinstance(error, KeyboardInterrupt):
        assert "run the same call again with the same work_dir" in str(info.value)


def test_incremental_callbacks_see_each_result_once_batch_callbacks_the_batch(tmp_path):
    seen = {"incremental": [], "batch": []}

    @derived_object
    class Spy(PyMeasureCallback):
        def __init__(self, incremental):
            self.incremental = incremental

        def apply(
            self, task_scheduler, task_id, measure_candidates, builder_results, runner_results
        ):
            key = "incremental" if self.incremental else "batch"
            seen[key].append(len(measure_candidates))

    tune(
        tmp_path,
        DummyRunner(polls_until_done=1),
        trials=8,
        measure_callbacks=[AddToDatabase(), Spy(True), Spy(False)],
    )
    assert sum(seen["incremental"]) == 8 and seen["batch"] == [4, 4]


def test_the_same_call_resumes_and_a_larger_budget_tunes_the_difference(tmp_path):
    runner = DummyRunner()
    kw = {"space": wide_template, "final_selection_top_k": 0}
    with pytest.raises(KeyboardInterrupt):
        tune(tmp_path, StopAtRun(5, KeyboardInterrupt()), trials=8, seed=1, **kw)
    db = tune(tmp_path, runner, trials=8, seed=2, **kw)  # finishes the budget: 5 saved, 3 more
    assert len(db) == 8 and len(runner.inputs) == 3
    db = tune(tmp_path, runner, trials=8, seed=3, **kw)  # done: returns at once
    assert len(db) == 8 and len(runner.inputs) == 3
    db = tune(tmp_path, runner, trials=12, seed=4, **kw)  # four more
    assert len(db) == 12 and len(runner.inputs) == 7
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".write-probe")]
