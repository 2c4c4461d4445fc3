"""Tree queries: ancestors, lowest common ancestors, the blocks of a subtree."""

from __future__ import annotations

from collections.abc import Sequence

from ...tir import (
    Block,
    BlockRealize,
    For,
    Stmt,
)
from ..state import ScheduleState, child_stmts

# ----------------------------------------------------------------------------- tree helpers


def subtree_blocks(node: Stmt) -> list[BlockRealize]:
    """Every BlockRealize under ``node`` (itself and nested ones included), in program
    order."""
    out: list[BlockRealize] = []
    stack = [node]
    while stack:
        s = stack.pop()
        if isinstance(s, BlockRealize):
            out.append(s)
        stack.extend(reversed(child_stmts(s)))
    return out


def is_ancestor(state: ScheduleState, fname: str, anc: Stmt, node: Stmt) -> bool:
    return any(a is anc for a in state.ancestors(fname, node))


def lowest_common_ancestor(state: ScheduleState, fname: str, nodes: Sequence[Stmt]) -> Stmt | None:
    """The innermost loop or block that is an ancestor of every node in ``nodes``."""
    chains = [list(state.ancestors(fname, n)) for n in nodes]
    for cand in chains[0]:
        if not isinstance(cand, (For, Block)):
            continue
        if all(any(c is cand for c in ch) for ch in chains[1:]):
            return cand
    return None
