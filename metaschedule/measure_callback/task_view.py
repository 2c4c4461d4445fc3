"""``TaskView``: what a measure callback may read about the task it is called for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..cost_model.base import CostModel
    from ..database import Database
    from ..target import Target
    from ..tir.function import IRModule
    from ..tune_context import TuneContext

__all__ = ["TaskView"]


@dataclass(frozen=True)
class TaskView:
    """A read-only snapshot of one task, from ``TaskScheduler.task_view(task_id)``.

    Measure callbacks read the task through this view instead of the scheduler's
    internals (``task_scheduler.tasks[task_id]``), so schedulers may change how they keep
    their tasks without breaking callbacks.

    Attributes:
        task_id: the task's index in the scheduler.
        name: the task's name (``ctx.task_name``).
        ctx: the task's TuneContext (its module, target, logger, search strategy).
        num_trials: candidates of this task measured so far, the batch just measured
            included.
        database: the scheduler's database, or None.
        cost_model: the scheduler's cost model, or None.
    """

    task_id: int
    name: str
    ctx: TuneContext
    num_trials: int
    database: Database | None
    cost_model: CostModel | None

    @property
    def mod(self) -> IRModule | None:
        """The workload being tuned."""
        return self.ctx.mod

    @property
    def target(self) -> Target | Any:
        """The target the task is tuned for."""
        return self.ctx.target
