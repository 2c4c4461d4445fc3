"""``ScheduleFn``: a design space written by hand as a function of a Schedule."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..registry import register
from ..schedule import Schedule
from .base import MutatorProbType, PostprocType, ScheduleFnType, ScheduleRuleType, SpaceGenerator

if TYPE_CHECKING:
    from ..tir.function import IRModule

__all__ = ["ScheduleFn"]


@register("space_generator", "schedule-fn")
class ScheduleFn(SpaceGenerator):
    """Design spaces from a schedule function (an AutoTVM-style template).

    ``sch_fn`` gets a fresh Schedule of the workload, seeded from the generator's random
    stream, and transforms it with sampling and schedule primitives. It returns None (the
    schedule it was given is the design space), a Schedule, or a list of Schedules.

    Args:
        sch_fn: the schedule function.
        sch_rules, postprocs, mutator_probs: as :class:`SpaceGenerator` (the rules are
            kept for the search strategy; the function itself does not use them).
    """

    def __init__(
        self,
        sch_fn: ScheduleFnType,
        sch_rules: ScheduleRuleType = "from-target",
        postprocs: PostprocType = "from-target",
        mutator_probs: MutatorProbType = "from-target",
    ) -> None:
        super().__init__(sch_rules, postprocs, mutator_probs)
        if not callable(sch_fn):
            raise TypeError(f"ScheduleFn needs a function of a Schedule, got {sch_fn!r}")
        self.sch_fn = sch_fn

    def generate_design_space(self, mod: IRModule) -> list[Schedule]:
        sch = self._fresh_schedule(mod)
        out = self.sch_fn(sch)
        if out is None:
            return [sch]
        if isinstance(out, Schedule):
            return [out]
        if isinstance(out, (list, tuple)) and all(isinstance(s, Schedule) for s in out):
            return list(out)
        name = getattr(self.sch_fn, "__qualname__", repr(self.sch_fn))
        raise TypeError(
            f"the schedule function {name} must return None, a Schedule or a list "
            f"of Schedules, got {type(out).__name__}: {out!r}"
        )

    def __str__(self) -> str:
        return f"ScheduleFn({getattr(self.sch_fn, '__qualname__', self.sch_fn)})"
