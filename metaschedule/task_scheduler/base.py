"""The task scheduler: drives the tuning of several tasks (seed 000's loop).

``tune`` prepares every task (design spaces, ``pre_tuning``), then repeats until the global
budget is spent or every task is done:

1. ``next_task_id()`` picks a task (the policy of each scheduler);
2. its search strategy generates a batch of candidates (None: the task is done);
3. the builder builds them, and the runner starts measuring them; the runner's futures
   are kept and the loop goes on, so the next task's candidates are generated and built
   while this batch is measured (seed 002);
4. results are collected as they arrive (every loop iteration, and while a batch is
   awaited) and handed at once to the *incremental* measure callbacks
   (``MeasureCallback.incremental``: AddToDatabase, RemoveBuildArtifact), so each result
   is in the database as soon as it is measured;
5. ``join_running_task`` waits for a batch, notifies the strategy, records the latencies
   and applies the other measure callbacks (the cost model's update) to the whole batch.
   Schedulers join a task before giving it its next batch, and ``touch_task`` joins
   batches already done.

Resuming: the schedules the database already holds for a task's workload count toward
``max_trials_global`` and ``max_trials_per_task`` (a task whose budget is spent is not
even prepared); a schedule measured more than once (the final selection re-measures the
best) counts once, with the measurement that ranks it. Interruptions: on any exception
or Ctrl-C, the results that arrived are committed, the artifacts of candidates still in
flight are removed, and the exception propagates.

A task stops (``terminate_task``) when its strategy has nothing more to give, when it
reached ``max_trials_per_task``, after ``max_fail_count`` measured batches in a row in
which every candidate failed to build or run, or when its last rounds gained too little
(:mod:`.early_stopping`); the other tasks go on.
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Union

from .. import registry
from ..builder import Builder, BuilderInput, BuilderResult
from ..builder.base import remove_artifact
from ..database.base import latest_per_schedule
from ..logging import get_logger
from ..measure_callback.base import MeasureCallback
from ..measure_callback.task_view import TaskView
from ..profiler import Profiler
from ..runner import Runner, RunnerFuture, RunnerInput, RunnerResult
from .early_stopping import check_early_stopping, stop_if_stalled
from .interrupt import deferred_interrupt
from .task_record import TaskRecord, statistics_table

if TYPE_CHECKING:
    from ..cost_model.base import CostModel
    from ..database import Database
    from ..measure_candidate import MeasureCandidate
    from ..tune_context import TuneContext
    from .warm_start import WarmStart

__all__ = ["PyTaskScheduler", "TaskScheduler", "create"]

#: batches in a row without any candidate before a task is terminated
MAX_EMPTY_BATCHES = 5


class TaskScheduler(ABC):
    """Decides which task to tune next, and runs the tuning loop (module docstring).

    Args:
        max_fail_count: measured batches in a row whose candidates all failed (to build
            or to run) before a task is terminated.
        early_stopping_rounds, early_stopping_threshold: stop a task whose best gained
            less than the threshold (a share) over that many rounds; None: never
            (:mod:`.early_stopping`; not in TVM).
        warm_start: schedules measured first (:class:`~.warm_start.WarmStart`; not in TVM).

    While :meth:`tune` runs, measure callbacks and policies read ``tasks`` (one
    :class:`TaskRecord` per task), ``database``, ``cost_model``, ``builder``, ``runner``
    and ``measure_callbacks``. ``logger`` receives the progress lines and the statistics.
    """

    TaskSchedulerType = Union["TaskScheduler", Literal["gradient", "round-robin"]]

    # Class defaults, so that user subclasses that skip ``super().__init__`` still work
    # (``tune`` sets every attribute).
    max_fail_count: int = 3
    logger: logging.Logger = get_logger("task_scheduler")
    tasks: list[TaskRecord]
    database: Database | None = None
    cost_model: CostModel | None = None
    builder: Builder | None = None
    runner: Runner | None = None
    measure_callbacks: list[MeasureCallback]
    max_trials_global: int = 0
    max_trials_per_task: int = 0
    num_trials_per_iter: int = 0
    early_stopping_rounds: int | None = None
    early_stopping_threshold: float = 0.01
    warm_start: WarmStart | None = None

    def __init__(
        self,
        *,
        max_fail_count: int = 3,
        early_stopping_rounds: int | None = None,
        early_stopping_threshold: float = 0.01,
        warm_start: WarmStart | None = None,
    ) -> None:
        if not isinstance(max_fail_count, int) or max_fail_count < 1:
            raise ValueError(f"max_fail_count must be a positive int, got {max_fail_count!r}")
        check_early_stopping(early_stopping_rounds, early_stopping_threshold)
        self.max_fail_count = max_fail_count
        self.early_stopping_rounds = early_stopping_rounds
        self.early_stopping_threshold = float(early_stopping_threshold)
        self.warm_start = warm_start
        self.tasks = []
        self.measure_callbacks = []

    # ------------------------------------------------------------------ the policy
    @abstractmethod
    def next_task_id(self) -> int:
        """The id of the task to tune next (not terminated), or -1 when none is left.

        Policies should join the chosen task (``join_running_task``) if it is running;
        the loop joins it otherwise.
        """

    def _start_tuning(self) -> None:
        """Reset the policy's own state at the start of :meth:`tune`. Default: nothing."""

    # ------------------------------------------------------------------ the loop
    def tune(
        self,
        tasks: list[TuneContext],
        task_weights: Sequence[float],
        max_trials_global: int,
        max_trials_per_task: int,
        num_trials_per_iter: int,
        builder: Builder,
        runner: Runner,
        measure_callbacks: list[MeasureCallback],
        database: Database | None,
        cost_model: CostModel | None,
    ) -> None:
        """Tune ``tasks`` until ``max_trials_global`` candidates are measured in all, or
        every task is done (see the module docstring)."""
        self._setup(
            tasks,
            task_weights,
            max_trials_global,
            max_trials_per_task,
            num_trials_per_iter,
            builder,
            runner,
            measure_callbacks,
            database,
            cost_model,
        )
        try:
            self._tune()
        except BaseException:
            self._abort()
            raise
        self._progress("on_finish")  # progress hook
        self.logger.info(
            "Tuning finished: %d trial(s)\n%s",
            sum(t.num_trials for t in self.tasks),
            self.tuning_statistics(),
        )

    def _tune(self) -> None:
        num_sent = self._resume()
        for task in self.tasks:
            left = self.max_trials_per_task - task.trials_sent
            if left <= 0 or num_sent >= self.max_trials_global:
                task.is_terminated = True
                task.ctx.logger.info(
                    "Already %d trial(s) in the database: nothing left to tune within the budget",
                    task.num_trials,
                )
                continue
            with Profiler.timeit("GenerateDesignSpace"):
                spaces = task.ctx.generate_design_space()
            task.ctx.logger.info("Generated %d design space(s)", len(spaces))
            with Profiler.timeit("SearchStrategy/PreTuning"):
                task.ctx.pre_tuning(
                    left, self.num_trials_per_iter, spaces, self.database, self.cost_model
                )
            task.pre_tuned = True
        if self.warm_start is not None:
            self.warm_start.start(self)
        self._start_tuning()
        self._progress("on_start")  # progress hook
        while num_sent < self.max_trials_global:
            self._flush_all()
            before = [t.is_terminated for t in self.tasks]
            task_id = self.next_task_id()
            if task_id == -1:
                break
            self._check_task_id(task_id, "next_task_id returned")
            task = self.tasks[task_id]
            if task.is_terminated:
                if before[task_id]:
                    raise ValueError(
                        f"{type(self).__name__}.next_task_id returned task "
                        f"{task_id}, which is terminated; return a live task or -1"
                    )
                continue  # it was joined and failed once too often
            if task.is_running:
                self.join_running_task(task_id)
                if task.is_terminated:
                    continue
            num_sent += self._start_batch(task_id, self.max_trials_global - num_sent)
        for task_id, task in enumerate(self.tasks):
            if task.is_running:
                self.join_running_task(task_id)
            self.terminate_task(task_id)
        for task in self.tasks:
            if task.pre_tuned:
                task.pre_tuned = False
                task.ctx.post_tuning()

    def _resume(self) -> int:
        """Count the distinct schedules the database already holds for each task's
        workload toward the budgets (so tuning again resumes rather than starts over);
        their total."""
        database = self.database
        if database is None:
            return 0
        records = None
        total = 0
        for task in self.tasks:
            if not database.has_workload(task.ctx.mod):
                continue
            if records is None:
                records = database.get_all_tuning_records()
            workload = database.commit_workload(task.ctx.mod)
            mine = latest_per_schedule(
                [r for r in records if r.workload is workload or r.workload.shash == workload.shash]
            )
            if mine:
                task.resume([r.mean_run_sec for r in mine])
                task.ctx.logger.info(
                    "Resuming: %d trial(s) of this workload already in the database", len(mine)
                )
                total += len(mine)
        return total

    def _setup(
        self,
        tasks,
        task_weights,
        max_trials_global,
        max_trials_per_task,
        num_trials_per_iter,
        builder,
        runner,
        measure_callbacks,
        database,
        cost_model,
    ) -> None:
        if len(tasks) != len(task_weights):
            raise ValueError(f"tune: {len(tasks)} tasks but {len(task_weights)} task_weights")
        for name, value, low in (
            ("max_trials_global", max_trials_global, 0),
            ("max_trials_per_task", max_trials_per_task, 0),
            ("num_trials_per_iter", num_trials_per_iter, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"tune: {name} must be an int >= {low}, got {value!r}")
        for i, ctx in enumerate(tasks):
            missing = [
                attr
                for attr in ("mod", "target", "space_generator", "search_strategy")
                if getattr(ctx, attr, None) is None
            ]
            if missing:
                raise ValueError(
                    f"tune: task {i} ({getattr(ctx, 'task_name', '?')!r}) has no "
                    f"{', '.join(missing)}; give its TuneContext one"
                )
        if not isinstance(builder, Builder) or not isinstance(runner, Runner):
            raise TypeError(f"tune needs a Builder and a Runner, got {builder!r} and {runner!r}")
        self.tasks = [TaskRecord(ctx, w) for ctx, w in zip(tasks, task_weights)]
        self.max_trials_global = max_trials_global
        self.max_trials_per_task = max_trials_per_task
        self.num_trials_per_iter = num_trials_per_iter
        self.builder = builder
        self.runner = runner
        self.measure_callbacks = list(measure_callbacks)
        self.database = database
        self.cost_model = cost_model

    def _start_batch(self, task_id: int, global_budget: int) -> int:
        """Generate, build and start measuring a batch of ``task_id``; candidates sent."""
        task = self.tasks[task_id]
        budget = min(global_budget, self.max_trials_per_task - task.trials_sent)
        if budget <= 0:
            task.ctx.logger.info("Reached max_trials_per_task=%d", self.max_trials_per_task)
            self.terminate_task(task_id)
            return 0
        self._progress("on_phase", task_id, "searching")  # progress hook
        with Profiler.timeit("SearchStrategy/GenerateCandidates"):
            candidates = task.ctx.generate_measure_candidates()
        if candidates is None:
            task.ctx.logger.info("The search strategy has no more candidates")
            self.terminate_task(task_id)
            return 0
        if self.warm_start is not None:
            candidates = self.warm_start.batch(self, task_id, list(candidates))
        candidates = list(candidates)[:budget]
        if not candidates:
            task.ctx.notify_runner_results([], [])
            task.empty_batches_in_a_row += 1
            if task.empty_batches_in_a_row >= MAX_EMPTY_BATCHES:
                task.ctx.logger.warning(
                    "%d batches in a row without a candidate; stopping", task.empty_batches_in_a_row
                )
                self.terminate_task(task_id)
            return 0
        task.empty_batches_in_a_row = 0
        self._progress("on_phase", task_id, "building")  # progress hook
        builder_results = self._build(task.ctx, candidates)
        try:
            futures = self._run(task.ctx, candidates, builder_results)
        except BaseException:
            for r in builder_results:
                remove_artifact(r.artifact_path)
            raise
        task.start_batch(candidates, builder_results, futures)
        self._progress("on_phase", task_id, "measuring")  # progress hook
        self._flush(task_id)  # the failed builds are results already
        return len(candidates)

    def _build(self, ctx: TuneContext, candidates: list[MeasureCandidate]) -> list[BuilderResult]:
        inputs = [BuilderInput(c.sch.mod, ctx.target) for c in candidates]
        with Profiler.timeit("Builder"):
            results = list(self.builder.build(inputs))
        if len(results) != len(inputs):
            raise ValueError(
                f"{type(self.builder).__name__}.build returned {len(results)} "
                f"results for {len(inputs)} inputs; it must return one per input"
            )
        return results

    def _run(
        self,
        ctx: TuneContext,
        candidates: list[MeasureCandidate],
        builder_results: list[BuilderResult],
    ) -> list[RunnerFuture]:
        device_type = ctx.target.kind
        built = [i for i, r in enumerate(builder_results) if r.error_msg is None]
        inputs = [
            RunnerInput(
                builder_results[i].artifact_path, device_type, list(candidates[i].args_info)
            )
            for i in built
        ]
        with Profiler.timeit("Runner"):
            started = list(self.runner.run(inputs)) if inputs else []
        if len(started) != len(inputs):
            raise ValueError(
                f"{type(self.runner).__name__}.run returned {len(started)} futures "
                f"for {len(inputs)} inputs; it must return one per input"
            )
        running = iter(started)
        return [
            next(running) if r.error_msg is None else _failed_future(r.error_msg)
            for r in builder_results
        ]

    # ------------------------------------------------------------------ task control
    def join_running_task(self, task_id: int) -> list[RunnerResult]:
        """Wait for the batch of ``task_id`` to be measured, tell its search strategy,
        record the results and apply the measure callbacks; the results ([] when the
        task has no batch in flight)."""
        self._check_task_id(task_id, "join_running_task got")
        task = self.tasks[task_id]
        if not task.is_running:
            return []
        candidates, builder_results = task.measure_candidates, task.builder_results
        with Profiler.timeit("Runner"):
            while not self._flush(task_id):
                self._flush_all()
                task.wait_next()  # blocks on one result: progress even if done() lags
        results = task.end_batch()
        with Profiler.timeit("SearchStrategy/NotifyRunnerResults"):
            task.ctx.notify_runner_results(candidates, results)
        task.record_results(builder_results, results)
        self._progress("on_batch", task_id)  # progress hook
        for callback in self.measure_callbacks:  # the incremental ones saw each result
            if not getattr(callback, "incremental", False):
                with Profiler.timeit(f"MeasureCallback/{type(callback).__name__}"):
                    callback.apply(self, task_id, candidates, builder_results, results)
        self._log_batch(task_id, builder_results, results)
        if task.failed_batches_in_a_row >= self.max_fail_count and not task.is_terminated:
            first = next(
                b.error_msg or r.error_msg
                for b, r in zip(builder_results, results)
                if b.error_msg or r.error_msg
            )
            msg = (
                f"every candidate of the last {task.failed_batches_in_a_row} batches failed; "
                f"terminating the task. The last error:\n{first}"
            )
            task.ctx.logger.warning("%s", msg)
            self.logger.warning("Task #%d %r: %s", task_id, task.name, msg.splitlines()[0])
            self.terminate_task(task_id)
        stop_if_stalled(self, task_id)
        return results

    def task_view(self, task_id: int) -> TaskView:
        """The read-only view of task ``task_id`` that measure callbacks use."""
        self._check_task_id(task_id, "task_view got")
        task = self.tasks[task_id]
        return TaskView(
            task_id, task.name, task.ctx, task.num_trials, self.database, self.cost_model
        )

    def terminate_task(self, task_id: int) -> None:
        """Mark ``task_id`` done (joining its batch in flight first). Idempotent."""
        self._check_task_id(task_id, "terminate_task got")
        task = self.tasks[task_id]
        if task.is_terminated:
            return
        if task.is_running:
            self.join_running_task(task_id)
            if task.is_terminated:
                return
        task.is_terminated = True
        remaining = sum(not t.is_terminated for t in self.tasks)
        self.logger.info(
            "Task #%d %r has finished after %d trial(s). Remaining task(s): %d",
            task_id,
            task.name,
            task.num_trials,
            remaining,
        )
        task.ctx.logger.info("Finished after %d trial(s)", task.num_trials)

    def touch_task(self, task_id: int) -> None:
        """Join ``task_id``'s batch if its measurements are all done (never waits)."""
        self._check_task_id(task_id, "touch_task got")
        task = self.tasks[task_id]
        if task.is_running and self._flush(task_id):
            self.join_running_task(task_id)

    # ------------------------------------------------------------------ results as they arrive
    def _flush(self, task_id: int) -> bool:
        """Collect the results of ``task_id``'s batch that arrived and hand them to the
        incremental callbacks (the database commits each at once); whether all arrived."""
        task = self.tasks[task_id]
        if not task.is_running:
            return True
        task.collect_arrived()
        undelivered = task.undelivered()
        if undelivered:
            self._deliver(task_id, undelivered)
        return task.all_arrived

    def _flush_all(self) -> None:
        for task_id, task in enumerate(self.tasks):
            if task.is_running:
                self._flush(task_id)

    def _deliver(self, task_id: int, indices: list[int]) -> None:
        task = self.tasks[task_id]
        cands = [task.measure_candidates[i] for i in indices]
        built = [task.builder_results[i] for i in indices]
        ran = [task.runner_results[i] for i in indices]
        with deferred_interrupt():  # a commit is not cut in half by Ctrl-C
            for callback in self.measure_callbacks:
                if getattr(callback, "incremental", False):
                    with Profiler.timeit(f"MeasureCallback/{type(callback).__name__}"):
                        callback.apply(self, task_id, cands, built, ran)
            task.delivered.update(indices)
        for i in indices:
            self._progress("on_result", task_id, _latency(task.runner_results[i]))  # hook

    def _abort(self) -> None:
        """On an exception or Ctrl-C: commit the results that arrived, remove the
        artifacts of the candidates still in flight, forget the batches in flight."""
        for task_id, task in enumerate(self.tasks):
            if not task.is_running:
                continue
            try:
                task.collect_arrived()
                pending = task.undelivered()
                if pending:
                    self._deliver(task_id, pending)
            except Exception as err:  # noqa: BLE001 - already failing: report, go on
                self.logger.warning(
                    "Task #%d %r: could not save the last results: %s", task_id, task.name, err
                )
            for i, b in enumerate(task.builder_results):
                if i not in task.delivered:
                    remove_artifact(b.artifact_path)
            task.end_batch()
        for task in self.tasks:
            if task.pre_tuned:
                task.pre_tuned = False
                try:
                    task.ctx.post_tuning()
                except Exception as err:  # noqa: BLE001 - already failing: report, go on
                    self.logger.warning("Task %r: post_tuning failed: %s", task.name, err)

    # ------------------------------------------------------------------ reporting
    def tuning_statistics(self) -> str:
        """The statistics table (see :meth:`print_tuning_statistics`) as text; the
        latencies are the best over the whole database (earlier runs included)."""
        return statistics_table(self.tasks, self._database_best())

    def _database_best(self) -> list[float] | None:
        """Per task, the best latency over the database and this run; None without one."""
        if self.database is None:
            return None
        best = []
        for task in self.tasks:
            try:
                record = self.database.query_tuning_record(task.ctx.mod, task.ctx.target)
            except Exception:  # noqa: BLE001 - a custom database: this run's own best
                record = None
            best.append(
                min(task.best_latency, record.mean_run_sec if record is not None else math.inf)
            )
        return best

    def _progress(self, event: str, *args) -> None:
        """Tell the run's progress display (``logger.progress``, set by TuningLogs)."""
        sink = getattr(self.logger, "progress", None)
        if sink is not None:
            getattr(sink, event)(self, *args)

    def print_tuning_statistics(self) -> None:
        """Print a table per task: FLOP, weight, speed (GFLOPS), best latency, weighted
        latency, trials and whether it is done; then the total trials and the total
        weighted latency."""
        print(self.tuning_statistics(), flush=True)

    def _log_batch(
        self, task_id: int, builder_results: list[BuilderResult], results: list[RunnerResult]
    ) -> None:
        task = self.tasks[task_id]
        failed = sum(1 for b, r in zip(builder_results, results) if b.error_msg or r.error_msg)
        done = sum(t.num_trials for t in self.tasks)
        best = (
            f"best {task.best_latency * 1e6:.2f} us ({task.gflops:.2f} GFLOPS)"
            if task.gflops > 0
            else "no valid measurement yet"
        )
        self.logger.info(
            "[%d/%d] Task #%d %r: %d measured, %d failed; %d trial(s), %s",
            done,
            self.max_trials_global,
            task_id,
            task.name,
            len(results),
            failed,
            task.num_trials,
            best,
            extra={"progress": (done, self.max_trials_global)},
        )
        task.ctx.logger.info("Batch of %d measured (%d failed); %s", len(results), failed, best)
        for b, r in zip(builder_results, results):
            if b.error_msg or r.error_msg:
                task.ctx.logger.info("A candidate failed: %s", b.error_msg or r.error_msg)

    def _check_task_id(self, task_id: int, where: str) -> None:
        if (
            isinstance(task_id, bool)
            or not isinstance(task_id, int)
            or not (0 <= task_id < len(self.tasks))
        ):
            raise ValueError(
                f"{type(self).__name__}: {where} task id {task_id!r}; expected an "
                f"int in [0, {len(self.tasks)})"
            )

    @staticmethod
    def create(
        kind: Literal["round-robin", "gradient"] | str = "gradient", *args: Any, **kwargs: Any
    ) -> TaskScheduler:
        """Create a task scheduler: "gradient" (GradientBased), "round-robin" (or another
        registered kind, see :mod:`metaschedule.registry`).

        Raises:
            ValueError: an unknown kind (the message lists the known ones).
        """
        return registry.create("task_scheduler", kind, *args, **kwargs)

    def __str__(self) -> str:
        return type(self).__name__


class PyTaskScheduler(TaskScheduler):
    """The base for task schedulers written by users (TVM's name; no FFI here).

    Subclass it, decorate with ``@derived_object`` and implement :meth:`next_task_id`
    (optionally override the others, calling the base versions).
    """


create = TaskScheduler.create


def _latency(result: RunnerResult) -> float | None:
    """The mean run time of a successful measurement, else None."""
    if result.error_msg is not None or not result.run_secs:
        return None
    return sum(result.run_secs) / len(result.run_secs)


def _failed_future(error_msg: str) -> RunnerFuture:
    """A finished future: the candidate was not run because its build failed."""
    result = RunnerResult(None, f"not run: the build failed: {error_msg}")
    return RunnerFuture(lambda: True, lambda: result)
