"""``UpdateCostModel``: train the cost model on the measured candidates."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..profiler import Profiler
from .base import MeasureCallback

if TYPE_CHECKING:
    from ..builder import BuilderResult
    from ..measure_candidate import MeasureCandidate
    from ..runner import RunnerResult
    from ..task_scheduler import TaskScheduler

__all__ = ["UpdateCostModel"]


class UpdateCostModel(MeasureCallback):
    """Calls ``cost_model.update`` with the candidates that built and ran (as TVM, failed
    candidates are left out: a failure says nothing about speed). Without a cost model,
    or with no successful candidate, it does nothing."""

    def apply(
        self,
        task_scheduler: TaskScheduler,
        task_id: int,
        measure_candidates: list[MeasureCandidate],
        builder_results: list[BuilderResult],
        runner_results: list[RunnerResult],
    ) -> None:
        task = task_scheduler.task_view(task_id)
        cost_model = task.cost_model
        if cost_model is None:
            return
        ctx = task.ctx
        kept = [
            (cand, ran)
            for cand, built, ran in zip(measure_candidates, builder_results, runner_results)
            if built.error_msg is None
            and ran.error_msg is None
            and ran.run_secs
            and sum(ran.run_secs) > 0
        ]
        if not kept:
            return
        with Profiler.timeit("CostModel/Update"):
            cost_model.update(ctx, [c for c, _ in kept], [r for _, r in kept])
