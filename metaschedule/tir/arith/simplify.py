"""The expression simplifier.

Integer ``+ - *`` are put in a canonical polynomial form (like terms collected, constant
coefficients, terms ordered by decreasing coefficient then first appearance), and
``//``, ``%``, ``min``, ``max``, comparisons and ``select`` are decided from constant
bounds of the operands where possible. Every rule is an identity of mathematical
integers: the result has the same value as the input for every assignment of the
variables within their bound ranges. Float expressions are only constant-folded.

A :class:`Simplifier` lives for one ``Analyzer.simplify`` call; its caches (structural
keys, polynomial forms, bounds) die with it. Its parts: structural keys in
:mod:`.expr_key`, the polynomial form in :mod:`.poly`, the ``//``/``%``/``/`` rules in
:mod:`.divmod_rules`; min/max, comparisons, logic, select, casts and calls here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .. import expr as E
from ..dtype import is_float, is_int
from ..functor import Mutator
from .divmod_rules import DivModRules
from .evaluate import binary_value, call_value, cast_value, compare_value
from .expr_key import _CMP_CLASS, ExprKeyer, expr_children, free_vars
from .int_set import NEG_INF, POS_INF, Bound, ConstIntBoundAnalyzer
from .poly import MAX_DISTRIBUTE_SIZE, MAX_DISTRIBUTE_TERMS, Poly, PolyForm

__all__ = [
    "MAX_DISTRIBUTE_SIZE",
    "MAX_DISTRIBUTE_TERMS",
    "ExprKeyer",
    "Poly",
    "Simplifier",
    "expr_children",
    "free_vars",
]

_DISPATCH = {
    E.Var: "_var",
    E.Add: "_arith",
    E.Sub: "_arith",
    E.Mul: "_arith",
    E.FloorDiv: "_divmod",
    E.FloorMod: "_divmod",
    E.Div: "_div",
    E.Min: "_minmax",
    E.Max: "_minmax",
    E.And: "_andor",
    E.Or: "_andor",
    E.Not: "_not",
    E.Select: "_select",
    E.Cast: "_cast",
    E.Call: "_call",
    **dict.fromkeys((E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE, E.EqualOp, E.NotEqualOp), "_compare"),
}
_TABLES: dict[type, dict[type, Callable]] = {}


def _dispatch_table(cls: type) -> dict[type, Callable]:
    """The node class -> rule function table of a simplifier class (made once per class;
    one Simplifier lives for one ``simplify`` call, so binding methods per instance
    would cost more than most calls)."""
    table = _TABLES.get(cls)
    if table is None:
        table = _TABLES[cls] = {k: getattr(cls, name) for k, name in _DISPATCH.items()}
    return table


_NEGATED_CMP = {E.EQ: E.NE, E.NE: E.EQ, E.LT: E.GE, E.GE: E.LT, E.LE: E.GT, E.GT: E.LE}


# ----------------------------------------------------------------------------- simplifier


class Simplifier(PolyForm, DivModRules, Mutator):
    """One simplification run. ``bounds`` are variable bounds, ``values`` substitutions."""

    def __init__(
        self,
        bounds: Mapping[E.Var, Bound],
        values: Mapping[E.Var, E.PrimExpr],
        prover: Callable[[E.PrimExpr], bool] | None = None,
    ):
        self.keyer = ExprKeyer()
        # optional symbolic prover of integer comparisons (for symbolic loop ranges)
        self.prover = prover
        self.cib = ConstIntBoundAnalyzer(bounds)
        self.values = values
        self._polys: dict[int, tuple[E.PrimExpr, Poly]] = {}
        self._done: dict[int, tuple[Any, Any]] = {}
        self._sizes: dict[int, tuple[Any, int]] = {}
        self._dispatch = _dispatch_table(type(self))

    # entry ----------------------------------------------------------------------
    def visit(self, node: Any) -> Any:
        if not isinstance(node, E.PrimExpr):
            return super().visit(node)
        hit = self._done.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
        if isinstance(node, (E.IntImm, E.FloatImm, E.StringImm)):
            out = node
        else:
            fn = self._dispatch.get(type(node))
            out = fn(self, node) if fn is not None else self.generic_visit(node)
        self._done[id(node)] = (node, out)
        return out

    def key(self, e: Any) -> int:
        return self.keyer.key(e)

    def same(self, a: Any, b: Any) -> bool:
        return a is b or self.keyer.key(a) == self.keyer.key(b)

    def bound(self, e: E.PrimExpr) -> Bound:
        return self.cib.bound(e)

    def _keep(self, e: E.PrimExpr, out: E.PrimExpr) -> E.PrimExpr:
        """``e`` itself when ``out`` is structurally the same (keeps identity stable)."""
        return e if out is e or self.same(out, e) else out

    # leaves -------------------------------------------------------------------------
    def _var(self, v: E.Var) -> E.PrimExpr:
        return self.values.get(v, v)

    def _children(self, e: E.BinaryOp) -> tuple[E.PrimExpr, E.PrimExpr]:
        return self.visit(e.a), self.visit(e.b)

    def _rebuild(self, e: E.BinaryOp, a: E.PrimExpr, b: E.PrimExpr, cls: type | None = None):
        cls = cls or type(e)
        if cls is type(e) and a is e.a and b is e.b:
            return e
        return cls(a, b)

    def _fold(self, e: E.BinaryOp, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr | None:
        """Fold two constants (None when not both constant or not foldable)."""
        if not (isinstance(a, (E.IntImm, E.FloatImm)) and isinstance(b, (E.IntImm, E.FloatImm))):
            return None
        try:
            v = binary_value(type(e), a.value, b.value, e.dtype)
        except ZeroDivisionError:
            return None
        return E.const(v, e.dtype)

    def _fold_or_rebuild(self, e: E.BinaryOp, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
        folded = self._fold(e, a, b)
        return folded if folded is not None else self._rebuild(e, a, b)

    # arithmetic ---------------------------------------------------------------------
    def _arith(self, e: E.BinaryOp) -> E.PrimExpr:
        if is_int(e.dtype) and isinstance(e, (E.Add, E.Sub)):
            # walk the left spine of a long sum iteratively
            spine, node = [e], e.a
            while isinstance(node, (E.Add, E.Sub)) and not self._is_done(node):
                spine.append(node)
                node = node.a
            p = self.poly(self.visit(node)).copy()
            for n in reversed(spine):
                p.iadd(self.poly(self.visit(n.b)), 1 if isinstance(n, E.Add) else -1)
            return self._keep(e, self.to_expr(p))
        a, b = self._children(e)
        if not is_int(e.dtype):
            return self._fold_or_rebuild(e, a, b)
        return self._keep(e, self.to_expr(self._poly_mul(self.poly(a), self.poly(b))))

    def _is_done(self, e: E.PrimExpr) -> bool:
        hit = self._done.get(id(e))
        return hit is not None and hit[0] is e

    # min / max ------------------------------------------------------------------------
    def _minmax(self, e: E.BinaryOp) -> E.PrimExpr:
        a, b = self._children(e)
        folded = self._fold(e, a, b)
        if folded is not None:
            return folded
        if not is_int(e.dtype):
            return self._rebuild(e, a, b)
        is_min = isinstance(e, E.Min)
        if self.same(a, b):
            return a
        lo, hi = self.poly_bound(self.poly(a).add(self.poly(b), -1))
        if hi <= 0:
            return a if is_min else b
        if lo >= 0:
            return b if is_min else a
        if self.prover is not None:
            if self.prover(E.LE(a, b)):
                return a if is_min else b
            if self.prover(E.GE(a, b)):
                return b if is_min else a
        same_op, other_op = (E.Min, E.Max) if is_min else (E.Max, E.Min)
        for x, y in ((a, b), (b, a)):
            if isinstance(y, same_op) and (self.same(x, y.a) or self.same(x, y.b)):
                return y  # min(x, min(x, z)) == min(x, z)
            if isinstance(y, other_op) and (self.same(x, y.a) or self.same(x, y.b)):
                return x  # min(x, max(x, z)) == x
        if isinstance(a, E.IntImm):
            a, b = b, a  # constants go last
        return self._rebuild(e, a, b)

    # comparisons and logic --------------------------------------------------------------
    def _compare(self, e: E.CmpOp) -> E.PrimExpr:
        a, b = self._children(e)
        cls = _CMP_CLASS.get(type(e), type(e))
        if isinstance(a, (E.IntImm, E.FloatImm)) and isinstance(b, (E.IntImm, E.FloatImm)):
            return E.const(compare_value(cls, a.value, b.value), "bool")
        if not is_int(a.dtype):
            if self.same(a, b) and not is_float(a.dtype) and cls in (E.EQ, E.NE):
                return E.const(cls is E.EQ, "bool")
            return self._rebuild(e, a, b, cls)
        pa, pb = self.poly(a), self.poly(b)
        lo, hi = self.poly_bound(pa.add(pb, -1))
        verdict = _decide(cls, lo, hi)
        if verdict is None and self.prover is not None:
            if self.prover(cls(a, b)):
                verdict = True
            elif self.prover(_NEGATED_CMP[cls](a, b)):
                verdict = False
        if verdict is not None:
            return E.const(verdict, "bool")
        # move the constant to the side that is a constant: x + 3 < 7  ->  x < 4
        if isinstance(b, E.IntImm) and pa.const != 0 and pa.terms:
            a = self.to_expr(pa.add(Poly(pa.dtype, const=pa.const), -1))
            b = E.IntImm(b.dtype, b.value - pa.const)
        elif isinstance(a, E.IntImm) and pb.const != 0 and pb.terms:
            b = self.to_expr(pb.add(Poly(pb.dtype, const=pb.const), -1))
            a = E.IntImm(a.dtype, a.value - pb.const)
        out = self._rebuild(e, a, b, cls)
        return self._keep(e, out) if type(e) is cls else out

    def _andor(self, e: E.BinaryOp) -> E.PrimExpr:
        a, b = self._children(e)
        is_and = isinstance(e, E.And)
        for x, y in ((a, b), (b, a)):
            if isinstance(x, E.IntImm):
                if bool(x.value) == is_and:
                    return y  # true and y == y; false or y == y
                return E.const(not is_and, "bool")
        if self.same(a, b):
            return a
        for x, y in ((a, b), (b, a)):
            if isinstance(y, E.Not) and self.same(x, y.a):
                return E.const(not is_and, "bool")  # x and not x; x or not x
        ia, ib = self._cmp_interval(a), self._cmp_interval(b)
        if ia is not None and ib is not None and ia[0] == ib[0]:
            # two constant bounds on one expression: x < 3 and x >= 5 -> False
            (_, alo, ahi), (_, blo, bhi) = ia, ib
            if is_and:
                if max(alo, blo) > min(ahi, bhi):
                    return E.const(False, "bool")
                if blo <= alo and ahi <= bhi:
                    return a
                if alo <= blo and bhi <= ahi:
                    return b
            else:
                if blo <= alo and ahi <= bhi:
                    return b
                if alo <= blo and bhi <= ahi:
                    return a
                lo_first = (alo, ahi) if alo <= blo else (blo, bhi)
                hi_second = (blo, bhi) if alo <= blo else (alo, ahi)
                if (
                    lo_first[0] <= NEG_INF
                    and hi_second[1] >= POS_INF
                    and (hi_second[0] <= lo_first[1] + 1)
                ):
                    return E.const(True, "bool")
        return self._rebuild(e, a, b)

    def _cmp_interval(self, c: E.PrimExpr) -> tuple[int, int, int] | None:
        """``(key of x, lo, hi)`` when ``c`` says ``lo <= x <= hi`` for a constant bound."""
        if not isinstance(c, (E.LT, E.LE, E.GT, E.GE, E.EQ)) or not isinstance(c.b, E.IntImm):
            return None
        if not is_int(c.a.dtype):
            return None
        v, key = c.b.value, self.key(c.a)
        if isinstance(c, E.LT):
            return key, NEG_INF, v - 1
        if isinstance(c, E.LE):
            return key, NEG_INF, v
        if isinstance(c, E.GT):
            return key, v + 1, POS_INF
        if isinstance(c, E.GE):
            return key, v, POS_INF
        return key, v, v

    def _not(self, e: E.Not) -> E.PrimExpr:
        a = self.visit(e.a)
        if isinstance(a, E.IntImm):
            return E.const(not a.value, "bool")
        if isinstance(a, E.Not):
            return a.a
        if isinstance(a, E.CmpOp) and is_int(a.a.dtype):
            return _NEGATED_CMP[_CMP_CLASS.get(type(a), type(a))](a.a, a.b)
        return e if a is e.a else E.Not(a)

    def _select(self, e: E.Select) -> E.PrimExpr:
        cond = self.visit(e.condition)
        if isinstance(cond, E.IntImm):
            return self.visit(e.true_value if cond.value else e.false_value)
        t, f = self.visit(e.true_value), self.visit(e.false_value)
        if self.same(t, f):
            return t
        if isinstance(cond, E.Not):
            cond, t, f = cond.a, f, t
        if cond is e.condition and t is e.true_value and f is e.false_value:
            return e
        return E.Select(cond, t, f)

    # casts and calls ------------------------------------------------------------------
    def _cast(self, e: E.Cast) -> E.PrimExpr:
        v = self.visit(e.value)
        if v.dtype == e.dtype:
            return v
        if isinstance(v, (E.IntImm, E.FloatImm)):
            try:
                return E.const(cast_value(v.value, e.dtype), e.dtype)
            except ValueError:  # NaN or inf to an integer: leave it to run time
                pass
        return e if v is e.value else E.Cast(e.dtype, v)

    def _call(self, e: E.Call) -> E.PrimExpr:
        args = tuple(self.visit(a) for a in e.args)
        if args and all(isinstance(a, (E.IntImm, E.FloatImm)) for a in args):
            try:
                v = call_value(e.op, [a.value for a in args], e.dtype)
                return E.const(v, e.dtype)
            except (ValueError, OverflowError):
                pass
        if all(x is y for x, y in zip(args, e.args)):
            return e
        return E.Call(e.dtype, e.op, args)


def _decide(cls: type, lo: int, hi: int) -> bool | None:
    """The truth of ``d cls 0`` for every ``d`` in ``[lo, hi]``, or None if it varies."""
    if cls is E.LT:
        return True if hi < 0 else False if lo >= 0 else None
    if cls is E.LE:
        return True if hi <= 0 else False if lo > 0 else None
    if cls is E.GT:
        return True if lo > 0 else False if hi <= 0 else None
    if cls is E.GE:
        return True if lo >= 0 else False if hi < 0 else None
    if cls is E.EQ:
        return True if lo == hi == 0 else False if lo > 0 or hi < 0 else None
    if cls is E.NE:
        return False if lo == hi == 0 else True if lo > 0 or hi < 0 else None
    return None
