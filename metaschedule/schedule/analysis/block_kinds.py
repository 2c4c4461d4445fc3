"""Block kinds: complete blocks (spatial, the only writer of what they write, no
read-back), reduction blocks; the iteration kind each loop feeds.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...tir import (
    Block,
    BlockRealize,
    Buffer,
    For,
    IterType,
    Stmt,
    Var,
)
from ...tir.functor import collect_vars, post_order_visit
from ..error import (
    NotCompleteOrReductionBlockError,
    NotOnlyWriterError,
)
from ..state import ScheduleState, child_stmts
from .dataflow import buffers_of, writers_in_scope
from .regions import expr_vars
from .tree import subtree_blocks

# ----------------------------------------------------------------------------- block kinds


def is_leaf_block(block: Block) -> bool:
    """True when no block is nested in ``block``."""
    found = []
    post_order_visit(block.body, lambda n: found.append(n) if isinstance(n, BlockRealize) else None)
    return not found


def _other_writer(blocks, realize) -> tuple[BlockRealize, Buffer] | None:
    for buf in buffers_of(realize.block.writes):
        for w in writers_in_scope(blocks, buf):
            if w is not realize:
                return w, buf
    return None


def check_only_writer(blocks: Sequence[BlockRealize], realize: BlockRealize) -> None:
    """Raise unless ``realize`` is the only block of the scope writing its outputs."""
    other = _other_writer(blocks, realize)
    if other is not None:
        w, buf = other
        raise NotOnlyWriterError(
            f"block {realize.block.name_hint!r} is not the only writer of buffer {buf.name!r}: "
            f"block {w.block.name_hint!r} writes it too; the primitive needs each buffer "
            "written by a single block of the scope"
        )


def not_complete_reason(blocks: Sequence[BlockRealize], realize: BlockRealize) -> str | None:
    """Why the block is not complete (None if it is).

    Complete: every iteration variable is data-parallel, it is the only writer of its
    outputs in the scope, and it does not read what it writes.
    """
    b = realize.block
    red = [iv.var.name for iv in b.iter_vars if iv.iter_type != IterType.DATA_PAR]
    if red:
        return f"its iteration variables {red} are not data-parallel"
    if b.init is not None:
        return "it has an init statement"
    other = _other_writer(blocks, realize)
    if other is not None:
        return f"block {other[0].block.name_hint!r} also writes buffer {other[1].name!r}"
    both = set(buffers_of(b.reads)) & set(buffers_of(b.writes))
    if both:
        return f"it reads the buffer(s) it writes: {sorted(x.name for x in both)}"
    return None


def not_reduction_reason(blocks: Sequence[BlockRealize], realize: BlockRealize) -> str | None:
    """Why the block is not a reduction block (None if it is).

    Reduction: an init statement, only data-parallel and reduction iteration variables,
    the only writer of its outputs, and written indices free of reduction variables.
    """
    b = realize.block
    if b.init is None:
        return "it has no init statement"
    bad = [
        iv.var.name
        for iv in b.iter_vars
        if iv.iter_type not in (IterType.DATA_PAR, IterType.COMM_REDUCE)
    ]
    if bad:
        return f"its iteration variables {bad} are neither data-parallel nor reductions"
    other = _other_writer(blocks, realize)
    if other is not None:
        return f"block {other[0].block.name_hint!r} also writes buffer {other[1].name!r}"
    red = {iv.var for iv in b.iter_vars if iv.iter_type == IterType.COMM_REDUCE}
    for w in b.writes:
        used = set().union(*(collect_vars(r.min) | collect_vars(r.extent) for r in w.region))
        if used & red:
            return (
                f"its write region of {w.buffer.name!r} depends on the reduction "
                f"variables {sorted(v.name for v in used & red)}"
            )
    return None


def check_complete_or_reduction(
    blocks: Sequence[BlockRealize], realize: BlockRealize, primitive: str
) -> None:
    """Raise unless the block is complete or a reduction block."""
    why_c = not_complete_reason(blocks, realize)
    if why_c is None:
        return
    why_r = not_reduction_reason(blocks, realize)
    if why_r is None:
        return
    raise NotCompleteOrReductionBlockError(
        f"{primitive}: block {realize.block.name_hint!r} must be a complete block or a "
        f"reduction block; it is not complete because {why_c}, and not a reduction because "
        f"{why_r}"
    )


def iter_kinds_by_var(realize: BlockRealize) -> dict[Var, set[IterType]]:
    """For each variable in the block's bindings, the kinds of the iter vars it feeds."""
    kinds: dict[Var, set[IterType]] = {}
    for iv, v in zip(realize.block.iter_vars, realize.iter_values):
        for var in expr_vars((v,)):
            kinds.setdefault(var, set()).add(iv.iter_type)
    return kinds


def data_par_loops(chain: Sequence[For]) -> list[bool]:
    """For each loop of a chain (outermost first, each inside the previous): whether it
    feeds only data-parallel iter vars of the blocks under it (or none), i.e. whether
    :func:`loop_iter_type` is DATA_PAR. One walk of the outermost loop, not one per loop."""
    if not chain:
        return []
    index = {lp.loop_var: i for i, lp in enumerate(chain)}
    kinds: list[set[IterType]] = [set() for _ in chain]
    stack: list[tuple[Stmt, tuple[int, ...]]] = [(chain[0], ())]
    while stack:
        node, active = stack.pop()
        if isinstance(node, For):
            i = index.get(node.loop_var)
            if i is not None and chain[i] is node:
                active = (*active, i)
        elif isinstance(node, BlockRealize):
            by_var = iter_kinds_by_var(node)
            for i in active:
                kinds[i] |= by_var.get(chain[i].loop_var, set())
        stack.extend((child, active) for child in child_stmts(node))
    return [k <= {IterType.DATA_PAR} for k in kinds]


def loop_iter_type(state: ScheduleState, fname: str, loop: For) -> IterType:
    """DATA_PAR if the loop only feeds data-parallel block variables, COMM_REDUCE if it
    only feeds reduction ones (or both), OPAQUE if it feeds anything else."""
    kinds: set[IterType] = set()
    for r in subtree_blocks(loop):
        kinds |= iter_kinds_by_var(r).get(loop.loop_var, set())
    if kinds <= {IterType.DATA_PAR}:
        return IterType.DATA_PAR
    if kinds <= {IterType.DATA_PAR, IterType.COMM_REDUCE}:
        return IterType.COMM_REDUCE
    return IterType.OPAQUE
