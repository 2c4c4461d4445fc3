"""The expression simplifier.

Integer ``+ - *`` are put in a canonical polynomial form (like terms collected, constant
coefficients, terms ordered by decreasing coefficient then first appearance), and
``//``, ``%``, ``min``, ``max``, comparisons and ``select`` are decided from constant
bounds of the operands where possible. Every rule is an identity of mathematical
integers: the result has the same value as the input for every assignment of the
variables within their bound ranges. Float expressions are only constant-folded.

A :class:`Simplifier` lives for one ``Analyzer.simplify`` call; its caches (structural
keys, polynomial forms, bounds) die with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from .. import expr as E
from ..dtype import is_float, is_int
from ..functor import Mutator
from .evaluate import (
    binary_value,
    call_value,
    cast_value,
    compare_value,
    float_div,
    round_float,
    trunc_div,
)
from .int_set import (
    NEG_INF,
    POS_INF,
    Bound,
    ConstIntBoundAnalyzer,
    bound_add,
    bound_mul,
    bound_scale,
)

#: Largest number of terms a product of two sums is distributed into.
MAX_DISTRIBUTE_TERMS = 16
#: Largest tree size (in nodes) of the atoms a distributed product may hold.
MAX_DISTRIBUTE_SIZE = 64

_CMP_CLASS = {E.EqualOp: E.EQ, E.NotEqualOp: E.NE}
_DISPATCH = {
    E.Var: "_var", E.Add: "_arith", E.Sub: "_arith", E.Mul: "_arith", E.FloorDiv: "_divmod",
    E.FloorMod: "_divmod", E.Div: "_div", E.Min: "_minmax", E.Max: "_minmax", E.And: "_andor",
    E.Or: "_andor", E.Not: "_not", E.Select: "_select", E.Cast: "_cast", E.Call: "_call",
    **{cls: "_compare" for cls in (E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE, E.EqualOp, E.NotEqualOp)},
}
_NEGATED_CMP = {E.EQ: E.NE, E.NE: E.EQ, E.LT: E.GE, E.GE: E.LT, E.LE: E.GT, E.GT: E.LE}


# ----------------------------------------------------------------------------- structural keys


class ExprKeyer:
    """Hash-consing of expressions: structurally equal expressions get the same int key.

    Variables and buffers are distinguished by identity. Keys are only meaningful within
    one keyer.
    """

    def __init__(self):
        self._memo: dict[int, tuple[Any, int]] = {}
        self._table: dict[tuple, int] = {}

    def key(self, e: Any) -> int:
        memo = self._memo
        hit = memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        stack = [e]  # explicit post-order: expressions may be thousands of nodes deep
        while stack:
            node = stack[-1]
            pending = []
            for c in expr_children(node):
                h = memo.get(id(c))
                if h is None or h[0] is not c:
                    pending.append(c)
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            h = memo.get(id(node))
            if h is not None and h[0] is node:
                continue
            shape = self._shape(node)
            k = self._table.get(shape)
            if k is None:
                k = self._table[shape] = len(self._table)
            memo[id(node)] = (node, k)
        return memo[id(e)][1]

    def _known(self, e: Any) -> bool:
        hit = self._memo.get(id(e))
        return hit is not None and hit[0] is e

    def lookup(self, shape: tuple) -> int | None:
        """The key of an expression of this shape, if one was ever keyed."""
        return self._table.get(shape)

    def int_key(self, value: int, dtype: str) -> int:
        shape = ("int", dtype, value)
        k = self._table.get(shape)
        if k is None:
            k = self._table[shape] = len(self._table)
        return k

    def _shape(self, e: Any) -> tuple:
        if isinstance(e, E.IntImm):
            return ("int", e.dtype, e.value)
        if isinstance(e, E.Var):
            return ("var", id(e))
        if isinstance(e, E.FloatImm):
            return ("float", e.dtype, repr(e.value))
        if isinstance(e, E.BinaryOp):
            cls = _CMP_CLASS.get(type(e), type(e))
            return (cls.__name__, self.key(e.a), self.key(e.b))
        if isinstance(e, E.Not):
            return ("not", self.key(e.a))
        if isinstance(e, E.Select):
            return ("select", self.key(e.condition), self.key(e.true_value),
                    self.key(e.false_value))
        if isinstance(e, E.Cast):
            return ("cast", e.dtype, self.key(e.value))
        if isinstance(e, E.Call):
            return ("call", e.dtype, e.op, *[self.key(a) for a in e.args])
        if isinstance(e, E.BufferLoad):
            return ("load", id(e.buffer), *[self.key(i) for i in e.indices])
        if isinstance(e, E.StringImm):
            return ("str", e.value)
        return ("node", id(e))


def expr_children(e: Any) -> tuple:
    """The sub-expressions of an expression node (empty for leaves and unknown nodes)."""
    if isinstance(e, E.BinaryOp):
        return (e.a, e.b)
    if isinstance(e, (E.Cast,)):
        return (e.value,)
    if isinstance(e, E.Not):
        return (e.a,)
    if isinstance(e, E.Select):
        return (e.condition, e.true_value, e.false_value)
    if isinstance(e, E.Call):
        return e.args
    if isinstance(e, E.BufferLoad):
        return e.indices
    return ()


def free_vars(e: Any) -> set[E.Var]:
    """The variables of an expression (iteratively; ``Reduce`` bodies are not entered)."""
    out: set[E.Var] = set()
    seen: set[int] = set()
    stack = [e]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, E.Var):
            out.add(node)
        else:
            stack.extend(expr_children(node))
    return out


# ----------------------------------------------------------------------------- polynomials


class Poly:
    """``sum(coeff * prod(atoms)) + const`` over one integer dtype.

    ``terms`` maps a monomial key (the sorted atom keys) to ``[atoms, coeff]``; dict order
    is first appearance. Coefficients are never zero.
    """

    __slots__ = ("const", "dtype", "terms")

    def __init__(self, dtype: str, terms: dict | None = None, const: int = 0):
        self.dtype = dtype
        self.terms: dict[tuple, list] = terms if terms is not None else {}
        self.const = const

    def copy(self) -> Poly:
        return Poly(self.dtype, {k: [v[0], v[1]] for k, v in self.terms.items()}, self.const)

    def add_term(self, mkey: tuple, atoms: tuple, coeff: int) -> None:
        t = self.terms.get(mkey)
        if t is None:
            if coeff:
                self.terms[mkey] = [atoms, coeff]
        else:
            t[1] += coeff
            if t[1] == 0:
                del self.terms[mkey]

    def add(self, other: Poly, scale: int = 1) -> Poly:
        return self.copy().iadd(other, scale)

    def iadd(self, other: Poly, scale: int = 1) -> Poly:
        """Add ``scale * other`` in place and return self."""
        for k, (atoms, c) in other.terms.items():
            self.add_term(k, atoms, c * scale)
        self.const += other.const * scale
        return self

    def scale(self, c: int) -> Poly:
        if c == 0:
            return Poly(self.dtype)
        return Poly(self.dtype, {k: [a, v * c] for k, (a, v) in self.terms.items()}, self.const * c)

    def coeffs(self) -> list[int]:
        return [c for _, c in self.terms.values()]

    def single_atom(self) -> E.PrimExpr | None:
        """The atom if this polynomial is exactly one atom (coefficient 1, no constant)."""
        if self.const == 0 and len(self.terms) == 1:
            atoms, c = next(iter(self.terms.values()))
            if c == 1 and len(atoms) == 1:
                return atoms[0]
        return None


def _trunc_rem(x: int, c: int) -> int:
    """``x`` minus the multiple of ``c`` nearest zero (same sign as ``x``, ``|r| < c``)."""
    return x - c * trunc_div(x, c)


def _floor_bounds(b: Bound, c: int) -> int | None:
    """``k`` if every value of ``b`` lies in ``[k*c, (k+1)*c)``, else None (c > 0)."""
    lo, hi = b
    if lo <= NEG_INF or hi >= POS_INF:
        return None
    k = lo // c
    return k if hi // c == k else None


# ----------------------------------------------------------------------------- simplifier


class Simplifier(Mutator):
    """One simplification run. ``bounds`` are variable bounds, ``values`` substitutions."""

    def __init__(self, bounds: Mapping[E.Var, Bound], values: Mapping[E.Var, E.PrimExpr],
                 prover: Callable[[E.PrimExpr], bool] | None = None):
        self.keyer = ExprKeyer()
        # optional symbolic prover of integer comparisons (for symbolic loop ranges)
        self.prover = prover
        self.cib = ConstIntBoundAnalyzer(bounds)
        self.values = values
        self._polys: dict[int, tuple[E.PrimExpr, Poly]] = {}
        self._done: dict[int, tuple[Any, Any]] = {}
        self._sizes: dict[int, tuple[Any, int]] = {}
        self._dispatch = {cls: getattr(self, name) for cls, name in _DISPATCH.items()}

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
            out = fn(node) if fn is not None else self.generic_visit(node)
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

    # polynomial conversion ----------------------------------------------------------
    def poly(self, e: E.PrimExpr) -> Poly:
        """The polynomial of an already simplified integer expression."""
        hit = self._polys.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        if isinstance(e, E.IntImm):
            p = Poly(e.dtype, const=e.value)
        elif isinstance(e, (E.Add, E.Sub)):
            spine, node = [], e
            while isinstance(node, (E.Add, E.Sub)) and not self._has_poly(node):
                spine.append(node)
                node = node.a
            p = self.poly(node).copy()
            for n in reversed(spine):
                p.iadd(self.poly(n.b), 1 if isinstance(n, E.Add) else -1)
        elif isinstance(e, E.Mul):
            p = self._poly_mul(self.poly(e.a), self.poly(e.b), e)
        else:
            k = self.key(e)
            p = Poly(e.dtype, {(k,): [(e,), 1]})
        self._polys[id(e)] = (e, p)
        return p

    def _poly_size(self, p: Poly) -> int:
        return sum(self.tree_size(a) for atoms, _ in p.terms.values() for a in atoms)

    def tree_size(self, e: E.PrimExpr) -> int:
        """Nodes of ``e`` counted as a tree (shared sub-expressions count each time)."""
        stack = [e]
        while stack:
            node = stack[-1]
            kids = expr_children(node)
            pending = [c for c in kids if id(c) not in self._sizes]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            self._sizes[id(node)] = (node, 1 + sum(self._sizes[id(c)][1] for c in kids))
        return self._sizes[id(e)][1]

    def _has_poly(self, e: E.PrimExpr) -> bool:
        hit = self._polys.get(id(e))
        return hit is not None and hit[0] is e

    def _poly_mul(self, p: Poly, q: Poly, node: E.PrimExpr | None = None) -> Poly:
        if not q.terms:
            return p.scale(q.const)
        if not p.terms:
            return q.scale(p.const)
        np_, nq = len(p.terms) + (p.const != 0), len(q.terms) + (q.const != 0)
        # distributing copies every atom of one side once per term of the other: keep the
        # copied tree small, or repeated products grow exponentially as trees
        if np_ * nq > MAX_DISTRIBUTE_TERMS or (
                nq * self._poly_size(p) + np_ * self._poly_size(q) > MAX_DISTRIBUTE_SIZE):
            atom = node if node is not None else E.Mul(self.to_expr(p), self.to_expr(q))
            return Poly(p.dtype, {(self.key(atom),): [(atom,), 1]})
        out = Poly(p.dtype, const=p.const * q.const)
        for k1, (a1, c1) in p.terms.items():
            if q.const:
                out.add_term(k1, a1, c1 * q.const)
            for k2, (a2, c2) in q.terms.items():
                out.add_term(tuple(sorted(k1 + k2)), a1 + a2, c1 * c2)
        if p.const:
            for k2, (a2, c2) in q.terms.items():
                out.add_term(k2, a2, c2 * p.const)
        return out

    def to_expr(self, p: Poly) -> E.PrimExpr:
        """Build the canonical expression of ``p`` (and remember its polynomial)."""
        p = self._merge_divmod(p)
        dt = p.dtype
        items = list(p.terms.values())
        if not items:
            return E.IntImm(dt, p.const)
        if len(items) == 1 and p.const == 0 and items[0][1] == 1 and len(items[0][0]) == 1:
            return items[0][0][0]
        pos = sorted((t for t in items if t[1] > 0), key=lambda t: -t[1])
        neg = sorted((t for t in items if t[1] < 0), key=lambda t: t[1])

        def term(atoms: tuple, c: int) -> E.PrimExpr:
            out = atoms[0]
            for a in atoms[1:]:
                out = E.Mul(out, a)
            return out if c == 1 else E.Mul(out, E.IntImm(dt, c))

        const = p.const
        if pos:
            out = term(*pos[0])
            for t in pos[1:]:
                out = E.Add(out, term(*t))
        elif const > 0:
            out, const = E.IntImm(dt, const), 0
        else:
            out, neg = term(*neg[0]), neg[1:]
        for atoms, c in neg:
            out = E.Sub(out, term(atoms, -c))
        if const > 0:
            out = E.Add(out, E.IntImm(dt, const))
        elif const < 0:
            out = E.Sub(out, E.IntImm(dt, -const))
        self._polys[id(out)] = (out, p)
        return out

    def _merge_divmod(self, p: Poly) -> Poly:
        """Merge ``(x // k) * k * c + (x % k) * c`` into ``x * c``, and ``x * c - (x // k) *
        k * c`` into ``(x % k) * c``."""
        if len(p.terms) < 2:
            return p
        for _ in range(4 * len(p.terms)):  # each merge removes a div or mod atom
            q = self._merge_divmod_once(p)
            if q is None:
                break
            p = q
        return p

    def _merge_divmod_once(self, p: Poly) -> Poly | None:
        for mkey, (atoms, c) in p.terms.items():
            m = atoms[0]
            if len(atoms) != 1 or not isinstance(m, (E.FloorMod, E.FloorDiv)):
                continue
            if not isinstance(m.b, E.IntImm) or m.b.value <= 0:
                continue
            k = m.b.value
            if isinstance(m, E.FloorMod):
                dkey = self.keyer.lookup(("FloorDiv", self.key(m.a), self.key(m.b)))
                t = p.terms.get((dkey,)) if dkey is not None else None
                if t is None or t[1] != c * k:
                    continue
                out = p.copy()
                del out.terms[mkey]
                del out.terms[(dkey,)]
                return out.add(self.poly(m.a), c)
            if c % k:
                continue
            cx = -c // k
            x = self.poly(m.a)
            if not x.terms or any(p.terms.get(xk, (None, None))[1] != cx * xc
                                  for xk, (_, xc) in x.terms.items()):
                continue
            out = p.add(x, -cx)
            del out.terms[mkey]
            return out.add(self.poly(self.floormod_const(m.a, k)), cx)
        return None

    def poly_bound(self, p: Poly) -> Bound:
        b: Bound = (p.const, p.const)
        for atoms, c in p.terms.values():
            mb = self.bound(atoms[0])
            for a in atoms[1:]:
                mb = bound_mul(mb, self.bound(a))
            b = bound_add(b, bound_scale(mb, c))
        return b

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

    def _divmod(self, e: E.BinaryOp) -> E.PrimExpr:
        a, b = self._children(e)
        if not is_int(e.dtype):
            return self._fold_or_rebuild(e, a, b)
        is_div = isinstance(e, E.FloorDiv)
        if isinstance(b, E.IntImm):
            if b.value == 0:
                return self._rebuild(e, a, b)
            out = self.floordiv_const(a, b.value) if is_div else self.floormod_const(a, b.value)
            return self._keep(e, out)
        out = self._divmod_symbolic(a, b, is_div)
        return self._keep(e, out) if out is not None else self._rebuild(e, a, b)

    def floordiv_const(self, a: E.PrimExpr, c: int) -> E.PrimExpr:
        """``a // c`` for a simplified integer ``a`` and a non-zero constant ``c``."""
        p = self.poly(a)
        if c < 0:  # rare; only fold constants and c == -1
            if not p.terms:
                return E.IntImm(p.dtype, p.const // c)
            return self.to_expr(p.scale(-1)) if c == -1 else E.FloorDiv(a, E.IntImm(p.dtype, c))
        if c == 1:
            return self.to_expr(p)
        quot = Poly(p.dtype)
        rem = Poly(p.dtype)
        for k, (atoms, coeff) in p.terms.items():
            if coeff % c == 0:
                quot.terms[k] = [atoms, coeff // c]
            else:
                rem.terms[k] = [atoms, coeff]
        if p.const % c == 0 or not rem.terms:
            quot.const = p.const // c
            rem_const = 0
        else:
            rem_const = p.const
        rem.const = rem_const
        if not rem.terms:
            return self.to_expr(quot)
        k = _floor_bounds(self.poly_bound(rem), c)
        if k is not None:
            quot.const += k
            return self.to_expr(quot)
        fs = self._factor_split(rem, c)
        if fs is not None:  # (g*q + r) // c == q // (c/g) when 0 <= r < g and g | c
            g, q, _ = fs
            return self.to_expr(quot.iadd(self.poly(self.floordiv_const(self.to_expr(q), c // g))))
        inner = rem.single_atom()
        if (isinstance(inner, E.FloorDiv) and isinstance(inner.b, E.IntImm)
                and inner.b.value > 0):
            # (x // a) // c == x // (a * c) for positive a, c
            atom = self.floordiv_const(inner.a, inner.b.value * c)
        elif (isinstance(inner, E.FloorMod) and isinstance(inner.b, E.IntImm)
                and inner.b.value > 0 and inner.b.value % c == 0):
            # (x % m) // c == (x // c) % (m // c) when c divides m
            atom = self.floormod_const(self.floordiv_const(inner.a, c), inner.b.value // c)
        else:
            atom = E.FloorDiv(self.to_expr(rem), E.IntImm(p.dtype, c))
        return self.to_expr(quot.add(self.poly(atom)))

    def floormod_const(self, a: E.PrimExpr, c: int) -> E.PrimExpr:
        """``a % c`` for a simplified integer ``a`` and a non-zero constant ``c``."""
        p = self.poly(a)
        dt = p.dtype
        if c == 1 or c == -1:
            return E.IntImm(dt, 0)
        if c < 0:  # rare; only fold constants
            return E.IntImm(dt, p.const % c) if not p.terms else E.FloorMod(a, E.IntImm(dt, c))
        rem = Poly(dt, const=_trunc_rem(p.const, c))
        for k, (atoms, coeff) in p.terms.items():
            # drop multiples of c; other coefficients stay (reducing them modulo c is valid
            # but hides the affine structure that iter-map analysis looks for)
            if coeff % c:
                rem.terms[k] = [atoms, coeff]
        if not rem.terms:
            return E.IntImm(dt, rem.const % c)
        k = _floor_bounds(self.poly_bound(rem), c)
        if k is not None:
            rem.const -= k * c
            return self.to_expr(rem)
        fs = self._factor_split(rem, c)
        if fs is not None:  # (g*q + r) % c == g * (q % (c/g)) + r when 0 <= r < g and g | c
            g, q, r = fs
            return self.to_expr(self.poly(self.floormod_const(self.to_expr(q), c // g)).scale(g)
                                .iadd(r))
        atom = rem.single_atom()
        if (isinstance(atom, E.FloorMod) and isinstance(atom.b, E.IntImm)
                and atom.b.value > 0 and atom.b.value % c == 0):
            # (x % (c*m)) % c == x % c
            return self.floormod_const(atom.a, c)
        return E.FloorMod(self.to_expr(rem), E.IntImm(dt, c))

    def _factor_split(self, rem: Poly, c: int) -> tuple[int, Poly, Poly] | None:
        """``(g, q, r)`` with ``rem == g*q + r``, ``g | c``, ``1 < g < c``, ``0 <= r < g``."""
        for g in sorted({math.gcd(v, c) for v in rem.coeffs()} - {1, c}, reverse=True):
            q, r = Poly(rem.dtype), Poly(rem.dtype, const=rem.const)
            for k, (atoms, v) in rem.terms.items():
                if v % g == 0:
                    q.terms[k] = [atoms, v // g]
                else:
                    r.terms[k] = [atoms, v]
            lo, hi = self.poly_bound(r)
            shift = _floor_bounds((lo, hi), g)
            if shift is None:
                continue
            q.const += shift
            r.const -= shift * g
            return g, q, r
        return None

    def _divmod_symbolic(self, a: E.PrimExpr, b: E.PrimExpr, is_div: bool) -> E.PrimExpr | None:
        # b == 0 makes the input undefined, so b != 0 may be assumed
        bb = self.bound(b)
        dt = a.dtype
        if self.same(a, b):
            return E.IntImm(dt, 1 if is_div else 0)
        ab = self.bound(a)
        if bb[0] > 0 and ab[0] >= 0 and ab[1] < bb[0]:
            return E.IntImm(dt, 0) if is_div else a
        if self.prover is not None and ab[0] >= 0 and self.prover(E.LT(a, b)):
            return E.IntImm(dt, 0) if is_div else a
        # (b * q + r) // b == q + r // b, (b * q + r) % b == r % b  (b a single atom)
        p = self.poly(a)
        bk = self.key(b)
        quot, rem = Poly(dt), Poly(dt, const=p.const)
        for k, (atoms, coeff) in p.terms.items():
            if bk in k:
                i = k.index(bk)
                rest_key = k[:i] + k[i + 1:]
                j = next(n for n, at in enumerate(atoms) if self.key(at) == bk)
                rest = atoms[:j] + atoms[j + 1:]
                if rest:
                    quot.add_term(rest_key, rest, coeff)
                else:
                    quot.const += coeff
            else:
                rem.terms[k] = [atoms, coeff]
        if not quot.terms and quot.const == 0:
            return None
        r = self.to_expr(rem)
        if not rem.terms and rem.const == 0:
            tail: E.PrimExpr = E.IntImm(dt, 0)
        else:
            inner = self._divmod_symbolic(r, b, is_div)
            if inner is not None:
                tail = inner
            else:
                tail = E.FloorDiv(r, b) if is_div else E.FloorMod(r, b)
        return self.to_expr(quot.add(self.poly(tail))) if is_div else tail

    def _div(self, e: E.Div) -> E.PrimExpr:
        a, b = self._children(e)
        if not is_int(e.dtype):
            if isinstance(a, E.FloatImm) and isinstance(b, E.FloatImm):
                return E.FloatImm(e.dtype, round_float(float_div(a.value, b.value), e.dtype))
            return self._rebuild(e, a, b)
        folded = self._fold(e, a, b)
        if folded is not None:
            return folded
        if isinstance(b, E.IntImm) and b.value != 0:
            c = b.value
            lo, hi = self.bound(a)
            if lo >= 0:  # truncation == floor for a non-negative numerator
                out = self.floordiv_const(a, abs(c))
                return self._keep(e, out if c > 0 else self.to_expr(self.poly(out).scale(-1)))
            if hi <= 0:  # trunc(a / c) == -((-a) // c)
                neg = self.to_expr(self.poly(a).scale(-1))
                out = self.floordiv_const(neg, abs(c))
                return self._keep(e, out if c < 0 else self.to_expr(self.poly(out).scale(-1)))
        return self._rebuild(e, a, b)

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
                if lo_first[0] <= NEG_INF and hi_second[1] >= POS_INF and (
                        hi_second[0] <= lo_first[1] + 1):
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
