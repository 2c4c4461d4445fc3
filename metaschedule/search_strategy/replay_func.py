"""``ReplayFunc``: candidates from running the space generator again for each one."""

from __future__ import annotations

from typing import Any

from ..registry import register
from ..schedule import Schedule, ScheduleError
from .base import (
    TrialWindow,
)
from .replay import ReplayStrategy

__all__ = ["ReplayFunc"]

#: attempts per candidate before giving up on it (TVM retries forever)
MAX_FAIL_COUNT = 100


@register("search_strategy", "replay-func")
class ReplayFunc(ReplayStrategy):
    """Each candidate is a random design space from a fresh call of the TuneContext's
    space generator (whose random stream advances, so each call samples anew), then
    post-processed. The ``design_spaces`` given to ``pre_tuning`` are only checked."""

    empty_batch_reason = "no design space passed the postprocessors"

    def __init__(self) -> None:
        self._window: TrialWindow | None = None

    def _initialize_with_tune_context(self, context: Any) -> None:
        self._bind(context)
        if context.space_generator is None:
            raise ValueError("ReplayFunc needs a TuneContext with a space_generator")
        self.space_generator = context.space_generator
        self._window = None

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

    def clone(self) -> ReplayFunc:
        return ReplayFunc()
