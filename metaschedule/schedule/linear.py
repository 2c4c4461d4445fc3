"""Linear index expressions over loops with constant ranges: exact bounds, quickly.

Most index expressions of a tiled loop nest are ``c + sum(k_v * v)`` with integer
constants and loops of constant extent. Over such a box of independent ranges a
linear expression reaches exactly the bounds of its terms, so relaxing a region
(``relax_linear``) and proving comparisons (:class:`LinearProver`) need no analyzer
there; everything else goes to the analyzer. Trace replay spends its time here, and
tests check that these answers are the analyzer's.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..tir import Add, IntImm, Mul, PrimExpr, Range, Sub, Var
from ..tir.arith import Analyzer
from ..tir.arith.expr_key import free_vars
from ..tir.expr import const


def linear_terms(e: PrimExpr) -> tuple[int, dict[Var, int]] | None:
    """``e`` as ``c + sum(k_v * v)`` with integer constants (variables in the order they
    appear), or None."""
    coeffs: dict[Var, int] = {}
    const_part = 0
    stack: list[tuple[PrimExpr, int]] = [(e, 1)]
    while stack:
        x, k = stack.pop()
        if isinstance(x, Var):
            coeffs[x] = coeffs.get(x, 0) + k
        elif isinstance(x, IntImm):
            const_part += k * x.value
        elif isinstance(x, Add):
            stack += [(x.b, k), (x.a, k)]
        elif isinstance(x, Sub):
            stack += [(x.b, -k), (x.a, k)]
        elif isinstance(x, Mul) and isinstance(x.b, IntImm):
            stack.append((x.a, k * x.b.value))
        elif isinstance(x, Mul) and isinstance(x.a, IntImm):
            stack.append((x.b, k * x.a.value))
        else:
            return None
    return const_part, coeffs


def relax_linear(
    lo_e: PrimExpr, extent: PrimExpr, dom: Mapping[Var, Range], ana: Analyzer
) -> Range | None:
    """The relaxed range ``[lo_e, lo_e + extent)`` when ``lo_e`` is linear with constant
    coefficients, ``extent`` is constant and the relaxed loops have constant bounds (the
    common case of tiled loops) or are single points (a variable bound to one symbolic
    value, as an inlined producer's indices are): each relaxed term moves to its lowest
    and highest value, the rest stays symbolic and cancels from the extent. None when
    that does not apply."""
    if not isinstance(extent, IntImm):
        return None
    lin = linear_terms(lo_e)
    if lin is None:
        return None
    low, coeffs = lin
    high = low + extent.value - 1
    rest: PrimExpr | None = None
    for v, k in coeffs.items():
        if k == 0:
            continue
        r = dom.get(v)
        if r is None:
            term = v if k == 1 else v * k
            rest = term if rest is None else rest + term
            continue
        if (
            isinstance(r.extent, IntImm)
            and r.extent.value == 1
            and not isinstance(r.min, IntImm)
            and not any(u in dom for u in free_vars(r.min))  # relaxed itself: not a point
        ):
            term = r.min if k == 1 else r.min * k  # a point: the variable is its minimum
            rest = term if rest is None else rest + term
            continue
        if not (isinstance(r.min, IntImm) and isinstance(r.extent, IntImm)):
            return None
        first, last = r.min.value, r.min.value + r.extent.value - 1
        low += k * (first if k > 0 else last)
        high += k * (last if k > 0 else first)
    base = const(low, lo_e.dtype)
    lo = base if rest is None else ana.simplify(rest + base)
    return Range(lo, const(high - low + 1, extent.dtype))


class LinearProver:
    """Proofs about index expressions: exact and quick when they are linear in variables
    with constant ranges (the loops of a tiled nest), the analyzer's otherwise.

    Over a box of independent integer ranges a linear expression reaches exactly the
    bounds of its terms, so ``a <= b`` holds iff the largest ``a - b`` is at most 0.
    """

    def __init__(self, ana: Analyzer, ranges: Mapping[Var, Range]):
        self.ana = ana
        self.box: dict[Var, tuple[int, int]] = {}
        for v, r in ranges.items():
            if isinstance(r.min, IntImm) and isinstance(r.extent, IntImm):
                self.box[v] = (r.min.value, r.min.value + r.extent.value - 1)

    def _span(self, pos: PrimExpr, neg: PrimExpr | None = None) -> tuple[int, int] | None:
        """The (min, max) of ``pos - neg`` over the box, or None when not linear in it."""
        a = linear_terms(pos)
        b = linear_terms(neg) if neg is not None else (0, {})
        if a is None or b is None:
            return None
        coeffs = dict(a[1])
        for v, k in b[1].items():
            coeffs[v] = coeffs.get(v, 0) - k
        lo = hi = a[0] - b[0]
        for v, k in coeffs.items():
            if k == 0:
                continue
            r = self.box.get(v)
            if r is None:
                return None
            lo += k * (r[0] if k > 0 else r[1])
            hi += k * (r[1] if k > 0 else r[0])
        return lo, hi

    def le(self, a: PrimExpr, b: PrimExpr) -> bool:
        """Whether ``a <= b`` can be proven."""
        span = self._span(a, b)
        return span[1] <= 0 if span is not None else self.ana.can_prove(a <= b)

    def simplify(self, e: PrimExpr) -> PrimExpr:
        """``e`` simplified; a constant directly when ``e`` is one in disguise."""
        span = self._span(e)
        if span is not None and span[0] == span[1]:
            return const(span[0], e.dtype)
        return self.ana.simplify(e)
