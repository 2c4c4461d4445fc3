"""tune_relax spends a model's budget where its time is: the gradient scheduler weighs each
task by calls x best latency, and a task whose last rounds gained nothing stops early."""

from __future__ import annotations

import logging
from collections import Counter

import pytest

import metaschedule as ms
from metaschedule import relax_integration as ri
from metaschedule.runner import RunnerFuture, RunnerResult
from metaschedule.task_scheduler import GradientBased
from metaschedule.task_scheduler.early_stopping import check_early_stopping, stalled
from metaschedule.task_scheduler.task_record import TaskRecord
from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner
from metaschedule.testing.workloads import matmul_chain_model
from metaschedule.tir.structural import structural_equal


def chain_model(calls: int = 3) -> ms.graph.Function:
    """The two-task matmul chain (:func:`metaschedule.testing.workloads.matmul_chain_model`)."""
    return matmul_chain_model(calls)


class TaskRunner(DummyRunner):
    """Times by task: ``secs(task, n)`` for the task's n-th measurement ("heavy": the
    16x16 matmul of several calls, "light": the 16x32 one)."""

    def __init__(self, secs):
        super().__init__()
        self.secs = secs
        self.count: Counter[str] = Counter()

    def _future(self, inp):
        task = "light" if tuple(inp.args_info[-1].shape) == (4, 32) else "heavy"
        self.count[task] += 1
        result = RunnerResult([self.secs(task, self.count[task])], None)
        return RunnerFuture(lambda: True, lambda: result)


def tune(work_dir, secs, trials, **kw):
    """tune_relax on :func:`chain_model` without a compiler; (trials per task name, db)."""
    f = chain_model()
    db = ri.tune_relax(
        f,
        None,
        "llvm",
        str(work_dir),
        max_trials_global=trials,
        num_trials_per_iter=4,
        builder=DummyBuilder(),
        runner=TaskRunner(secs),
        database="memory",
        cost_model="random",
        strategy="replay-trace",
        seed=0,
        final_selection_top_k=0,
        **kw,
    )
    records = db.get_all_tuning_records()
    counts = {
        t.task_name: sum(structural_equal(r.workload.mod, t.mod) for r in records)
        for t in ri.extract_tasks(f, "llvm")
    }
    return counts, db


def test_chain_model_has_two_tasks_with_their_calls():
    tasks = ri.extract_tasks(chain_model(), "llvm")
    assert [(t.task_name, t.weight) for t in tasks] == [("fused_matmul_relu", 3), ("matmul", 1)]


def test_the_task_called_more_often_gets_more_trials(tmp_path):
    counts, _ = tune(tmp_path, lambda task, n: 1e-3, 16, early_stopping_rounds=None)
    assert sum(counts.values()) == 16
    assert counts["fused_matmul_relu"] > counts["matmul"], counts


def test_a_slow_task_called_once_outweighs_a_fast_one_called_thrice(tmp_path):
    """3 calls x 1 ms against 1 call x 10 ms: the budget follows latency x calls."""
    secs = {"heavy": 1e-3, "light": 10e-3}
    counts, _ = tune(tmp_path, lambda task, n: secs[task], 16, early_stopping_rounds=None)
    assert counts["matmul"] > counts["fused_matmul_relu"], counts


def test_a_task_without_gain_stops_and_leaves_its_budget(tmp_path, caplog):
    """The slow task called once never improves: it stops after 1 + 2 rounds (tune_relax's
    default early_stopping_rounds=2), and the other task, always improving, gets the rest
    (without early stopping the slow task would take most: next test)."""

    def secs(task, n):
        return 20e-3 if task == "light" else 1e-2 / n

    with caplog.at_level(logging.INFO, logger="metaschedule"):
        counts, _ = tune(tmp_path, secs, 32)
    assert counts == {"matmul": 12, "fused_matmul_relu": 20}, counts
    stops = [r.getMessage() for r in caplog.records if "early stop" in r.getMessage()]
    assert stops and all("'matmul'" in m or "improved by 0.00%" in m for m in stops), stops
    assert any("Task #1 'matmul': early stop" in m for m in stops), stops


def test_without_early_stopping_the_task_goes_on(tmp_path):
    def secs(task, n):
        return 20e-3 if task == "light" else 1e-2 / n

    counts, _ = tune(tmp_path, secs, 32, early_stopping_rounds=None)
    assert sum(counts.values()) == 32 and counts["matmul"] > 16, counts


def test_stalled_compares_the_best_over_the_last_rounds():
    task = TaskRecord.__new__(TaskRecord)
    task.best_history = [4.0, 2.0, 1.995]
    assert stalled(task, 1, 0.01) is not None  # 0.25% in the last round
    assert stalled(task, 2, 0.01) is None  # 50% over two rounds
    assert stalled(task, 3, 0.01) is None  # not enough rounds yet
    assert stalled(task, None, 0.01) is None
    task.best_history = [float("inf"), float("inf")]
    assert stalled(task, 1, 0.01) is None  # failures are max_fail_count's business


@pytest.mark.parametrize(
    "rounds, threshold", [(0, 0.01), (True, 0.01), (1.5, 0.01), (2, -0.1), (2, 1.0), (2, "x")]
)
def test_bad_early_stopping_arguments_are_named(rounds, threshold):
    with pytest.raises(ValueError, match="early_stopping"):
        check_early_stopping(rounds, threshold)
    with pytest.raises(ValueError, match="early_stopping"):
        GradientBased(early_stopping_rounds=rounds, early_stopping_threshold=threshold)


def test_the_scheduler_says_what_it_stops_by():
    assert "early_stopping_rounds=2" in str(GradientBased(early_stopping_rounds=2))
    assert str(GradientBased()) == "GradientBased(alpha=0.2, window_size=3, seed=-1)"
