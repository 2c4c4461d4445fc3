"""``ReplayTrace``: candidates from design-space traces replayed with fresh decisions."""

from __future__ import annotations

from typing import Any

from ..registry import register
from ..schedule import Schedule, Trace
from .base import (
    TrialWindow,
    random_seed,
)
from .replay import ReplayStrategy

__all__ = ["ReplayTrace"]


@register("search_strategy", "replay-trace")
class ReplayTrace(ReplayStrategy):
    """Replays the trace of a random design space with its decisions removed, so that
    every sampling instruction draws anew, then runs the postprocessors.

    Candidates are independent random points; the same schedule may be drawn twice.

    Args:
        max_fail_count: attempts per candidate before giving up on it (a failed replay or
            postprocessor is one failure).
    """

    empty_batch_reason = "no design space replayed successfully"

    def __init__(self, max_fail_count: int = 100) -> None:
        if not isinstance(max_fail_count, int) or max_fail_count < 1:
            raise ValueError(f"max_fail_count must be a positive int, got {max_fail_count!r}")
        self.max_fail_count = max_fail_count
        self._window: TrialWindow | None = None

    def _initialize_with_tune_context(self, context: Any) -> None:
        self._bind(context)
        self._window = None

    def _prepare(self, design_spaces: list[Schedule]) -> None:
        self._traces = [Trace(sch.trace.insts, {}) for sch in design_spaces]

    def _sample(self) -> Schedule | None:
        for _ in range(self.max_fail_count):
            trace = self._traces[int(self.rng.integers(len(self._traces)))]
            sch = self._replayer(trace, random_seed(self.rng))
            if sch is not None:
                return sch
        return None

    def clone(self) -> ReplayTrace:
        return ReplayTrace(self.max_fail_count)

    def __str__(self) -> str:
        return f"ReplayTrace(max_fail_count={self.max_fail_count})"
