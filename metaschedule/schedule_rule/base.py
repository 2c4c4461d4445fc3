"""The schedule rule interface: rewrite one block of a design space into one or more.

A :class:`~metaschedule.space_generator.PostOrderApply` space generator applies each rule
to every block of the workload (consumers first) and collects the resulting schedules as
the design spaces. The default rules of each target kind are registered in
:mod:`metaschedule.registry` (family ``"schedule_rule"``) by the modules that implement
them (:mod:`.default_rules`); ``ScheduleRule.create(kind)`` of a kind without registered
rules is an error, not an empty list.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from .. import registry

if TYPE_CHECKING:
    from ..schedule import BlockRV, Schedule

__all__ = ["RULE_KINDS", "PyScheduleRule", "ScheduleRule", "create", "register_default_rules"]

#: TVM's target kinds for default lists; ``registry.kinds("schedule_rule")`` says which
#: are built here ("llvm" and its alias "cpu" today).
RULE_KINDS: tuple[str, ...] = ("llvm", "cuda", "cuda-tensorcore", "hexagon")

RuleFactory = Callable[[], list["ScheduleRule"]]


class ScheduleRule(ABC):
    """Rewrites one block of a schedule into the schedules it could become."""

    #: Rules that apply the custom rule named by a block's ``"schedule_rule"`` annotation
    #: set this; PostOrderApply skips annotated blocks for all other rules (as TVM).
    applies_custom_rule: bool = False

    def _initialize_with_tune_context(self, context: Any) -> None:
        """Read what the rule needs from the TuneContext (target, ...). Default: nothing."""

    @abstractmethod
    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        """The schedules that ``block`` of ``sch`` may become (``[sch]`` to leave it alone).

        A rule may modify ``sch`` in place and return it, or return copies.
        """

    def clone(self) -> ScheduleRule:
        """An independent copy (default: a deep copy)."""
        return copy.deepcopy(self)

    @staticmethod
    def create(
        kind: Literal["llvm", "cuda", "cuda-tensorcore", "hexagon"] | str,
    ) -> list[ScheduleRule]:
        """The default schedule rules of a target kind, a fresh list each call.

        Raises:
            ValueError: no rules are registered for ``kind`` ("llvm"/"cpu" are today);
                the message lists the kinds that are.
        """
        return list(registry.create("schedule_rule", kind))

    def __str__(self) -> str:
        return type(self).__name__


class PyScheduleRule(ScheduleRule):
    """The base for schedule rules written by users (TVM's name; no FFI here).

    Subclass it, decorate with ``@derived_object`` and implement :meth:`apply`
    (optionally ``_initialize_with_tune_context`` and ``clone``).
    """


def register_default_rules(kind: str, factory: RuleFactory | str) -> None:
    """Make ``ScheduleRule.create(kind)`` call ``factory`` (a function, or a
    "module:function" string imported on first use). Replaces an earlier registration.

    The same as ``registry.register("schedule_rule", kind, factory, replace=True)``.
    """
    registry.register("schedule_rule", kind, registry.lazy(factory), replace=True)


create = ScheduleRule.create
