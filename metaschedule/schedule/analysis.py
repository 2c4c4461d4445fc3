"""Analyses shared by the schedule primitives.

* region relaxation: the part of a buffer a block touches while some loops run
  (``relax_region``), and unions of such regions;
* dataflow within a scope: the writers and readers of a buffer, a block's producers
  and consumers (siblings under the same scope block, in program order);
* block kinds: complete blocks (spatial, the only writer of what they write, no
  read-back), reduction blocks, affine bindings;
* statement surgery: the statement to remove when a block leaves its loops, and
  removing it.

Everything here reads the IR; nothing commits to the schedule state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..tir import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    For,
    IterType,
    Max,
    Min,
    Range,
    SeqStmt,
    Stmt,
    Var,
)
from ..tir.arith import Analyzer
from ..tir.arith.iter_map import is_affine_binding
from ..tir.expr import PrimExpr, const
from ..tir.functor import Mutator, Visitor, collect_vars, post_order_visit, substitute
from .error import ScheduleError
from .state import ScheduleState

__all__ = [
    "InsertionIndexError",
    "LoopPositionError",
    "NotAllBlocksUnderLoopError",
    "NotCompleteOrReductionBlockError",
    "NotInlinableError",
    "NotOnlyWriterError",
    "analyzer_for_loops",
    "buffers_of",
    "check_affine_binding",
    "check_complete_or_reduction",
    "check_only_writer",
    "consumers",
    "has_affine_binding",
    "is_ancestor",
    "is_leaf_block",
    "load_regions",
    "loop_iter_type",
    "lowest_common_ancestor",
    "not_complete_reason",
    "not_reduction_reason",
    "producers",
    "readers_in_scope",
    "region_bounds",
    "relax_region",
    "removal_target",
    "remove_stmt",
    "scope_blocks",
    "stmt_children",
    "subtree_blocks",
    "union_range",
    "union_regions",
    "writers_in_scope",
]


# ----------------------------------------------------------------------------- errors


class NotCompleteOrReductionBlockError(ScheduleError):
    """The block is neither complete (spatial, only writer) nor a well-formed reduction."""


class NotOnlyWriterError(ScheduleError):
    """Another block of the scope writes the same buffer (the dataflow is not compact)."""


class LoopPositionError(ScheduleError):
    """The loop is in another scope than the block, or inside the block itself."""


class NotAllBlocksUnderLoopError(ScheduleError):
    """Some consumers (compute_at) or producers (reverse_compute_at) are not under the loop."""


class InsertionIndexError(ScheduleError):
    """No legal insertion point, or the requested ``index`` is outside the legal range."""


class NotInlinableError(ScheduleError):
    """compute_inline / reverse_compute_inline preconditions do not hold."""


# ----------------------------------------------------------------------------- regions


def analyzer_for_loops(loops: Iterable[For], analyzer: Analyzer | None = None) -> Analyzer:
    """An analyzer (a copy of ``analyzer`` if given) that knows each loop's range."""
    ana = analyzer.copy() if analyzer is not None else Analyzer()
    for lp in loops:
        ana.bind(lp.loop_var, Range(lp.min, lp.extent), allow_override=True)
    return ana


def _dom_map(loops_to_relax) -> dict[Var, Range]:
    if isinstance(loops_to_relax, Mapping):
        return dict(loops_to_relax)
    return {lp.loop_var: Range(lp.min, lp.extent) for lp in loops_to_relax}


def _bindings(realize_bindings) -> dict[Var, PrimExpr]:
    if isinstance(realize_bindings, BlockRealize):
        return {iv.var: v for iv, v in zip(realize_bindings.block.iter_vars,
                                             realize_bindings.iter_values)}
    return dict(realize_bindings or {})


def relax_region(
    regions: Sequence[BufferRegion],
    realize_bindings: BlockRealize | Mapping[Var, PrimExpr] | None,
    loops_to_relax: Iterable[For] | Mapping[Var, Range],
    analyzer: Analyzer | None = None,
) -> list[BufferRegion]:
    """The regions touched while ``loops_to_relax`` run over their whole ranges.

    Args:
        regions: access regions written in a block's iteration variables.
        realize_bindings: the block's BlockRealize (or a map iter var -> binding); its
            bindings replace the iteration variables.
        loops_to_relax: the loops (or a map var -> Range) to relax; every other variable
            stays symbolic.
        analyzer: what is known about the symbolic variables (outer loop ranges).

    Returns:
        one region per input region, with ``min``/``extent`` in the remaining variables.
        A dimension whose bounds cannot be found becomes the whole dimension.
    """
    ana = analyzer if analyzer is not None else Analyzer()
    dom = _dom_map(loops_to_relax)
    vmap = _bindings(realize_bindings)
    out = []
    for region in regions:
        ranges = []
        for d, rng in enumerate(region.region):
            lo_e = substitute(rng.min, vmap)
            hi_e = substitute(rng.min + rng.extent - 1, vmap)
            lo = ana.int_set(lo_e, dom).min
            hi = ana.int_set(hi_e, dom).max
            if lo is None or hi is None:
                shape = region.buffer.shape[d]
                ranges.append(Range(const(0, shape.dtype), shape))
            else:
                ranges.append(Range(lo, ana.simplify(hi - lo + 1)))
        out.append(BufferRegion(region.buffer, tuple(ranges)))
    return out


def region_bounds(region: BufferRegion, analyzer: Analyzer) -> list[tuple[PrimExpr, PrimExpr]]:
    """Per dimension, the inclusive ``(lo, hi)`` bounds of a region."""
    return [(r.min, analyzer.simplify(r.min + r.extent - 1)) for r in region.region]


def _has_minmax(e: PrimExpr) -> bool:
    found = []
    post_order_visit(e, lambda n: found.append(n) if isinstance(n, (Min, Max)) else None)
    return bool(found)


def union_range(a: Range, b: Range, analyzer: Analyzer, full: Range) -> Range:
    """The smallest range holding ``a`` and ``b``; ``full`` when no simple bound is found."""
    lo = analyzer.simplify(Min(a.min, b.min))
    hi = analyzer.simplify(Max(a.min + a.extent - 1, b.min + b.extent - 1))
    if _has_minmax(lo) or _has_minmax(hi):
        return full
    return Range(lo, analyzer.simplify(hi - lo + 1))


def union_regions(regions: Sequence[BufferRegion], analyzer: Analyzer) -> list[BufferRegion]:
    """Merge regions of the same buffer into their bounding box, keeping first-seen order."""
    merged: dict[Buffer, BufferRegion] = {}
    for r in regions:
        old = merged.get(r.buffer)
        if old is None:
            merged[r.buffer] = r
            continue
        full = BufferRegion.full_region(r.buffer).region
        merged[r.buffer] = BufferRegion(r.buffer, tuple(
            union_range(x, y, analyzer, f) for x, y, f in zip(old.region, r.region, full)))
    return list(merged.values())


def load_regions(expr, analyzer: Analyzer | None = None) -> list[BufferRegion]:
    """One-point regions of every BufferLoad in ``expr``, merged per buffer."""
    regions: list[BufferRegion] = []

    def f(n):
        if isinstance(n, BufferLoad):
            regions.append(BufferRegion(n.buffer, tuple(
                Range(i, const(1, i.dtype)) for i in n.indices)))

    post_order_visit(expr, f)
    return union_regions(regions, analyzer or Analyzer())


# ----------------------------------------------------------------------------- dataflow


def buffers_of(regions: Iterable[BufferRegion]) -> list[Buffer]:
    out: list[Buffer] = []
    for r in regions:
        if r.buffer not in out:
            out.append(r.buffer)
    return out


def scope_blocks(state: ScheduleState, fname: str, realize: BlockRealize) -> list[BlockRealize]:
    """The blocks of ``realize``'s scope (its siblings and itself), in program order."""
    scope = state.scope_realize(fname, realize)
    if scope is None:
        raise ScheduleError(f"block {realize.block.name_hint!r} is the root block; it has no "
                            "scope to move in")
    return state.child_block_realizes(scope)


def writers_in_scope(blocks: Sequence[BlockRealize], buffer: Buffer) -> list[BlockRealize]:
    return [r for r in blocks if any(w.buffer is buffer for w in r.block.writes)]


def readers_in_scope(blocks: Sequence[BlockRealize], buffer: Buffer) -> list[BlockRealize]:
    return [r for r in blocks if any(w.buffer is buffer for w in r.block.reads)]


def producers(blocks: Sequence[BlockRealize], realize: BlockRealize) -> list[BlockRealize]:
    """Blocks before ``realize`` in ``blocks`` that write a buffer it reads."""
    reads = set(buffers_of(realize.block.reads))
    out = []
    for r in blocks:
        if r is realize:
            break
        if reads & set(buffers_of(r.block.writes)):
            out.append(r)
    return out


def consumers(blocks: Sequence[BlockRealize], realize: BlockRealize) -> list[BlockRealize]:
    """Blocks after ``realize`` in ``blocks`` that read a buffer it writes."""
    writes = set(buffers_of(realize.block.writes))
    idx = next(i for i, r in enumerate(blocks) if r is realize)
    return [r for r in blocks[idx + 1:] if writes & set(buffers_of(r.block.reads))]


# ----------------------------------------------------------------------------- block kinds


def is_leaf_block(block: Block) -> bool:
    """True when no block is nested in ``block``."""
    found = []
    post_order_visit(block.body, lambda n: found.append(n) if isinstance(n, BlockRealize)
                     else None)
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
            "written by a single block of the scope")


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
    bad = [iv.var.name for iv in b.iter_vars
           if iv.iter_type not in (IterType.DATA_PAR, IterType.COMM_REDUCE)]
    if bad:
        return f"its iteration variables {bad} are neither data-parallel nor reductions"
    other = _other_writer(blocks, realize)
    if other is not None:
        return f"block {other[0].block.name_hint!r} also writes buffer {other[1].name!r}"
    red = {iv.var for iv in b.iter_vars if iv.iter_type == IterType.COMM_REDUCE}
    for w in b.writes:
        used = set().union(*(collect_vars(r.min) | collect_vars(r.extent) for r in w.region))
        if used & red:
            return (f"its write region of {w.buffer.name!r} depends on the reduction "
                    f"variables {sorted(v.name for v in used & red)}")
    return None


def check_complete_or_reduction(blocks: Sequence[BlockRealize], realize: BlockRealize,
                                primitive: str) -> None:
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
        f"{why_r}")


def has_affine_binding(state: ScheduleState, fname: str, realize: BlockRealize) -> bool:
    """True when the block's bindings are a surjective affine map of its loops."""
    loops = state.loops_above(fname, realize)
    ranges = {lp.loop_var: Range(lp.min, lp.extent) for lp in loops}
    if not realize.iter_values:
        return True
    return is_affine_binding(realize.iter_values, ranges, realize.predicate)


def check_affine_binding(state: ScheduleState, fname: str, realize: BlockRealize,
                         primitive: str) -> None:
    from .error import NotAffineError

    if not has_affine_binding(state, fname, realize):
        vals = ", ".join(str(v) for v in realize.iter_values)
        raise NotAffineError(
            f"{primitive}: block {realize.block.name_hint!r} has bindings [{vals}] that are "
            "not an affine map of its loops; it needs affine bindings")


def loop_iter_type(state: ScheduleState, fname: str, loop: For) -> IterType:
    """DATA_PAR if the loop only feeds data-parallel block variables, COMM_REDUCE if it
    only feeds reduction ones (or both), OPAQUE if it feeds anything else."""
    kinds: set[IterType] = set()
    for r in subtree_blocks(loop):
        for iv, v in zip(r.block.iter_vars, r.iter_values):
            if loop.loop_var in collect_vars(v):
                kinds.add(iv.iter_type)
    if kinds <= {IterType.DATA_PAR}:
        return IterType.DATA_PAR
    if kinds <= {IterType.DATA_PAR, IterType.COMM_REDUCE}:
        return IterType.COMM_REDUCE
    return IterType.OPAQUE


# ----------------------------------------------------------------------------- tree helpers


def subtree_blocks(node: Stmt) -> list[BlockRealize]:
    """Every BlockRealize under ``node`` (nested ones included), in program order."""
    out: list[BlockRealize] = []

    class _V(Visitor):
        def visit_BlockRealize(self, r):
            out.append(r)
            self.generic_visit(r)

    _V().visit(node)
    return out


def is_ancestor(state: ScheduleState, fname: str, anc: Stmt, node: Stmt) -> bool:
    return any(a is anc for a in state.ancestors(fname, node))


def lowest_common_ancestor(state: ScheduleState, fname: str,
                           nodes: Sequence[Stmt]) -> Stmt | None:
    """The innermost loop or block that is an ancestor of every node in ``nodes``."""
    chains = [list(state.ancestors(fname, n)) for n in nodes]
    for cand in chains[0]:
        if not isinstance(cand, (For, Block)):
            continue
        if all(any(c is cand for c in ch) for ch in chains[1:]):
            return cand
    return None


def removal_target(state: ScheduleState, fname: str, realize: BlockRealize) -> Stmt:
    """The statement to delete when ``realize`` leaves its place: its highest enclosing
    loop (below the scope block) that holds nothing but this block, else the block."""
    target: Stmt = realize
    for anc in state.ancestors(fname, realize):
        if not isinstance(anc, For):
            break
        blocks = state.child_block_realizes(anc)
        if len(blocks) != 1 or blocks[0] is not realize:
            break
        target = anc
    return target


class _Remover(Mutator):
    """Drops ``target`` from the SeqStmt holding it; only statements are walked."""

    def __init__(self, target: Stmt):
        self.target = target
        self.done = False

    def visit(self, node):
        if isinstance(node, tuple) and node and isinstance(node[0], Stmt):
            kept = []
            for x in node:
                if x is self.target:
                    self.done = True
                    continue
                kept.append(self.visit(x))
            same = len(kept) == len(node) and all(a is b for a, b in zip(kept, node))
            return node if same else tuple(kept)
        if isinstance(node, Stmt):
            if node is self.target:
                raise ScheduleError(
                    "cannot remove the block: it is the whole body of its enclosing loop or "
                    "block, which would become empty")
            return super().visit(node)
        return node

    def visit_SeqStmt(self, node: SeqStmt):
        new = self.generic_visit(node)
        if new is not node:
            if not new.seq:
                raise ScheduleError("removing the block would leave an empty scope")
            if len(new.seq) == 1:
                return new.seq[0]
        return new


def remove_stmt(root: Stmt, target: Stmt) -> Stmt:
    """``root`` without ``target``, which must sit in a SeqStmt; a sequence left with one
    statement becomes that statement.

    Raises:
        ScheduleError: ``target`` is the only statement of its loop or block body.
    """
    if root is target:
        raise ScheduleError("removing the block would leave an empty scope")
    rm = _Remover(target)
    new = rm.visit(root)
    if not rm.done:
        raise ScheduleError("internal error: the statement to remove is not under the root")
    return new


def stmt_children(stmt: Stmt) -> list[Stmt]:
    """The statements of a loop body, flattened one level (a SeqStmt's items)."""
    return list(stmt.seq) if isinstance(stmt, SeqStmt) else [stmt]
