"""``PostOrderApply``: design spaces from applying schedule rules to every block."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..registry import register
from ..schedule import BlockRV, Schedule, ScheduleError
from ..schedule.state import child_stmts
from ..tir.stmt import Block, Stmt
from .base import MutatorProbType, PostprocType, ScheduleRuleType, SpaceGenerator

if TYPE_CHECKING:
    from ..tir.function import IRModule

__all__ = ["PostOrderApply", "collect_blocks"]

CUSTOM_RULE_KEY = "schedule_rule"


@register("space_generator", "post-order-apply")
class PostOrderApply(SpaceGenerator):
    """Applies each schedule rule to each block, consumers before producers (as TVM).

    The blocks (the root block included) are listed in post order (a block after the
    blocks nested in it, siblings in program order) and visited from the end of that
    list: the root first, then the last consumer back to the first producer. Rules run one
    after the other; each rule is applied to every block of every schedule the previous
    rules produced, and a rule that returns several schedules forks the design space.
    Blocks that a previous rule removed (e.g. inlined) are skipped; so are blocks with a
    ``"schedule_rule"`` annotation, except for rules that apply custom rules.

    Args:
        f_block_filter: ``f(block) -> bool``; only blocks for which it is true get rules.
        sch_rules, postprocs, mutator_probs: as :class:`SpaceGenerator`.
    """

    def __init__(
        self,
        f_block_filter: Callable[[Block], bool] | None = None,
        sch_rules: ScheduleRuleType = "from-target",
        postprocs: PostprocType = "from-target",
        mutator_probs: MutatorProbType = "from-target",
    ) -> None:
        super().__init__(sch_rules, postprocs, mutator_probs)
        if f_block_filter is not None and not callable(f_block_filter):
            raise TypeError(f"f_block_filter must be a function of a Block, got {f_block_filter!r}")
        self.f_block_filter = f_block_filter

    def generate_design_space(self, mod: IRModule) -> list[Schedule]:
        if self.sch_rules is None:
            raise ValueError(
                "PostOrderApply: sch_rules is 'from-target' but no TuneContext "
                "initialised it; pass a list of rules or use a TuneContext"
            )
        sch = self._fresh_schedule(mod)
        blocks = collect_blocks(sch, self.f_block_filter)
        result = [sch]
        for rule in self.sch_rules:
            stack: list[tuple[Schedule, list[BlockRV]]] = [(s, list(blocks)) for s in result]
            result = []
            while stack:
                sch, todo = stack.pop()
                if not todo:
                    result.append(sch)
                    continue
                block = todo.pop()
                try:
                    node = sch.get(block)
                except ScheduleError:  # removed by an earlier rule
                    stack.append((sch, todo))
                    continue
                if CUSTOM_RULE_KEY in node.annotations and not rule.applies_custom_rule:
                    stack.append((sch, todo))
                    continue
                for new in rule.apply(sch, block):
                    stack.append((new, list(todo)))
        return result


def collect_blocks(
    sch: Schedule, f_block_filter: Callable[[Block], bool] | None = None
) -> list[BlockRV]:
    """BlockRVs of the blocks of the function worked on (or of every function), in post
    order, keeping those ``f_block_filter`` accepts. Looked up with ``get_block``, so the
    lookups are in the trace (as TVM)."""
    funcs = [sch.func_working_on] if sch.func_working_on is not None else list(sch.mod)
    out = []
    for fname in funcs:
        names: list[str] = []
        _post_order(sch.mod[fname].body, names, f_block_filter)  # names are unique
        out.extend(sch.get_block(name, fname) for name in names)
    return out


def _post_order(stmt: Stmt, names: list[str], f_block_filter) -> None:
    for child in child_stmts(stmt):
        _post_order(child, names, f_block_filter)
    if isinstance(stmt, Block) and (f_block_filter is None or f_block_filter(stmt)):
        names.append(stmt.name_hint)
