"""``ApplyCustomRule``: schedule a block with the function its annotation names."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .base import ScheduleRule

if TYPE_CHECKING:
    from ..schedule import BlockRV, Schedule

__all__ = ["CUSTOM_RULE_KEY", "ApplyCustomRule", "custom_rule_name", "register_custom_rule"]

#: the block annotation naming a custom rule (as TVM)
CUSTOM_RULE_KEY = "schedule_rule"

CustomRule = Callable[["Schedule", "BlockRV"], "list[Schedule] | Schedule | None"]
#: "meta_schedule.<target key>.<rule name>" -> the rule (TVM's global function names)
_CUSTOM_RULES: dict[str, CustomRule] = {}
_TARGET_KEYS = {"cpu": ("cpu",), "cuda": ("cuda", "gpu")}

_logger = logging.getLogger(__name__)


def custom_rule_name(name: str, target_key: str) -> str:
    """The registry name of a custom rule: ``meta_schedule.<target_key>.<name>``."""
    return f"meta_schedule.{target_key}.{name}"


def register_custom_rule(
    name: str,
    func: CustomRule | None = None,
    *,
    target_keys: Sequence[str] = ("cpu",),
    override: bool = False,
):
    """Register ``func(sch, block) -> list of schedules`` as the custom rule ``name`` for
    the targets with one of ``target_keys`` ("cpu", "cuda", "gpu"). Used as a decorator
    when ``func`` is omitted. A block annotated ``schedule_rule = name`` is then scheduled
    by ``func`` alone (TVM registers ``meta_schedule.<key>.<name>`` global functions).

    Raises:
        ValueError: the name is taken for a key and ``override`` is False.
    """

    def register(f: CustomRule) -> CustomRule:
        if not callable(f):
            raise TypeError(f"a custom rule must be a function (sch, block), got {f!r}")
        for key in target_keys:
            full = custom_rule_name(name, key)
            if full in _CUSTOM_RULES and not override:
                raise ValueError(
                    f"custom rule {full!r} is already registered; pass override=True to replace it"
                )
            _CUSTOM_RULES[full] = f
        return f

    return register if func is None else register(func)


class ApplyCustomRule(ScheduleRule):
    """Apply the custom rule named by a block's ``"schedule_rule"`` annotation (as TVM's).

    PostOrderApply lets only this rule see annotated blocks. The rule is looked up for
    each key of the target (cpu: "cpu"; cuda: "cuda", "gpu"); its result (a list of
    schedules, one schedule, or None for the schedule it modified in place) replaces the
    block's design spaces. An unknown name is logged as a warning and the annotation
    removed, so the other rules schedule the block. The value "None" means no rule.
    """

    applies_custom_rule = True

    def __init__(self) -> None:
        self.target_keys: tuple[str, ...] | None = None

    def _initialize_with_tune_context(self, context: Any) -> None:
        target = getattr(context, "target", None)
        if target is not None:
            self.target_keys = _TARGET_KEYS.get(target.kind, (target.kind,))

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        name = sch.get(block).annotations.get(CUSTOM_RULE_KEY)
        if name is None or name == "None":
            return [sch]
        if self.target_keys is None:
            raise ValueError(
                "ApplyCustomRule needs a target: initialise it with a TuneContext "
                "that has one (PostOrderApply does this)"
            )
        for key in self.target_keys:
            rule = _CUSTOM_RULES.get(custom_rule_name(str(name), key))
            if rule is not None:
                result = rule(sch, block)
                if result is None:
                    return [sch]
                return [result] if not isinstance(result, (list, tuple)) else list(result)
        tried = ", ".join(custom_rule_name(str(name), k) for k in self.target_keys)
        _logger.warning(
            "Unknown schedule rule %r for target keys %s; checked: %s. The block "
            "is scheduled by the other rules.",
            name,
            list(self.target_keys),
            tried,
        )
        sch.unannotate(block, CUSTOM_RULE_KEY)
        return [sch]

    def __repr__(self) -> str:
        return "ApplyCustomRule()"
