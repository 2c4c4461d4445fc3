"""The simplifier's rules for ``//``, ``%`` (floor) and ``/`` (truncating) on integers.

:class:`DivModRules` is mixed into :class:`~.simplify.Simplifier`: division by a constant
splits the polynomial into the multiples of the divisor and a remainder whose bounds may
decide the rest; a symbolic divisor that is a single atom is factored out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import expr as E
from ..dtype import is_int
from .evaluate import float_div, round_float, trunc_div
from .int_set import NEG_INF, POS_INF, Bound
from .poly import Poly

__all__ = ["DivModRules"]


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


class DivModRules:
    """Floor division and modulo rules, mixed into the Simplifier (which provides the
    polynomial form, bounds, structural keys and the rebuild helpers)."""

    prover: Callable[[E.PrimExpr], bool] | None

    if TYPE_CHECKING:

        def poly(self, e: E.PrimExpr) -> Poly: ...

        def to_expr(self, p: Poly) -> E.PrimExpr: ...

        def poly_bound(self, p: Poly) -> Bound: ...

        def bound(self, e: E.PrimExpr) -> Bound: ...

        def key(self, e: Any) -> int: ...

        def same(self, a: Any, b: Any) -> bool: ...

        def _children(self, e: E.BinaryOp) -> tuple[E.PrimExpr, E.PrimExpr]: ...

        def _rebuild(self, e: E.BinaryOp, a: E.PrimExpr, b: E.PrimExpr, cls: Any = None): ...

        def _fold(self, e: E.BinaryOp, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr | None: ...

        def _fold_or_rebuild(self, e: E.BinaryOp, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr: ...

        def _keep(self, e: E.PrimExpr, out: E.PrimExpr) -> E.PrimExpr: ...

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
        if isinstance(inner, E.FloorDiv) and isinstance(inner.b, E.IntImm) and inner.b.value > 0:
            # (x // a) // c == x // (a * c) for positive a, c
            atom = self.floordiv_const(inner.a, inner.b.value * c)
        elif (
            isinstance(inner, E.FloorMod)
            and isinstance(inner.b, E.IntImm)
            and inner.b.value > 0
            and inner.b.value % c == 0
        ):
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
            return self.to_expr(
                self.poly(self.floormod_const(self.to_expr(q), c // g)).scale(g).iadd(r)
            )
        atom = rem.single_atom()
        if (
            isinstance(atom, E.FloorMod)
            and isinstance(atom.b, E.IntImm)
            and atom.b.value > 0
            and atom.b.value % c == 0
        ):
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
                rest_key = k[:i] + k[i + 1 :]
                j = next(n for n, at in enumerate(atoms) if self.key(at) == bk)
                rest = atoms[:j] + atoms[j + 1 :]
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
