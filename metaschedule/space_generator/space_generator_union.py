"""``SpaceGeneratorUnion``: the design spaces of several generators together."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..registry import register
from ..schedule import Schedule
from .base import MutatorProbType, PostprocType, ScheduleRuleType, SpaceGenerator

if TYPE_CHECKING:
    from ..tir.function import IRModule

__all__ = ["SpaceGeneratorUnion"]


@register("space_generator", "union")
class SpaceGeneratorUnion(SpaceGenerator):
    """Concatenates the design spaces of ``space_generators``, in order.

    Args:
        space_generators: the generators; each is initialised with the same TuneContext.
        sch_rules, postprocs, mutator_probs: those of the union itself (the ones search
            strategies use), as :class:`SpaceGenerator`.
    """

    def __init__(
        self,
        space_generators: Sequence[SpaceGenerator],
        sch_rules: ScheduleRuleType = "from-target",
        postprocs: PostprocType = "from-target",
        mutator_probs: MutatorProbType = "from-target",
    ) -> None:
        super().__init__(sch_rules, postprocs, mutator_probs)
        bad = [g for g in space_generators if not isinstance(g, SpaceGenerator)]
        if bad:
            raise TypeError(f"SpaceGeneratorUnion takes SpaceGenerators, got {bad[0]!r}")
        self.space_generators = list(space_generators)

    def _initialize_with_tune_context(self, context: Any) -> None:
        super()._initialize_with_tune_context(context)
        for gen in self.space_generators:
            gen._initialize_with_tune_context(context)

    def generate_design_space(self, mod: IRModule) -> list[Schedule]:
        return [sch for gen in self.space_generators for sch in gen.generate_design_space(mod)]

    def clone(self) -> SpaceGeneratorUnion:
        new = super().clone()
        new.space_generators = [g.clone() for g in self.space_generators]
        return new

    def __str__(self) -> str:
        return f"SpaceGeneratorUnion({', '.join(str(g) for g in self.space_generators)})"
