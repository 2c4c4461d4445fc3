"""GradientBased: TVM's gradient formula, and scheduling by it."""

import math

import pytest
from scheduler_testing import make_task

from metaschedule.database import MemoryDatabase
from metaschedule.measure_callback import MeasureCallback
from metaschedule.task_scheduler import GradientBased
from metaschedule.task_scheduler.gradient_based import UNMEASURED_PRIORITY
from metaschedule.task_scheduler.task_record import TaskRecord
from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner


def with_history(sched, histories, weights):
    sched.tasks = []
    for history, weight in zip(histories, weights):
        record = TaskRecord(make_task(), weight)
        record.best_history = list(history)
        sched.tasks.append(record)


def test_priority_is_tvms_formula():
    sched = GradientBased(alpha=0.2, window_size=3)
    h = [10.0, 8.0, 6.0, 5.0, 4.5]
    with_history(
        sched,
        [h, h[:2], [], [math.inf], [math.inf, math.inf, 8.0, 7.0, 6.0]],
        [2.0, 1.0, 1.0, 1.0, 1.0],
    )
    # n = 5 >= w + 1: g1 = (h[1] - h[4]) / 3, g2 = h[4] / 5
    g1, g2 = (8.0 - 4.5) / 3, 4.5 / 5
    assert sched.priority(0) == pytest.approx(2.0 * (0.2 * g1 + 0.8 * g2))
    # n = 2 < w + 1: g1 = 0
    assert sched.priority(1) == pytest.approx(0.8 * 8.0 / 2)
    assert sched.priority(2) == UNMEASURED_PRIORITY  # never measured
    assert sched.priority(3) == UNMEASURED_PRIORITY  # only failures
    # an inf at h[n-1-w] (an early failed batch) gives g1 = 0
    assert sched.priority(4) == pytest.approx(0.8 * 6.0 / 5)


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="alpha"):
        GradientBased(alpha=1.5)
    with pytest.raises(ValueError, match="window_size"):
        GradientBased(window_size=0)
    with pytest.raises(ValueError, match="seed"):
        GradientBased(seed=-2)


def tune(sched, tasks, weights, max_trials_global, per_iter=4):
    sched.tune(
        tasks,
        weights,
        max_trials_global,
        max_trials_global,
        per_iter,
        DummyBuilder(),
        DummyRunner(),
        MeasureCallback.create("default"),
        MemoryDatabase(),
        None,
    )


def test_every_task_gets_a_first_batch_then_the_heavier_task_gets_more():
    sched = GradientBased(seed=0)
    tasks = [make_task(16, "light"), make_task(8, "heavy"), make_task(12, "mid")]
    tune(sched, tasks, [1.0, 1000.0, 1.0], max_trials_global=40)
    trials = [t.num_trials for t in sched.tasks]
    assert sum(trials) == 40
    assert min(trials) >= 4  # the first round
    # the heavy task's weighted gradient dwarfs the others after the first round
    assert trials[1] == 40 - trials[0] - trials[2] and trials[1] >= 28


def test_the_first_round_overlaps_all_tasks():
    order = []

    class Recording(GradientBased):
        def next_task_id(self):
            task_id = super().next_task_id()
            running = [t.is_running for t in self.tasks]
            order.append((task_id, running))
            return task_id

    tune(Recording(seed=1), [make_task(16, "a"), make_task(8, "b")], [1.0, 1.0], 16)
    # task 1 is picked while task 0's first batch is still in flight
    assert order[0] == (0, [False, False])
    assert order[1] == (1, [True, False])


def test_ties_are_broken_by_the_seed():
    def picks(seed):
        sched = GradientBased(seed=seed)
        tasks = [make_task(16, "a", seed=3), make_task(16, "b", seed=3)]
        tune(sched, tasks, [1.0, 1.0], 24)
        return [t.num_trials for t in sched.tasks]

    assert picks(5) == picks(5)
