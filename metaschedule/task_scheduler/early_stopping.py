"""Early stopping of a task whose last rounds gained nothing (an addition to TVM's
MetaSchedule, after Ansor's ``per_task_early_stopping``).

A *round* is one measured batch of the task. After each, the task's best latency is
compared with its best ``early_stopping_rounds`` rounds earlier: when it improved by less
than ``early_stopping_threshold`` (a share of the earlier best: 0.01 is 1%), the task is
terminated, and the other tasks share the budget it leaves. A task needs
``early_stopping_rounds + 1`` rounds before it can stop, and a task without a valid
measurement is left to ``max_fail_count``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import TaskScheduler
    from .task_record import TaskRecord

__all__ = ["check_early_stopping", "stalled", "stop_if_stalled"]


def check_early_stopping(rounds: int | None, threshold: float) -> None:
    """ValueError unless ``rounds`` is None (off) or an int >= 1 and ``threshold`` is in
    [0, 1)."""
    if rounds is not None and (
        isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1
    ):
        raise ValueError(f"early_stopping_rounds must be None (off) or an int >= 1, got {rounds!r}")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise ValueError(f"early_stopping_threshold must be a number in [0, 1), got {threshold!r}")
    if not 0.0 <= float(threshold) < 1.0:
        raise ValueError(f"early_stopping_threshold must be in [0, 1), got {threshold!r}")


def stalled(task: TaskRecord, rounds: int | None, threshold: float) -> str | None:
    """Why ``task`` should stop (its best gained less than ``threshold`` over its last
    ``rounds`` rounds), or None."""
    history = task.best_history
    if rounds is None or len(history) <= rounds:
        return None
    before, now = history[-1 - rounds], history[-1]
    if not (math.isfinite(before) and math.isfinite(now)) or before <= 0:
        return None
    gain = (before - now) / before
    if gain >= threshold:
        return None
    return (
        f"early stop: the best ({now * 1e6:.2f} us) improved by {gain:.2%} over the last "
        f"{rounds} round(s), less than early_stopping_threshold={threshold:g}; its budget "
        "goes to the other tasks"
    )


def stop_if_stalled(scheduler: TaskScheduler, task_id: int) -> None:
    """Terminate ``task_id`` if it stalled (:func:`stalled`), saying so in both logs."""
    task = scheduler.tasks[task_id]
    if task.is_terminated:
        return
    why = stalled(task, scheduler.early_stopping_rounds, scheduler.early_stopping_threshold)
    if why is None:
        return
    task.ctx.logger.info("%s", why)
    scheduler.logger.info("Task #%d %r: %s", task_id, task.name, why)
    scheduler.terminate_task(task_id)
