"""``DisallowDynamicLoop``: reject schedules with a loop whose extent is not a constant."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..schedule.state import child_stmts
from ..tir import For, IntImm, Stmt
from .base import Postproc

if TYPE_CHECKING:
    from ..schedule import Schedule

__all__ = ["DisallowDynamicLoop"]


class DisallowDynamicLoop(Postproc):
    """Returns False when any loop of any function has a non-constant extent (e.g.
    ``for i in range(n)`` with a symbolic ``n``); the schedule is not modified."""

    def apply(self, sch: Schedule) -> bool:
        return not any(_has_dynamic_loop(f.body) for f in sch.mod.functions.values())


def _has_dynamic_loop(body: Stmt) -> bool:
    stack = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, For) and not isinstance(node.extent, IntImm):
            return True
        stack.extend(child_stmts(node))
    return False
