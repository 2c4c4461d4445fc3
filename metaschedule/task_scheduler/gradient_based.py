"""``GradientBased``: tune next the task whose weighted latency is expected to drop most.

As TVM's gradient-based scheduler (after Ansor's): every task first gets one batch; from
then on each task's best latency after each of its batches forms a history ``h`` (n
entries), and its priority is the weighted estimate of how much its latency will drop::

    g1 = (h[n-1-w] - h[n-1]) / w   if n >= w + 1 else 0   # recent improvement per batch
    g2 = h[n-1] / n                                      # optimistic: best / batches so far
    priority = weight * (alpha * g1 + (1 - alpha) * g2)

A task without a valid measurement yet gets the highest priority (it cannot be judged);
all-equal priorities are broken at random. Difference from TVM: a failed early batch
(``inf`` in the history) gives ``g1 = 0`` rather than a huge jump from TVM's 1e9 ms
placeholder, which would keep choosing a task that merely started to work.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..registry import register
from .base import TaskScheduler

if TYPE_CHECKING:
    from .warm_start import WarmStart

__all__ = ["GradientBased"]

#: the priority of a task without a valid measurement (TVM's 1e9)
UNMEASURED_PRIORITY = 1e9


@register("task_scheduler", "gradient")
class GradientBased(TaskScheduler):
    """Gradient-based task scheduling (see the module docstring).

    Args:
        alpha: the weight of the recent improvement ``g1`` against ``g2``, in [0, 1].
        window_size: ``w``, the batches over which the recent improvement is measured.
        seed: the seed for breaking ties; -1 draws one from the OS.
        max_fail_count, early_stopping_rounds, early_stopping_threshold, warm_start: as
            :class:`TaskScheduler`.
    """

    def __init__(
        self,
        *,
        alpha: float = 0.2,
        window_size: int = 3,
        seed: int = -1,
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
        if not 0.0 <= float(alpha) <= 1.0:
            raise ValueError(f"GradientBased: alpha must be in [0, 1], got {alpha!r}")
        if isinstance(window_size, bool) or not isinstance(window_size, int) or window_size < 1:
            raise ValueError(f"GradientBased: window_size must be an int >= 1, got {window_size!r}")
        if not isinstance(seed, int) or seed < -1:
            raise ValueError(f"GradientBased: seed must be -1 or a non-negative int, got {seed!r}")
        self.alpha = float(alpha)
        self.window_size = window_size
        self.seed = seed
        self._rng = np.random.default_rng(None if seed == -1 else seed)
        self._rounds = 0

    def _start_tuning(self) -> None:
        self._rounds = 0

    def priority(self, task_id: int) -> float:
        """The priority of ``task_id`` from its best-latency history (module docstring)."""
        task = self.tasks[task_id]
        history = task.best_history
        n = len(history)
        if n == 0 or not math.isfinite(history[-1]):
            return UNMEASURED_PRIORITY
        best = history[-1]
        w = self.window_size
        g1 = 0.0
        if n >= w + 1 and math.isfinite(history[n - 1 - w]):
            g1 = (history[n - 1 - w] - best) / w
        g2 = best / n
        return task.task_weight * (self.alpha * g1 + (1.0 - self.alpha) * g2)

    def next_task_id(self) -> int:
        n = len(self.tasks)
        # The first round: every task once, without waiting for the others' results.
        while self._rounds < n:
            task_id = self._rounds
            self._rounds += 1
            if not self.tasks[task_id].is_terminated:
                return task_id
        if self._rounds == n:  # then wait for all of them, so that all have a history
            self._rounds += 1
            for task_id in range(n):
                self.join_running_task(task_id)
        for task_id in range(n):
            self.touch_task(task_id)
        alive = [i for i in range(n) if not self.tasks[i].is_terminated]
        if not alive:
            return -1
        priorities = [self.priority(i) for i in alive]
        if max(priorities) == min(priorities):
            task_id = alive[int(self._rng.integers(len(alive)))]
        else:
            task_id = alive[int(np.argmax(priorities))]
        if self.tasks[task_id].is_running:
            self.join_running_task(task_id)
        return task_id

    def __str__(self) -> str:
        stop = self.early_stopping_rounds
        extra = f", early_stopping_rounds={stop}" if stop is not None else ""
        extra += ", warm_start" if self.warm_start is not None else ""
        return (
            f"GradientBased(alpha={self.alpha}, window_size={self.window_size}, "
            f"seed={self.seed}{extra})"
        )
