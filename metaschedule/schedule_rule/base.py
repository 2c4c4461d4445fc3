"""The schedule rule interface: rewrite one block of a design space into one or more.

A :class:`~metaschedule.space_generator.PostOrderApply` space generator applies each rule
to every block of the workload (consumers first) and collects the resulting schedules as
the design spaces. The default rules of each target kind are registered with
:func:`register_default_rules` by the modules that implement them; until a kind has
registered rules, ``ScheduleRule.create(kind)`` returns an empty list.
"""

from __future__ import annotations

import copy
import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..schedule import BlockRV, Schedule

__all__ = ["RULE_KINDS", "PyScheduleRule", "ScheduleRule", "create", "register_default_rules"]

#: The target kinds that have default rules (TVM's names).
RULE_KINDS: tuple[str, ...] = ("llvm", "cuda", "cuda-tensorcore", "hexagon")

RuleFactory = Callable[[], list["ScheduleRule"]]
#: kind -> a function building the default rules, or "module:function" imported on use
_DEFAULT_RULES: dict[str, RuleFactory | str] = {}


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
    def create(kind: Literal["llvm", "cuda", "cuda-tensorcore", "hexagon"]) -> list[ScheduleRule]:
        """The default schedule rules of a target kind (empty until some are registered).

        Raises:
            ValueError: ``kind`` is not one of :data:`RULE_KINDS`.
        """
        return _build_defaults(_DEFAULT_RULES, kind, "schedule rule")

    def __str__(self) -> str:
        return type(self).__name__


class PyScheduleRule(ScheduleRule):
    """The base for schedule rules written by users (TVM's name; no FFI here).

    Subclass it, decorate with ``@derived_object`` and implement :meth:`apply`
    (optionally ``_initialize_with_tune_context`` and ``clone``).
    """


def register_default_rules(kind: str, factory: RuleFactory | str) -> None:
    """Make ``ScheduleRule.create(kind)`` call ``factory`` (a function, or a
    "module:function" string imported on first use). Replaces an earlier registration."""
    _register(_DEFAULT_RULES, kind, factory)


def _register(registry: dict, kind: str, factory: Callable | str) -> None:
    if kind not in RULE_KINDS:
        raise ValueError(f"unknown kind {kind!r}; expected one of: {', '.join(RULE_KINDS)}")
    if not (callable(factory) or (isinstance(factory, str) and ":" in factory)):
        raise TypeError(f"expected a function or a 'module:function' string, got {factory!r}")
    registry[kind] = factory


def _build_defaults(registry: dict, kind: str, what: str) -> list:
    if kind not in RULE_KINDS:
        raise ValueError(f"unknown {what} kind {kind!r}; expected one of: {', '.join(RULE_KINDS)}")
    factory = registry.get(kind)
    if factory is None:
        return []
    if isinstance(factory, str):
        module_name, func_name = factory.split(":")
        factory = getattr(importlib.import_module(module_name), func_name)
    return list(factory())


create = ScheduleRule.create
