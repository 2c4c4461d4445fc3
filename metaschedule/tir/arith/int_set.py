"""Integer bounds of expressions: constant bounds and symbolic intervals.

:class:`ConstIntBound` gives inclusive integer bounds; :data:`POS_INF` / :data:`NEG_INF`
(the int64 limits) stand for "unbounded". Bounds saturate at those sentinels, as in TVM.
Variables without a known range are unbounded when they are 32 or 64 bits wide, and
range over their dtype when narrower (bool, int8, int16, uint8).

:class:`IntervalSet` is a symbolic interval ``[min, max]`` (inclusive); ``None`` on a
side means unbounded there. It is computed by relaxing chosen variables over their
ranges (``Analyzer.int_set``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import expr as E
from ..dtype import bits, is_bool, is_int
from ..stmt import Range
from .evaluate import trunc_div
from .expr_key import free_vars

if TYPE_CHECKING:
    from .analyzer import Analyzer

POS_INF = 2**63 - 1
NEG_INF = -(2**63)

Bound = tuple[int, int]
EVERYTHING: Bound = (NEG_INF, POS_INF)


@dataclass(frozen=True)
class ConstIntBound:
    """Inclusive bounds ``[min_value, max_value]``; the sentinels mean unbounded."""

    min_value: int
    max_value: int

    POS_INF = POS_INF
    NEG_INF = NEG_INF

    def is_const(self) -> bool:
        return self.min_value == self.max_value

    def is_bounded(self) -> bool:
        """True when both sides are finite."""
        return self.min_value > NEG_INF and self.max_value < POS_INF


# ----------------------------------------------------------------------------- saturating ops


def _clamp(x: int) -> int:
    return POS_INF if x >= POS_INF else max(NEG_INF, x)


def _is_inf(x: int) -> bool:
    return x >= POS_INF or x <= NEG_INF


def _sign(x: int) -> int:
    return (x > 0) - (x < 0)


def _add(x: int, y: int, upper: bool) -> int:
    """``x + y`` of two lower (or upper) bounds; an infinity on the open side wins."""
    inf = POS_INF if upper else NEG_INF
    if x == inf or y == inf:
        return inf
    return _clamp(x + y)


def _mul(x: int, y: int) -> int:
    if x == 0 or y == 0:
        return 0
    if _is_inf(x) or _is_inf(y):
        return POS_INF if _sign(x) * _sign(y) > 0 else NEG_INF
    return _clamp(x * y)


def _div(x: int, y: int, floor: bool) -> int:
    """``x // y`` (floor) or trunc division, for ``y != 0``; infinities stay infinite."""
    if _is_inf(x):
        return POS_INF if _sign(x) * _sign(y) > 0 else NEG_INF
    if _is_inf(y):
        return 0 if (x >= 0 or not floor) else (-1 if y > 0 else 0)
    return _clamp(x // y) if floor else trunc_div(x, y)


def bound_add(a: Bound, b: Bound) -> Bound:
    return _add(a[0], b[0], False), _add(a[1], b[1], True)


def bound_neg(a: Bound) -> Bound:
    return _clamp(-a[1]), _clamp(-a[0])


def bound_mul(a: Bound, b: Bound) -> Bound:
    prods = [_mul(x, y) for x in a for y in b]
    return min(prods), max(prods)


def bound_scale(a: Bound, c: int) -> Bound:
    return bound_mul(a, (c, c))


def _nonzero_parts(b: Bound) -> list[Bound]:
    """``b`` without zero, as at most two sign-definite intervals."""
    parts = []
    if b[0] < 0:
        parts.append((b[0], min(b[1], -1)))
    if b[1] > 0:
        parts.append((max(b[0], 1), b[1]))
    return parts


def bound_div(a: Bound, b: Bound, floor: bool = True) -> Bound:
    """Bounds of ``a // b`` (or truncating ``a / b``); division by zero is ignored."""
    parts = _nonzero_parts(b)
    if not parts:
        return EVERYTHING
    vals = [_div(x, y, floor) for lo, hi in parts for y in (lo, hi) for x in a]
    return min(vals), max(vals)


def bound_mod(a: Bound, b: Bound) -> Bound:
    """Bounds of ``floormod(a, b)``."""
    if b[0] > 0:
        if b[0] == b[1] and not _is_inf(b[0]) and not _is_inf(a[0]) and not _is_inf(a[1]):
            c = b[0]
            if a[0] // c == a[1] // c:
                return a[0] % c, a[1] % c
        if a[0] >= 0:
            if a[1] < b[0]:
                return a
            return 0, min(a[1], _add(b[1], -1, True))
        return 0, _add(b[1], -1, True)
    if b[1] < 0:
        return _add(b[0], 1, False), 0
    return min(_add(b[0], 1, False), 0), max(_add(b[1], -1, True), 0)


def dtype_bound(dtype: str) -> Bound:
    """Values a variable of ``dtype`` may hold: exact for narrow types, else unbounded."""
    if is_bool(dtype):
        return 0, 1
    if is_int(dtype) and bits(dtype) < 32:
        if dtype.startswith("uint"):
            return 0, 2 ** bits(dtype) - 1
        return -(2 ** (bits(dtype) - 1)), 2 ** (bits(dtype) - 1) - 1
    return EVERYTHING


def _cast_bound(a: Bound, dtype: str) -> Bound:
    if is_bool(dtype):
        if a[0] > 0 or a[1] < 0:
            return 1, 1
        return (0, 0) if a == (0, 0) else (0, 1)
    target = dtype_bound(dtype)
    if target[0] <= a[0] and a[1] <= target[1]:
        return a
    return target


# ----------------------------------------------------------------------------- analysis


class ConstIntBoundAnalyzer:
    """Computes :func:`Bound` s of integer expressions given bounds of variables.

    The cache lives as long as the analyzer; make one per query batch (nodes are kept
    alive by the cache, so ``id`` reuse cannot confuse it).
    """

    def __init__(self, var_bounds: Mapping[E.Var, Bound]):
        self.var_bounds = var_bounds
        self._cache: dict[int, tuple[E.PrimExpr, Bound]] = {}

    def bound(self, e: E.PrimExpr) -> Bound:
        hit = self._cache.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        stack = [e]  # explicit post-order: expressions may be thousands of nodes deep
        while stack:
            node = stack[-1]
            pending = [c for c in _bound_children(node) if not self._known(c)]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            if not self._known(node):
                self._cache[id(node)] = (node, self._compute(node))
        return self._cache[id(e)][1]

    def _known(self, e: E.PrimExpr) -> bool:
        hit = self._cache.get(id(e))
        return hit is not None and hit[0] is e

    def _compute(self, e: E.PrimExpr) -> Bound:
        if isinstance(e, E.IntImm):
            return _clamp(e.value), _clamp(e.value)
        if not (is_int(e.dtype) or is_bool(e.dtype)):
            return EVERYTHING
        if isinstance(e, E.Var):
            b = self.var_bounds.get(e)
            return b if b is not None else dtype_bound(e.dtype)
        if isinstance(e, E.Add):
            return bound_add(self.bound(e.a), self.bound(e.b))
        if isinstance(e, E.Sub):
            return bound_add(self.bound(e.a), bound_neg(self.bound(e.b)))
        if isinstance(e, E.Mul):
            return bound_mul(self.bound(e.a), self.bound(e.b))
        if isinstance(e, E.FloorDiv):
            return bound_div(self.bound(e.a), self.bound(e.b), floor=True)
        if isinstance(e, E.Div):
            return bound_div(self.bound(e.a), self.bound(e.b), floor=False)
        if isinstance(e, E.FloorMod):
            return bound_mod(self.bound(e.a), self.bound(e.b))
        if isinstance(e, E.Min):
            a, b = self.bound(e.a), self.bound(e.b)
            return min(a[0], b[0]), min(a[1], b[1])
        if isinstance(e, E.Max):
            a, b = self.bound(e.a), self.bound(e.b)
            return max(a[0], b[0]), max(a[1], b[1])
        if isinstance(e, E.Select):
            c = e.condition
            if isinstance(c, E.IntImm):
                return self.bound(e.true_value if c.value else e.false_value)
            a, b = self.bound(e.true_value), self.bound(e.false_value)
            return min(a[0], b[0]), max(a[1], b[1])
        if isinstance(e, E.Cast):
            if is_int(e.value.dtype) or is_bool(e.value.dtype):
                return _cast_bound(self.bound(e.value), e.dtype)
            return dtype_bound(e.dtype)
        return dtype_bound(e.dtype)


def _bound_children(e: E.PrimExpr) -> tuple:
    if not (is_int(e.dtype) or is_bool(e.dtype)) or isinstance(e, (E.CmpOp, E.And, E.Or)):
        return ()
    if isinstance(e, E.BinaryOp):
        return (e.a, e.b)
    if isinstance(e, E.Select):
        return (e.true_value, e.false_value)
    if isinstance(e, E.Cast) and (is_int(e.value.dtype) or is_bool(e.value.dtype)):
        return (e.value,)
    return ()


# ----------------------------------------------------------------------------- intervals


@dataclass(frozen=True, eq=False)
class IntervalSet:
    """The symbolic interval ``[min, max]`` (both inclusive; ``None`` = unbounded)."""

    min: E.PrimExpr | None
    max: E.PrimExpr | None

    @staticmethod
    def point(e: E.PrimExpr) -> IntervalSet:
        return IntervalSet(e, e)

    def is_single_point(self) -> bool:
        return self.min is not None and self.min is self.max

    def is_bounded(self) -> bool:
        return self.min is not None and self.max is not None

    def to_range(self, analyzer: Analyzer | None = None) -> Range:
        """The half-open :class:`Range` ``[min, max + 1)``; needs both sides bounded."""
        if not self.is_bounded():
            raise ValueError(f"cannot make a Range from the unbounded interval {self}")
        from .analyzer import Analyzer  # local: a cycle, the analyzer is built on int_set

        ana = analyzer or Analyzer()
        return Range(self.min, ana.simplify(self.max - self.min + 1))

    def __repr__(self) -> str:
        lo = "-inf" if self.min is None else str(self.min)
        hi = "+inf" if self.max is None else str(self.max)
        return f"IntervalSet[{lo}, {hi}]"

    __str__ = __repr__


def union_interval(sets: list[IntervalSet], analyzer: Analyzer) -> IntervalSet:
    """The smallest interval (as min/max expressions) containing all of ``sets``."""
    if not sets:
        raise ValueError("union_interval needs at least one interval")
    lo, hi = sets[0].min, sets[0].max
    for s in sets[1:]:
        lo = None if lo is None or s.min is None else analyzer.simplify(E.Min(lo, s.min))
        hi = None if hi is None or s.max is None else analyzer.simplify(E.Max(hi, s.max))
    return IntervalSet(lo, hi)


class IntervalEvaluator:
    """Relaxes the variables of ``dom`` over their ranges (see ``Analyzer.int_set``).

    ``analyzer`` already knows the ranges of ``dom`` (for simplification and proofs).
    """

    def __init__(self, analyzer: Analyzer, dom: Mapping[E.Var, Range]):
        self.ana = analyzer
        self.dom = dom
        self._active: set[E.Var] = set()
        self._mentions: dict[int, tuple[E.PrimExpr, bool]] = {}

    def eval(self, e: E.PrimExpr) -> IntervalSet:
        return self._interval(self.ana.simplify(e))

    # helpers ------------------------------------------------------------------
    def _s(self, e: E.PrimExpr | None) -> E.PrimExpr | None:
        return None if e is None else self.ana.simplify(e)

    def _fallback(self, e: E.PrimExpr) -> IntervalSet:
        lo, hi = self.ana._bound(e)
        return IntervalSet(
            None if lo <= NEG_INF else E.const(lo, e.dtype),
            None if hi >= POS_INF else E.const(hi, e.dtype),
        )

    def _mentions_dom(self, e: E.PrimExpr | None) -> bool:
        if e is None or isinstance(e, (E.IntImm, E.FloatImm)):
            return False
        hit = self._mentions.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        out = any(v in self.dom for v in free_vars(e))
        self._mentions[id(e)] = (e, out)
        return out

    def _nonneg(self, e: E.PrimExpr | None) -> bool:
        return e is not None and self.ana.can_prove(e >= 0)

    def _nonpos(self, e: E.PrimExpr | None) -> bool:
        return e is not None and self.ana.can_prove(e <= 0)

    # main ---------------------------------------------------------------------
    def _interval(self, e: E.PrimExpr) -> IntervalSet:
        if isinstance(e, (E.IntImm, E.FloatImm, E.StringImm)) or not self._mentions_dom(e):
            return IntervalSet.point(e)
        if not is_int(e.dtype):
            return IntervalSet(None, None)
        if isinstance(e, E.Var):
            return self._var(e)
        if isinstance(e, (E.Add, E.Sub)):
            return self._sum(e)
        kids = _int_children(e)
        if kids is None:
            return self._fallback(e)
        out = self._combine(e, [self._interval(k) for k in kids])
        return out if out is not None else self._fallback(e)

    def _sum(self, e: E.PrimExpr) -> IntervalSet:
        """Sums, walked iteratively along the left spine, simplified once at the end."""
        spine, node = [], e
        while isinstance(node, (E.Add, E.Sub)) and self._mentions_dom(node):
            spine.append(node)
            node = node.a
        first = self._interval(node)
        lo, hi = first.min, first.max
        for n in reversed(spine):
            b = self._interval(n.b)
            if isinstance(n, E.Sub):
                b = IntervalSet(
                    None if b.max is None else -b.max, None if b.min is None else -b.min
                )
            lo = None if lo is None or b.min is None else lo + b.min
            hi = None if hi is None or b.max is None else hi + b.max
        return IntervalSet(self._s(lo), self._s(hi))

    def _var(self, v: E.Var) -> IntervalSet:
        rng = self.dom.get(v)
        if rng is None or v in self._active:
            return IntervalSet.point(v)
        lo = self._s(rng.min)
        hi = self._s(rng.min + rng.extent - 1)
        # ranges may mention other relaxed variables (triangular loops): relax them too
        self._active.add(v)
        try:
            if self._mentions_dom(lo):
                lo = self._interval(lo).min
            if self._mentions_dom(hi):
                hi = self._interval(hi).max
        finally:
            self._active.discard(v)
        return IntervalSet(lo, hi)

    def _combine(self, e: E.PrimExpr, sets: list[IntervalSet]) -> IntervalSet | None:
        s = self._s
        if isinstance(e, E.Mul):
            a, b = sets
            if a.is_single_point() and not b.is_single_point():
                a, b = b, a
            if b.is_single_point():
                k = b.min
                if self._nonneg(k):
                    return IntervalSet(
                        s(a.min * k) if a.min is not None else None,
                        s(a.max * k) if a.max is not None else None,
                    )
                if self._nonpos(k):
                    return IntervalSet(
                        s(a.max * k) if a.max is not None else None,
                        s(a.min * k) if a.min is not None else None,
                    )
                return None
            if self._nonneg(a.min) and self._nonneg(b.min):
                hi = None if a.max is None or b.max is None else s(a.max * b.max)
                return IntervalSet(s(a.min * b.min), hi)
            return None
        if isinstance(e, (E.FloorDiv, E.Div)):
            a, b = sets
            if not b.is_single_point() or not self.ana.can_prove(b.min > 0):
                return None
            if isinstance(e, E.Div) and not self._nonneg(a.min):
                return None
            k = b.min
            return IntervalSet(
                None if a.min is None else s(E.FloorDiv(a.min, k)),
                None if a.max is None else s(E.FloorDiv(a.max, k)),
            )
        if isinstance(e, E.FloorMod):
            a, b = sets
            if not b.is_single_point() or not self.ana.can_prove(b.min > 0):
                return None
            k = b.min
            if a.is_bounded() and self.ana.can_prove_equal(
                E.FloorDiv(a.min, k), E.FloorDiv(a.max, k)
            ):
                return IntervalSet(s(E.FloorMod(a.min, k)), s(E.FloorMod(a.max, k)))
            zero = E.const(0, e.dtype)
            if self._nonneg(a.min) and a.max is not None:
                return IntervalSet(zero, s(E.Min(a.max, k - 1)))
            return IntervalSet(zero, s(k - 1))
        if isinstance(e, (E.Min, E.Max)):
            a, b = sets
            op = type(e)

            def pick(x, y, keep_none_wins):
                if x is None or y is None:
                    return None if keep_none_wins else (y if x is None else x)
                return s(op(x, y))

            is_min = op is E.Min
            return IntervalSet(pick(a.min, b.min, is_min), pick(a.max, b.max, not is_min))
        if isinstance(e, E.Select):
            t, f = sets[1], sets[2]
            lo = None if t.min is None or f.min is None else s(E.Min(t.min, f.min))
            hi = None if t.max is None or f.max is None else s(E.Max(t.max, f.max))
            return IntervalSet(lo, hi)
        if isinstance(e, E.Cast) and is_int(e.value.dtype) and bits(e.dtype) >= bits(e.value.dtype):
            a = sets[0]
            return IntervalSet(
                None if a.min is None else s(E.cast(e.dtype, a.min)),
                None if a.max is None else s(E.cast(e.dtype, a.max)),
            )
        return None


def _int_children(e: E.PrimExpr) -> list[Any] | None:
    """The children that :meth:`IntervalEvaluator._combine` relaxes, or None."""
    if isinstance(e, (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Div, E.Min, E.Max)):
        return [e.a, e.b]
    if isinstance(e, E.Select):
        return [e.condition, e.true_value, e.false_value]
    if isinstance(e, E.Cast) and is_int(e.value.dtype):
        return [e.value]
    return None
