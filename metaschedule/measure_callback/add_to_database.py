"""``AddToDatabase``: commit every measured candidate to the database as a record."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..database import MAX_RUN_SEC, TuningRecord
from .base import MeasureCallback

if TYPE_CHECKING:
    from ..builder import BuilderResult
    from ..measure_candidate import MeasureCandidate
    from ..runner import RunnerResult
    from ..task_scheduler import TaskScheduler

__all__ = ["AddToDatabase"]


class AddToDatabase(MeasureCallback):
    """Commits one :class:`TuningRecord` per candidate to the scheduler's database.

    A candidate that failed to build or run is committed too, with ``run_secs=[1e10]``
    (TVM's convention): the database then knows it was tried, so a resumed search does
    not measure it again, and it is never returned as the best. Without a database the
    callback does nothing.
    """

    incremental = True  # each result as soon as it arrives

    def apply(
        self,
        task_scheduler: TaskScheduler,
        task_id: int,
        measure_candidates: list[MeasureCandidate],
        builder_results: list[BuilderResult],
        runner_results: list[RunnerResult],
    ) -> None:
        task = task_scheduler.task_view(task_id)
        database = task.database
        if database is None:
            return
        ctx = task.ctx
        if ctx.mod is None:
            raise ValueError(f"AddToDatabase: task #{task_id} {task.name!r} has no module")
        workload = database.commit_workload(ctx.mod)
        for cand, built, ran in zip(measure_candidates, builder_results, runner_results):
            failed = built.error_msg is not None or ran.run_secs is None
            run_secs = [MAX_RUN_SEC] if failed or ran.run_secs is None else list(ran.run_secs)
            database.commit_tuning_record(
                TuningRecord(
                    trace=cand.sch.trace,
                    workload=workload,
                    run_secs=run_secs,
                    target=ctx.target,
                    args_info=list(cand.args_info),
                )
            )
