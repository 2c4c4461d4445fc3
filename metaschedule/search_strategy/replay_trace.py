"""``ReplayTrace``: candidates from design-space traces replayed with fresh decisions."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..schedule import Schedule, Trace
from .base import (
    ContextBound,
    SearchStrategy,
    TraceReplayer,
    TrialWindow,
    check_design_spaces,
    random_seed,
    timed,
)
from .measure_candidate import MeasureCandidate

if TYPE_CHECKING:
    from ..cost_model.base import CostModel
    from ..database import Database
    from ..runner import RunnerResult

__all__ = ["ReplayTrace"]


class ReplayTrace(ContextBound, SearchStrategy):
    """Replays the trace of a random design space with its decisions removed, so that
    every sampling instruction draws anew, then runs the postprocessors.

    Candidates are independent random points; the same schedule may be drawn twice.

    Args:
        max_fail_count: attempts per candidate before giving up on it (a failed replay or
            postprocessor is one failure).
    """

    def __init__(self, max_fail_count: int = 100) -> None:
        if not isinstance(max_fail_count, int) or max_fail_count < 1:
            raise ValueError(f"max_fail_count must be a positive int, got {max_fail_count!r}")
        self.max_fail_count = max_fail_count
        self._window: TrialWindow | None = None

    def _initialize_with_tune_context(self, context: Any) -> None:
        self._bind(context)
        self._window = None

    def pre_tuning(
        self,
        max_trials: int,
        num_trials_per_iter: int,
        design_spaces: list[Schedule],
        database: Database | None = None,
        cost_model: CostModel | None = None,
    ) -> None:
        self._check_bound()
        if self._window is not None:
            raise ValueError("pre_tuning was already called without a matching post_tuning")
        check_design_spaces(design_spaces)
        self._window = TrialWindow(max_trials, num_trials_per_iter)
        self._traces = [Trace(sch.trace.insts, {}) for sch in design_spaces]
        self._replayer = TraceReplayer(self.mod, self.postprocs)

    def post_tuning(self) -> None:
        self._require_window()
        self._log(logging.INFO, "ReplayTrace failures: %s", self._replayer.summary())
        self._window = None

    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        n = self._require_window().next_batch()
        if n == 0:
            return None
        with timed("ReplayTrace/GenerateCandidates"):
            schs = [sch for sch in (self._sample() for _ in range(n)) if sch is not None]
        if not schs:
            self._log(
                logging.WARNING,
                "ReplayTrace: no design space replayed successfully (%s); stopping",
                self._replayer.summary(),
            )
            return None
        return self._candidates(schs)

    def _sample(self) -> Schedule | None:
        for _ in range(self.max_fail_count):
            trace = self._traces[int(self.rng.integers(len(self._traces)))]
            sch = self._replayer(trace, random_seed(self.rng))
            if sch is not None:
                return sch
        return None

    def notify_runner_results(
        self, measure_candidates: list[MeasureCandidate], results: list[RunnerResult]
    ) -> None:
        self._require_window().advance(len(measure_candidates))

    def clone(self) -> ReplayTrace:
        return ReplayTrace(self.max_fail_count)

    def _require_window(self) -> TrialWindow:
        if self._window is None:
            raise ValueError("ReplayTrace is not tuning: call pre_tuning first")
        return self._window

    def __str__(self) -> str:
        return f"ReplayTrace(max_fail_count={self.max_fail_count})"
