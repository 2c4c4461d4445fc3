"""The tuning loop shared by the replay strategies: each candidate is an independent sample."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..measure_candidate import MeasureCandidate
from .base import (
    ContextBound,
    SearchStrategy,
    TraceReplayer,
    TrialWindow,
    timed,
)

if TYPE_CHECKING:
    from ..cost_model.base import CostModel
    from ..database import Database
    from ..runner import RunnerResult
    from ..schedule import Schedule


class ReplayStrategy(ContextBound, SearchStrategy):
    """Draws every candidate with ``_sample()`` (None: gave up) until the trials run out.

    Subclasses implement ``_sample`` and may override ``_prepare(design_spaces)``;
    ``empty_batch_reason`` says in the log why a batch came back empty.
    """

    empty_batch_reason = "no candidate could be sampled"
    _window: TrialWindow | None = None

    def _prepare(self, design_spaces: list[Schedule]) -> None:
        """Called by ``pre_tuning`` once the trial window is set."""

    def _sample(self) -> Schedule | None:
        raise NotImplementedError

    def pre_tuning(
        self,
        max_trials: int,
        num_trials_per_iter: int,
        design_spaces: list[Schedule],
        database: Database | None = None,
        cost_model: CostModel | None = None,
    ) -> None:
        self._check_pre_tuning(self._window is not None, design_spaces)
        self._window = TrialWindow(max_trials, num_trials_per_iter)
        self._prepare(design_spaces)
        self._replayer = TraceReplayer(self.mod, self.postprocs)

    def post_tuning(self) -> None:
        self._require_window()
        name = type(self).__name__
        self._log(logging.INFO, "%s failures: %s", name, self._replayer.summary())
        self._window = None

    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        n = self._require_window().next_batch()
        if n == 0:
            return None
        name = type(self).__name__
        with timed(f"{name}/GenerateCandidates"):
            schs = [sch for sch in (self._sample() for _ in range(n)) if sch is not None]
        if not schs:
            self._log(
                logging.WARNING,
                "%s: %s (%s); stopping",
                name,
                self.empty_batch_reason,
                self._replayer.summary(),
            )
            return None
        return self._candidates(schs)

    def notify_runner_results(
        self, measure_candidates: list[MeasureCandidate], results: list[RunnerResult]
    ) -> None:
        self._require_window().advance(len(measure_candidates))

    def _require_window(self) -> TrialWindow:
        if self._window is None:
            raise ValueError(f"{type(self).__name__} is not tuning: call pre_tuning first")
        return self._window
