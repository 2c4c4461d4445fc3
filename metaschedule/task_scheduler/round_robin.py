"""``RoundRobin``: the tasks take turns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..registry import register
from .base import TaskScheduler

if TYPE_CHECKING:
    from .warm_start import WarmStart

__all__ = ["RoundRobin"]


@register("task_scheduler", "round-robin")
class RoundRobin(TaskScheduler):
    """Gives each live task a batch in turn.

    Before choosing, batches already measured are joined (``touch_task``); the chosen task
    is joined if its batch is still in flight. With several tasks, one task's batch is
    measured while the next ones are generated and built.

    Args:
        max_fail_count, early_stopping_rounds, early_stopping_threshold, warm_start: as
            :class:`TaskScheduler`.
    """

    def __init__(
        self,
        *,
        max_fail_count: int = 3,
        early_stopping_rounds: int | None = None,
        early_stopping_threshold: float = 0.01,
        warm_start: WarmStart | None = None,
    ) -> None:
        super().__init__(
            max_fail_count=max_fail_count,
            early_stopping_rounds=early_stopping_rounds,
            early_stopping_threshold=early_stopping_threshold,
            warm_start=warm_start,
        )
        self._cursor = -1

    def _start_tuning(self) -> None:
        self._cursor = -1

    def next_task_id(self) -> int:
        n = len(self.tasks)
        for task_id in range(n):
            self.touch_task(task_id)
        for _ in range(n):
            self._cursor = (self._cursor + 1) % n
            task = self.tasks[self._cursor]
            if task.is_terminated:
                continue
            if task.is_running:
                self.join_running_task(self._cursor)
                if task.is_terminated:
                    continue
            return self._cursor
        return -1
