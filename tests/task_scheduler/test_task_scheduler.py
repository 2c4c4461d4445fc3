"""The tuning loop of TaskScheduler, with RoundRobin and dummy builder/runner."""

import math

import pytest
from scheduler_testing import EventBuilder, EventRunner, make_task

from metaschedule.database import MAX_RUN_SEC, MemoryDatabase
from metaschedule.database.base import measurement_key
from metaschedule.measure_callback import MeasureCallback, PyMeasureCallback
from metaschedule.profiler import Profiler
from metaschedule.search_strategy import PySearchStrategy, ReplayTrace
from metaschedule.task_scheduler import (
    GradientBased,
    PyTaskScheduler,
    RoundRobin,
    TaskScheduler,
    create,
)
from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner
from metaschedule.utils import derived_object


def tune(
    scheduler,
    tasks,
    *,
    max_trials_global,
    max_trials_per_task=None,
    per_iter=4,
    builder=None,
    runner=None,
    database=None,
    cost_model=None,
    callbacks="default",
):
    database = database if database is not None else MemoryDatabase()
    if callbacks == "default":
        callbacks = MeasureCallback.create("default")
    scheduler.tune(
        tasks,
        [1.0] * len(tasks),
        max_trials_global,
        max_trials_per_task if max_trials_per_task is not None else max_trials_global,
        per_iter,
        builder or DummyBuilder(),
        runner or DummyRunner(),
        callbacks,
        database,
        cost_model,
    )
    return database


def test_round_robin_shares_the_budget_and_records_everything():
    tasks = [make_task(16, "a"), make_task(8, "b")]
    sched = RoundRobin()
    db = tune(sched, tasks, max_trials_global=16)
    assert [t.num_trials for t in sched.tasks] == [8, 8]
    assert all(t.is_terminated for t in sched.tasks)
    assert len(db) == 16
    for task in sched.tasks:
        workload = db.commit_workload(task.ctx.mod)
        mine = [r for r in db.get_all_tuning_records() if r.workload is workload]
        assert len(mine) == 8
        # a schedule the replay search drew twice ranks once
        assert len(db.get_top_k(workload, 100)) == len({measurement_key(r) for r in mine})
        assert 1e-3 <= task.best_latency < 11e-3  # the dummy runner's range
        assert task.flop == 2 * task.ctx.mod["main"].params[0].shape[0].value ** 3
        assert task.best_history == sorted(task.best_history, reverse=True)


def test_global_budget_cuts_the_last_batch():
    sched = RoundRobin()
    db = tune(sched, [make_task()], max_trials_global=10, per_iter=4)
    assert len(db) == 10
    assert sched.tasks[0].num_trials == 10


def test_max_trials_per_task_leaves_budget_unused_when_all_tasks_are_done():
    sched = RoundRobin()
    db = tune(
        sched,
        [make_task(16, "a"), make_task(8, "b")],
        max_trials_global=100,
        max_trials_per_task=6,
        per_iter=4,
    )
    assert [t.num_trials for t in sched.tasks] == [6, 6]
    assert len(db) == 12


@derived_object
class OneBatch(PySearchStrategy):
    """Gives one batch from a ReplayTrace, then says it is exhausted."""

    def __init__(self):
        self.inner = ReplayTrace()
        self.batches = 0
        self.post_tuned = False

    def _initialize_with_tune_context(self, context):
        self.inner._initialize_with_tune_context(context)

    def pre_tuning(self, *args, **kwargs):
        self.inner.pre_tuning(*args, **kwargs)

    def post_tuning(self):
        self.post_tuned = True
        self.inner.post_tuning()

    def generate_measure_candidates(self):
        if self.batches == 1:
            return None
        self.batches += 1
        return self.inner.generate_measure_candidates()

    def notify_runner_results(self, measure_candidates, results):
        self.inner.notify_runner_results(measure_candidates, results)

    def clone(self):
        return OneBatch()


def test_an_exhausted_task_stops_and_the_others_use_the_budget():
    strategy = OneBatch()
    sched = RoundRobin()
    tune(
        sched,
        [make_task(16, "short", strategy), make_task(8, "long")],
        max_trials_global=20,
        per_iter=4,
    )
    assert [t.num_trials for t in sched.tasks] == [4, 16]
    assert strategy.post_tuned


def test_a_task_that_keeps_failing_to_run_is_terminated(events):
    good, bad = make_task(16, "good"), make_task(8, "bad")
    bad_paths = set()

    def run_secs(path):
        if path in bad_paths:
            raise RuntimeError("injected run failure")
        return [1e-3]

    class Runner(DummyRunner):
        def run(self, runner_inputs):
            for inp in runner_inputs:
                if inp.args_info[0].shape[0] == 8:
                    bad_paths.add(inp.artifact_path)
            return super().run(runner_inputs)

    sched = RoundRobin(max_fail_count=2)
    db = tune(
        sched, [good, bad], max_trials_global=24, per_iter=4, runner=Runner(f_run_secs=run_secs)
    )
    assert sched.tasks[1].num_trials == 8  # two failed batches
    assert sched.tasks[1].run_errors == 8
    assert sched.tasks[1].best_latency == math.inf
    assert sched.tasks[0].num_trials == 16
    bad_records = db.get_all_tuning_records()
    assert sum(r.run_secs == [MAX_RUN_SEC] for r in bad_records) == 8
    assert db.query_tuning_record(bad.mod) is None  # failures are never the best


def test_build_failures_are_not_run_and_become_errors(events):
    builder = EventBuilder(events, fail_sizes={8})
    runner = EventRunner(events)
    sched = RoundRobin(max_fail_count=1)
    db = tune(
        sched,
        [make_task(16, "a"), make_task(8, "b")],
        max_trials_global=16,
        per_iter=4,
        builder=builder,
        runner=runner,
    )
    assert sched.tasks[1].build_errors == 4 and sched.tasks[1].num_trials == 4
    assert sched.tasks[0].num_trials == 12  # the other task goes on
    assert all(inp.args_info[0].shape[0] == 16 for inp in runner.inputs)
    records = db.get_all_tuning_records()
    assert sorted(r.run_secs == [MAX_RUN_SEC] for r in records).count(True) == 4


def test_building_the_next_task_overlaps_measuring_this_one(events):
    builder, runner = EventBuilder(events), EventRunner(events, polls_until_done=10**6)
    tune(
        RoundRobin(),
        [make_task(16, "a"), make_task(8, "b")],
        max_trials_global=16,
        per_iter=4,
        builder=builder,
        runner=runner,
    )
    kinds = [e[0] if e[0] == "result" else f"build{e[1][0]}" for e in events]
    # task b is built while task a's batch is still being measured
    first_result = kinds.index("result")
    assert kinds[:first_result] == ["build16", "build8"]


def test_profiler_sees_the_phases():
    with Profiler() as profiler:
        tune(RoundRobin(), [make_task()], max_trials_global=8)
    phases = profiler.get()
    for name in (
        "GenerateDesignSpace",
        "SearchStrategy/PreTuning",
        "SearchStrategy/GenerateCandidates",
        "Builder",
        "Runner",
        "SearchStrategy/NotifyRunnerResults",
        "MeasureCallback/AddToDatabase",
        "MeasureCallback/UpdateCostModel",
    ):
        assert name in phases
    assert profiler.calls()["Builder"] == 2


def test_measure_callbacks_get_aligned_results():
    seen = []

    @derived_object
    class Spy(PyMeasureCallback):
        def apply(
            self, task_scheduler, task_id, measure_candidates, builder_results, runner_results
        ):
            assert task_scheduler.tasks[task_id].ctx.task_name == ["a", "b"][task_id]
            seen.append(
                (task_id, len(measure_candidates), len(builder_results), len(runner_results))
            )

    tune(
        RoundRobin(),
        [make_task(16, "a"), make_task(8, "b")],
        max_trials_global=12,
        per_iter=3,
        callbacks=[Spy()],
    )
    assert sorted(seen) == [(0, 3, 3, 3)] * 2 + [(1, 3, 3, 3)] * 2


def test_a_user_scheduler_decides_the_order():
    @derived_object
    class FirstThenSecond(PyTaskScheduler):
        """Tunes task 0 to its per-task limit, then task 1."""

        def __init__(self):
            super().__init__()
            self.order = []

        def next_task_id(self):
            for i, task in enumerate(self.tasks):
                if not task.is_terminated:
                    if task.is_running:
                        self.join_running_task(i)
                    if task.trials_sent >= self.max_trials_per_task:
                        self.terminate_task(i)
                        continue
                    self.order.append(i)
                    return i
            return -1

    sched = FirstThenSecond()
    tune(
        sched,
        [make_task(16, "a"), make_task(8, "b")],
        max_trials_global=100,
        max_trials_per_task=8,
        per_iter=4,
    )
    assert sched.order == [0, 0, 1, 1]
    assert [t.num_trials for t in sched.tasks] == [8, 8]


def test_returning_a_terminated_task_is_an_error():
    @derived_object
    class Stubborn(PyTaskScheduler):
        def next_task_id(self):
            if not self.tasks[0].is_terminated:
                self.terminate_task(0)
                return 0  # terminated during this call: skipped
            return 0  # already terminated before the call: an error

    with pytest.raises(ValueError, match="which is terminated"):
        tune(Stubborn(), [make_task()], max_trials_global=8)


def test_task_control_methods():
    sched = RoundRobin()
    tune(sched, [make_task()], max_trials_global=4)
    assert sched.join_running_task(0) == []  # nothing in flight
    sched.terminate_task(0)  # idempotent
    sched.touch_task(0)
    with pytest.raises(ValueError, match=r"expected an int in \[0, 1\)"):
        sched.touch_task(1)


def test_touch_task_does_not_wait(events):
    sched = RoundRobin()
    runner = EventRunner(events, polls_until_done=10**6)
    task = make_task()
    db = MemoryDatabase()
    sched._setup([task], [1.0], 8, 8, 4, DummyBuilder(), runner, [], db, None)
    task.pre_tuning(8, 4, task.generate_design_space(), db, None)
    sched._start_batch(0, 8)
    sched.touch_task(0)
    assert sched.tasks[0].is_running and not [e for e in events if e[0] == "result"]
    assert len(sched.join_running_task(0)) == 4
    assert not sched.tasks[0].is_running


def test_statistics_table(capsys):
    sched = RoundRobin()
    tune(sched, [make_task(16, "a"), make_task(8, "b")], max_trials_global=8)
    sched.print_tuning_statistics()
    out = capsys.readouterr().out
    lines = out.splitlines()
    for column in (
        "FLOP",
        "Weight",
        "Speed (GFLOPS)",
        "Latency (us)",
        "Weighted Latency (us)",
        "Trials",
        "Done",
    ):
        assert column in lines[0]
    row_a = [c.strip() for c in lines[2].split("|")]
    task = sched.tasks[0]
    assert row_a[:4] == ["0", "a", str(2 * 16**3), "1"]
    assert float(row_a[4]) == pytest.approx(task.flop / task.best_latency / 1e9, rel=1e-3)
    assert float(row_a[5]) == pytest.approx(task.best_latency * 1e6, rel=1e-4)
    assert row_a[7:] == ["4", "Y"]
    assert "Total trials: 8" in out
    total = sum(t.best_latency for t in sched.tasks) * 1e6
    assert f"Total weighted latency (us): {total:.4f}" in out


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="2 tasks but 1 task_weights"):
        RoundRobin().tune(
            [make_task(), make_task()],
            [1.0],
            8,
            8,
            4,
            DummyBuilder(),
            DummyRunner(),
            [],
            None,
            None,
        )
    with pytest.raises(ValueError, match="num_trials_per_iter must be an int >= 1"):
        RoundRobin().tune(
            [make_task()], [1.0], 8, 8, 0, DummyBuilder(), DummyRunner(), [], None, None
        )
    from metaschedule.testing.tuning_records import matmul
    from metaschedule.tune_context import TuneContext

    with pytest.raises(ValueError, match="has no target"):
        RoundRobin().tune(
            [
                TuneContext(
                    matmul(8), search_strategy="replay-trace", space_generator=lambda s: None
                )
            ],
            [1.0],
            8,
            8,
            4,
            DummyBuilder(),
            DummyRunner(),
            [],
            None,
            None,
        )


def test_create():
    assert isinstance(create(), GradientBased)
    assert isinstance(TaskScheduler.create("round-robin"), RoundRobin)
    assert create("gradient", alpha=0.5).alpha == 0.5
    with pytest.raises(ValueError, match="round-robin"):
        create("fifo")
    with pytest.raises(ValueError, match="max_fail_count"):
        RoundRobin(max_fail_count=0)
    with pytest.raises(TypeError, match="next_task_id"):

        @derived_object
        class Incomplete(PyTaskScheduler):
            pass
