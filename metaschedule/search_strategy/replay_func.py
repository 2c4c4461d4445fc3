"""``ReplayFunc``: candidates from running the space generator again for each one."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..schedule import Schedule, ScheduleError
from .base import (
    ContextBound,
    SearchStrategy,
    TraceReplayer,
    TrialWindow,
    check_design_spaces,
    timed,
)
from .measure_candidate import MeasureCandidate

if TYPE_CHECKING:
    from ..cost_model.base import CostModel
    from ..database import Database
    from ..runner import RunnerResult

__all__ = ["ReplayFunc"]

#: attempts per candidate before giving up on it (TVM retries forever)
MAX_FAIL_COUNT = 100


class ReplayFunc(ContextBound, SearchStrategy):
    """Each candidate is a random design space from a fresh call of the TuneContext's
    space generator (whose random stream advances, so each call samples anew), then
    post-processed. The ``design_spaces`` given to ``pre_tuning`` are only checked."""

    def __init__(self) -> None:
        self._window: TrialWindow | None = None

    def _initialize_with_tune_context(self, context: Any) -> None:
        self._bind(context)
        if context.space_generator is None:
            raise ValueError("ReplayFunc needs a TuneContext with a space_generator")
        self.space_generator = context.space_generator
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
        self._replayer = TraceReplayer(self.mod, self.postprocs)

    def post_tuning(self) -> None:
        self._require_window()
        self._log(logging.INFO, "ReplayFunc failures: %s", self._replayer.summary())
        self._window = None

    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        n = self._require_window().next_batch()
        if n == 0:
            return None
        with timed("ReplayFunc/GenerateCandidates"):
            schs = [sch for sch in (self._sample() for _ in range(n)) if sch is not None]
        if not schs:
            self._log(
                logging.WARNING,
                "ReplayFunc: no design space passed the postprocessors (%s); stopping",
                self._replayer.summary(),
            )
            return None
        return self._candidates(schs)

    def _sample(self) -> Schedule | None:
        for _ in range(MAX_FAIL_COUNT):
            try:
                spaces = self.space_generator.generate_design_space(self.mod)
            except ScheduleError as err:  # a template may sample an illegal combination
                self._replayer.failures[f"space generator: {type(err).__name__}"] += 1
                continue
            if not spaces:
                raise ValueError(
                    f"the space generator {self.space_generator} generated no design space"
                )
            sch = spaces[int(self.rng.integers(len(spaces)))]
            if self._replayer.apply_postprocs(sch):
                return sch
        return None

    def notify_runner_results(
        self, measure_candidates: list[MeasureCandidate], results: list[RunnerResult]
    ) -> None:
        self._require_window().advance(len(measure_candidates))

    def clone(self) -> ReplayFunc:
        return ReplayFunc()

    def _require_window(self) -> TrialWindow:
        if self._window is None:
            raise ValueError("ReplayFunc is not tuning: call pre_tuning first")
        return self._window
