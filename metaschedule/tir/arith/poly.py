"""The canonical polynomial form of integer ``+ - *`` used by the simplifier.

:class:`Poly` is ``sum(coeff * prod(atoms)) + const``; :class:`PolyForm` is the part of
:class:`~.simplify.Simplifier` that converts between expressions and polynomials (like
terms collected, terms ordered by decreasing coefficient then first appearance, and
``(x // k) * k + x % k`` merged back into ``x``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import expr as E
from .expr_key import ExprKeyer, expr_children
from .int_set import Bound, bound_add, bound_mul, bound_scale

__all__ = ["MAX_DISTRIBUTE_SIZE", "MAX_DISTRIBUTE_TERMS", "Poly", "PolyForm"]

#: Largest number of terms a product of two sums is distributed into.
MAX_DISTRIBUTE_TERMS = 16
#: Largest tree size (in nodes) of the atoms a distributed product may hold.
MAX_DISTRIBUTE_SIZE = 64


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


class PolyForm:
    """Expression <-> polynomial conversion, mixed into the Simplifier (which provides
    ``key``, ``bound``, ``floormod_const`` and the caches ``_polys`` and ``_sizes``)."""

    keyer: ExprKeyer
    _polys: dict[int, tuple[E.PrimExpr, Poly]]
    _sizes: dict[int, tuple[Any, int]]

    if TYPE_CHECKING:

        def key(self, e: Any) -> int: ...

        def bound(self, e: E.PrimExpr) -> Bound: ...

        def floormod_const(self, a: E.PrimExpr, c: int) -> E.PrimExpr: ...

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
            nq * self._poly_size(p) + np_ * self._poly_size(q) > MAX_DISTRIBUTE_SIZE
        ):
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
            if not x.terms or any(
                p.terms.get(xk, (None, None))[1] != cx * xc for xk, (_, xc) in x.terms.items()
            ):
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
