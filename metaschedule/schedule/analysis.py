"""Analyses shared by the schedule primitives.

* regions: the part of a buffer a block touches while some loops run
  (``relax_region``), unions of such regions, clamping to a buffer's bounds;
* buffers: a block's n-th read or write buffer, where a buffer is allocated;
* dataflow within a scope: the writers and readers of a buffer, a block's producers
  and consumers (siblings under the same scope block, in program order);
* block kinds: complete blocks (spatial, the only writer of what they write, no
  read-back), reduction blocks (affine bindings: ``affine.py``);
* tree queries: ancestors, lowest common ancestors, the blocks of a subtree.

Everything here reads the IR; statement surgery lives in ``edit.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..tir import (
    Add,
    And,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    FloorDiv,
    FloorMod,
    For,
    IntImm,
    IterType,
    Max,
    Min,
    Mul,
    PrimFunc,
    Range,
    Stmt,
    Sub,
    Var,
)
from ..tir.arith import Analyzer
from ..tir.expr import PrimExpr, const
from ..tir.functor import Visitor, collect_vars, post_order_visit, substitute
from .error import (
    BufferIndexError,
    NotCompleteOrReductionBlockError,
    NotOnlyWriterError,
    ScheduleError,
    StorageScopeError,
)
from .linear import relax_linear
from .state import ScheduleState, child_stmts

#: storage scopes a cache stage or ``set_scope`` may use
STORAGE_SCOPES = ("global", "local", "shared")


# ----------------------------------------------------------------------------- variables

_ARITH = (Add, Sub, Mul, FloorDiv, FloorMod, Min, Max)


def expr_vars(exprs: Iterable[PrimExpr]) -> set[Var]:
    """The variables of ``exprs``; like ``collect_vars`` but quick on the integer
    arithmetic of bindings (the hot path of trace replay)."""
    out: set[Var] = set()
    stack = list(exprs)
    while stack:
        e = stack.pop()
        if isinstance(e, Var):
            out.add(e)
        elif type(e) in _ARITH:
            stack.append(e.a)
            stack.append(e.b)
        elif not isinstance(e, IntImm):
            out |= collect_vars(e)
    return out


# ----------------------------------------------------------------------------- regions


def loop_doms(loops: Iterable[For]) -> dict[Var, Range]:
    """The iteration domain of each loop variable."""
    return {lp.loop_var: Range(lp.min, lp.extent) for lp in loops}


def analyzer_for_loops(loops: Iterable[For], analyzer: Analyzer | None = None) -> Analyzer:
    """An analyzer (a copy of ``analyzer`` if given) that knows each loop's range."""
    ana = analyzer.copy() if analyzer is not None else Analyzer()
    for lp in loops:
        ana.bind(lp.loop_var, Range(lp.min, lp.extent), allow_override=True)
    return ana


def _dom_map(loops_to_relax) -> dict[Var, Range]:
    if isinstance(loops_to_relax, Mapping):
        return dict(loops_to_relax)
    return loop_doms(loops_to_relax)


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
            fast = relax_linear(lo_e, rng.extent, dom, ana)
            if fast is not None:
                ranges.append(fast)
                continue
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


def clamp_region(region: BufferRegion, ana: Analyzer) -> BufferRegion:
    """Intersect ``region`` with the buffer's bounds (relaxation may overshoot)."""
    out = []
    for rng, dim in zip(region.region, region.buffer.shape):
        lo, hi = rng.min, ana.simplify(rng.min + rng.extent)
        lo_ok, hi_ok = ana.can_prove(lo >= 0), ana.can_prove(hi <= dim)
        if lo_ok and hi_ok:
            out.append(rng)
            continue
        lo = lo if lo_ok else ana.simplify(Max(lo, const(0, lo.dtype)))
        hi = hi if hi_ok else ana.simplify(Min(hi, dim))
        out.append(Range(lo, ana.simplify(hi - lo)))
    return BufferRegion(region.buffer, tuple(out))


def buffer_loads(node, buffer: Buffer) -> list[BufferLoad]:
    """Every load of ``buffer`` in ``node``, innermost first."""
    out: list[BufferLoad] = []
    post_order_visit(node, lambda n: out.append(n) if isinstance(n, BufferLoad)
                     and n.buffer is buffer else None)
    return out


# ----------------------------------------------------------------------------- buffers


def check_storage_scope(scope: object, primitive: str) -> str:
    """``scope`` if it is one of :data:`STORAGE_SCOPES`, else a StorageScopeError."""
    if not isinstance(scope, str) or scope not in STORAGE_SCOPES:
        raise StorageScopeError(
            f"{primitive}: storage scope {scope!r} is not one of {', '.join(STORAGE_SCOPES)}"
        )
    return scope


def nth_buffer(block: Block, index: int, kind: str, primitive: str) -> Buffer:
    """The buffer of ``block``'s ``index``-th read (kind "read") or write region."""
    regions = block.reads if kind == "read" else block.writes
    if isinstance(index, bool) or not isinstance(index, int):
        raise BufferIndexError(f"{primitive}: the {kind} buffer index must be an int, got "
                               f"{index!r}")
    if not 0 <= index < len(regions):
        names = [r.buffer.name for r in regions]
        raise BufferIndexError(
            f"{primitive}: {kind} buffer index {index} is out of range for block "
            f"{block.name_hint!r}, which has {len(regions)} {kind} buffer(s) {names}"
        )
    return regions[index].buffer


def allocation_site(func: PrimFunc, buffer: Buffer) -> Block | None:
    """The block whose ``alloc_buffers`` holds ``buffer`` (None for parameters)."""
    found: list[Block] = []

    class _Find(Visitor):
        def visit_Block(self, block: Block) -> None:
            if any(b is buffer for b in block.alloc_buffers):
                found.append(block)
            self.visit(block.init)
            self.visit(block.body)

        def visit_BlockRealize(self, realize: BlockRealize) -> None:
            self.visit(realize.block)

        def visit_For(self, loop: For) -> None:
            self.visit(loop.body)

        def visit_BufferStore(self, store) -> None:
            pass  # no statements below

    _Find().visit(func.body)
    return found[0] if found else None


# ----------------------------------------------------------------------------- dataflow


def buffers_of(regions: Iterable[BufferRegion]) -> list[Buffer]:
    out: list[Buffer] = []
    for r in regions:
        if r.buffer not in out:
            out.append(r.buffer)
    return out


def scope_of(state: ScheduleState, fname: str, realize: BlockRealize,
             primitive: str = "") -> BlockRealize:
    """The BlockRealize of ``realize``'s scope block; a ScheduleError for the root block."""
    scope = state.scope_realize(fname, realize)
    if scope is None:
        where = f"{primitive}: " if primitive else ""
        raise ScheduleError(f"{where}block {realize.block.name_hint!r} is the root block; it "
                            "has no scope to work in")
    return scope


def scope_blocks(state: ScheduleState, fname: str, realize: BlockRealize,
                 primitive: str = "") -> list[BlockRealize]:
    """The blocks of ``realize``'s scope (its siblings and itself), in program order."""
    return state.child_block_realizes(scope_of(state, fname, realize, primitive))


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


def iter_kinds_by_var(realize: BlockRealize) -> dict[Var, set[IterType]]:
    """For each variable in the block's bindings, the kinds of the iter vars it feeds."""
    kinds: dict[Var, set[IterType]] = {}
    for iv, v in zip(realize.block.iter_vars, realize.iter_values):
        for var in expr_vars((v,)):
            kinds.setdefault(var, set()).add(iv.iter_type)
    return kinds


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


# ----------------------------------------------------------------------------- predicates


def conjuncts(pred: PrimExpr) -> list[PrimExpr]:
    """``a && b && c`` as ``[a, b, c]``."""
    if isinstance(pred, And):
        return conjuncts(pred.a) + conjuncts(pred.b)
    return [pred]


def and_all(items: Iterable[PrimExpr]) -> PrimExpr:
    """The conjunction of ``items`` (``True`` for none)."""
    out: PrimExpr = const(True)
    for c in items:
        out = c if isinstance(out, IntImm) else And(out, c)
    return out


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
