"""The :class:`Analyzer`: what is known about variables, and the questions it answers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from .. import expr as E
from ..dtype import is_bool, is_int
from ..stmt import Range
from .int_set import (
    NEG_INF,
    POS_INF,
    Bound,
    ConstIntBound,
    ConstIntBoundAnalyzer,
    IntervalEvaluator,
    IntervalSet,
)
from .simplify import _CMP_CLASS, Simplifier, _decide, free_vars
from .simplify_memo import SimplifyMemo

ExprLike = E.PrimExpr | int

#: simplifications by structure (the search simplifies the same arithmetic over the fresh
#: loops of every schedule it replays)
_SIMPLIFIED = SimplifyMemo()


class Analyzer:
    """Simplifies and bounds integer expressions under known variable ranges and values.

    ``bind(i, Range(0, 16))`` records a loop range; ``bind(x, expr)`` records that ``x``
    equals ``expr`` (the simplifier substitutes it). Every query starts from a fresh
    cache, so an analyzer can be kept and bound further between queries.
    """

    def __init__(self):
        self._ranges: dict[E.Var, Range] = {}
        self._values: dict[E.Var, E.PrimExpr] = {}
        self._bounds: dict[E.Var, Bound] = {}
        self._symbolic: set[E.Var] = set()  # the variables of _ranges with symbolic ranges
        self._proving = False

    def copy(self) -> Analyzer:
        out = Analyzer()
        out._ranges = dict(self._ranges)
        out._values = dict(self._values)
        out._bounds = dict(self._bounds)
        out._symbolic = set(self._symbolic)
        out._proving = self._proving  # a copy made inside a proof must not start another
        return out

    # facts --------------------------------------------------------------------------
    def bind(self, var: E.Var, value: Range | ExprLike, allow_override: bool = False) -> None:
        """Record that ``var`` ranges over ``value`` (a Range) or equals it (an expression).

        Raises:
            ValueError: ``var`` is already bound to something else and ``allow_override``
                is false.
        """
        if not isinstance(var, E.Var):
            raise TypeError(f"Analyzer.bind expects a Var, got {type(var).__name__}: {var}")
        if isinstance(value, Range):
            if isinstance(value.min, E.IntImm) and isinstance(value.extent, E.IntImm):
                new: Range | E.PrimExpr = value
            else:
                new = Range(self.simplify(value.min), self.simplify(value.extent))
        else:
            new = self.simplify(E.convert(value, var.dtype))
        old = self._ranges.get(var, self._values.get(var))
        if old is not None and not allow_override and not self._same_fact(old, new):
            raise ValueError(
                f"Analyzer.bind: variable {var.name} is already bound to {_fact_str(old)}, "
                f"cannot rebind it to {_fact_str(new)}; pass allow_override=True to replace it"
            )
        self._ranges.pop(var, None)
        self._values.pop(var, None)
        self._symbolic.discard(var)
        if isinstance(new, Range):
            self._ranges[var] = new
            if isinstance(new.min, E.IntImm) and isinstance(new.extent, E.IntImm):
                lo, hi = new.min.value, new.min.value + new.extent.value - 1
            else:
                self._symbolic.add(var)
                lo = self._bound(new.min)[0]
                hi = self._bound(self.simplify(new.min + new.extent - 1))[1]
            self._bounds[var] = (lo, hi)
        else:
            self._values[var] = new
            self._bounds[var] = self._bound(new)

    def _same_fact(self, old, new) -> bool:
        if isinstance(old, Range) != isinstance(new, Range):
            return False
        if isinstance(old, Range):
            return self.can_prove_equal(old.min, new.min) and self.can_prove_equal(
                old.extent, new.extent
            )
        return self.can_prove_equal(old, new)

    @contextlib.contextmanager
    def constraint_scope(self, condition: E.PrimExpr) -> Iterator[None]:
        """Within the ``with`` block, assume ``condition`` (tightens variable bounds).

        Conjuncts of the form ``var < c``, ``var <= c``, ``var > c``, ``var >= c`` and
        ``var == c`` (after simplification, constant ``c``) are used; others are ignored.
        """
        saved = dict(self._bounds)
        try:
            for conj in _conjuncts(self.simplify(condition)):
                self._assume(conj)
            yield
        finally:
            self._bounds = saved

    def _assume(self, c: E.PrimExpr) -> None:
        if not isinstance(c, E.CmpOp):
            return
        a, b, cls = c.a, c.b, type(c)
        if isinstance(a, E.IntImm) and isinstance(b, E.Var):
            a, b = b, a
            cls = {E.LT: E.GT, E.LE: E.GE, E.GT: E.LT, E.GE: E.LE}.get(cls, cls)
        if not (isinstance(a, E.Var) and isinstance(b, E.IntImm)):
            return
        lo, hi = self._bounds.get(a, (NEG_INF, POS_INF))
        v = b.value
        if issubclass(cls, E.EQ):
            lo, hi = max(lo, v), min(hi, v)
        elif cls is E.LT:
            hi = min(hi, v - 1)
        elif cls is E.LE:
            hi = min(hi, v)
        elif cls is E.GT:
            lo = max(lo, v + 1)
        elif cls is E.GE:
            lo = max(lo, v)
        self._bounds[a] = (lo, hi)

    # queries --------------------------------------------------------------------------
    def simplify(self, expr: ExprLike) -> E.PrimExpr:
        """An expression equal to ``expr`` under the known facts, in canonical form."""
        kind = type(expr)
        if kind is E.IntImm:  # what the simplifier returns for leaves, without building it
            return expr
        if kind is E.Var:
            return self._values.get(expr, expr)
        if self._values or self._symbolic_ranges():  # facts beyond constant bounds
            prover = self._prove_by_intervals if self._symbolic_ranges() else None
            return Simplifier(self._bounds, self._values, prover).visit(E.convert(expr))
        return _SIMPLIFIED.simplify(E.convert(expr), self._bounds, self._simplify)

    def _simplify(self, expr: E.PrimExpr) -> E.PrimExpr:
        return Simplifier(self._bounds, self._values, None).visit(expr)

    def _symbolic_ranges(self) -> bool:
        return not self._proving and bool(self._symbolic)

    def _bound(self, expr: E.PrimExpr) -> Bound:
        return ConstIntBoundAnalyzer(self._bounds).bound(expr)

    def const_int_bound(self, expr: ExprLike) -> ConstIntBound:
        """Inclusive constant bounds of ``expr`` (``ConstIntBound.POS_INF`` = unbounded)."""
        lo, hi = self._bound(self.simplify(expr))
        return ConstIntBound(lo, hi)

    def int_set(self, expr: ExprLike, dom_map: Mapping[E.Var, Range] | None = None) -> IntervalSet:
        """The symbolic interval of ``expr`` when variables range over their domains.

        Args:
            expr: an integer expression.
            dom_map: the variables to relax and their ranges; by default every variable
                bound to a Range with :meth:`bind`. Other variables stay symbolic.
        """
        expr = E.convert(expr)
        if dom_map is None:
            dom = dict(self._ranges)
            ana = self
        else:
            dom = {v: _as_range(r) for v, r in dom_map.items()}
            ana = self.copy()
            for v, r in dom.items():
                ana.bind(v, _as_range(r), allow_override=True)
        if not (is_int(expr.dtype) or is_bool(expr.dtype)):
            raise TypeError(f"int_set needs an integer expression, got {expr} of {expr.dtype}")
        return IntervalEvaluator(ana, dom).eval(expr)

    def can_prove(self, cond: ExprLike) -> bool:
        """True when ``cond`` holds for every value of the variables (False = unknown)."""
        cond = E.convert(cond)
        out = self.simplify(cond)
        if isinstance(out, E.IntImm):
            return bool(out.value)
        if isinstance(out, E.And):
            return self.can_prove(out.a) and self.can_prove(out.b)
        if isinstance(out, E.Or):
            return self.can_prove(out.a) or self.can_prove(out.b)
        if isinstance(out, E.CmpOp) and is_int(out.a.dtype):
            return self._prove_by_intervals(out)
        return False

    def _prove_by_intervals(self, cmp: E.CmpOp) -> bool:
        """Relax variables with symbolic ranges one at a time: ``i < n`` for ``i in [0, n)``.

        The most dependent variable goes first (``j`` before ``i`` for ``j in [0, i]``),
        so that ``j <= i`` is proven from ``j - i in [-i, 0]``.
        """
        if not self._ranges or self._proving or not is_int(cmp.a.dtype):
            return False
        cls = _CMP_CLASS.get(type(cmp), type(cmp))
        self._proving = True  # int_set and simplify below must not come back here
        try:
            lo = hi = self.simplify(E.Sub(cmp.a, cmp.b))
            for _ in range(8):
                verdict = _decide(cls, self._bound(lo)[0], self._bound(hi)[1])
                if verdict is not None:
                    return verdict
                symbolic = {
                    v: r
                    for v, r in self._ranges.items()
                    if not (isinstance(r.min, E.IntImm) and isinstance(r.extent, E.IntImm))
                }
                present = (free_vars(lo) | free_vars(hi)) & set(symbolic)
                if not present:
                    return False
                used = set().union(
                    *(free_vars(symbolic[v].min) | free_vars(symbolic[v].extent) for v in present)
                )
                v = next((v for v in present if v not in used), next(iter(present)))
                lo = self.int_set(lo, {v: symbolic[v]}).min
                hi = self.int_set(hi, {v: symbolic[v]}).max
                if lo is None or hi is None:
                    return False
            return False
        finally:
            self._proving = False

    def can_prove_equal(self, a: ExprLike, b: ExprLike) -> bool:
        """True when ``a`` and ``b`` are provably equal."""
        a, b = E._match(a, b)
        if is_int(a.dtype):
            d = self.simplify(E.Sub(a, b))
            return isinstance(d, E.IntImm) and d.value == 0
        s = Simplifier(self._bounds, self._values)
        return s.same(s.visit(a), s.visit(b))


def simplify(expr: ExprLike, var_ranges: Mapping[E.Var, Range] | None = None) -> E.PrimExpr:
    """Simplify ``expr`` knowing that each variable of ``var_ranges`` lies in its range."""
    ana = Analyzer()
    for v, r in (var_ranges or {}).items():
        ana.bind(v, _as_range(r))
    return ana.simplify(expr)


def eval_bound(expr: ExprLike, var_ranges: Mapping[E.Var, Range] | None = None) -> tuple[int, int]:
    """Inclusive integer bounds ``(lo, hi)`` of ``expr`` over the given variable ranges.

    Raises:
        ValueError: ``expr`` is not bounded on both sides (a variable without a range).
    """
    ana = Analyzer()
    for v, r in (var_ranges or {}).items():
        ana.bind(v, _as_range(r))
    b = ana.const_int_bound(expr)
    if not b.is_bounded():
        raise ValueError(
            f"eval_bound: {expr} is not bounded over {_ranges_str(var_ranges)}; every variable "
            "needs a range"
        )
    return b.min_value, b.max_value


def _as_range(r) -> Range:
    if isinstance(r, Range):
        return r
    if isinstance(r, tuple) and len(r) == 2:  # (min, extent) convenience
        return Range(*r)
    raise TypeError(f"expected a Range (or a (min, extent) pair), got {r!r}")


def _conjuncts(c: E.PrimExpr) -> list[E.PrimExpr]:
    if isinstance(c, E.And):
        return _conjuncts(c.a) + _conjuncts(c.b)
    return [c]


def _fact_str(f) -> str:
    if isinstance(f, Range):
        return f"Range(min={f.min}, extent={f.extent})"
    return str(f)


def _ranges_str(ranges) -> str:
    if not ranges:
        return "no ranges"
    return ", ".join(f"{v.name} in {_fact_str(_as_range(r))}" for v, r in ranges.items())
