"""The part of a buffer a block touches while some loops run (``relax_region``),
unions of such regions, clamping to a buffer's bounds; the variables of expressions and
conjunctions of predicates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ...tir import (
    Add,
    And,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    FloorDiv,
    FloorMod,
    For,
    IntImm,
    Max,
    Min,
    Mul,
    Range,
    Sub,
    Var,
)
from ...tir.arith import Analyzer
from ...tir.expr import PrimExpr, const
from ...tir.functor import collect_vars, post_order_visit, substitute
from ..linear import relax_linear

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
        return {
            iv.var: v
            for iv, v in zip(realize_bindings.block.iter_vars, realize_bindings.iter_values)
        }
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
        merged[r.buffer] = BufferRegion(
            r.buffer,
            tuple(union_range(x, y, analyzer, f) for x, y, f in zip(old.region, r.region, full)),
        )
    return list(merged.values())


def load_regions(expr, analyzer: Analyzer | None = None) -> list[BufferRegion]:
    """One-point regions of every BufferLoad in ``expr``, merged per buffer."""
    regions: list[BufferRegion] = []

    def f(n):
        if isinstance(n, BufferLoad):
            regions.append(
                BufferRegion(n.buffer, tuple(Range(i, const(1, i.dtype)) for i in n.indices))
            )

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
    post_order_visit(
        node, lambda n: out.append(n) if isinstance(n, BufferLoad) and n.buffer is buffer else None
    )
    return out


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
