"""Affine forms of integer index expressions and their interval bounds.

``affine(e)`` writes ``e`` exactly as ``c0 + sum(coef * atom)``: an atom is a
variable or a maximal sub-expression that is not affine (``floordiv(f, 4)``,
``A[i]``, ...). Atoms are keyed structurally, so two separately built
``floordiv(f, 4)`` nodes are the same atom.

``bounds(e, ranges)`` gives inclusive ``[lo, hi]`` bounds of ``e`` as affine forms
when the variables in ``ranges`` sweep their ranges; other variables stay symbolic.
Lowering uses it to shrink allocations, code generation to find unit-stride
accesses and non-negative divisions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .. import expr as E
from ..dtype import is_int
from ..functor import collect_vars

Key = tuple


def structural_key(e: E.PrimExpr) -> Key:
    """A hashable key equal for structurally equal expressions (variables by identity)."""
    if isinstance(e, E.Var):
        return ("Var", id(e))
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return (type(e).__name__, e.dtype, e.value)
    if isinstance(e, E.BufferLoad):
        return ("Load", id(e.buffer), tuple(structural_key(i) for i in e.indices))
    if isinstance(e, E.BinaryOp):
        return (type(e).__name__, structural_key(e.a), structural_key(e.b))
    if isinstance(e, E.Cast):
        return ("Cast", e.dtype, structural_key(e.value))
    if isinstance(e, E.Not):
        return ("Not", structural_key(e.a))
    if isinstance(e, E.Select):
        return ("Select",) + tuple(
            structural_key(x) for x in (e.condition, e.true_value, e.false_value)
        )
    if isinstance(e, E.Call):
        return ("Call", e.dtype, e.op, tuple(structural_key(a) for a in e.args))
    return ("Node", id(e))


@dataclass(frozen=True)
class Affine:
    """``const + sum(coef * atom)``; ``terms`` maps an atom's key to (coef, atom)."""

    terms: Mapping[Key, tuple[int, E.PrimExpr]]
    const: int

    @staticmethod
    def constant(value: int) -> Affine:
        return Affine({}, int(value))

    @staticmethod
    def atom(e: E.PrimExpr) -> Affine:
        return Affine({structural_key(e): (1, e)}, 0)

    def is_const(self) -> bool:
        return not self.terms

    def __add__(self, other: Affine) -> Affine:
        terms = dict(self.terms)
        for key, (coef, atom) in other.terms.items():
            old = terms.get(key, (0, atom))[0]
            if old + coef == 0:
                terms.pop(key, None)
            else:
                terms[key] = (old + coef, atom)
        return Affine(terms, self.const + other.const)

    def scale(self, factor: int) -> Affine:
        if factor == 0:
            return Affine.constant(0)
        return Affine({k: (c * factor, a) for k, (c, a) in self.terms.items()}, self.const * factor)

    def __sub__(self, other: Affine) -> Affine:
        return self + other.scale(-1)

    def offset(self, value: int) -> Affine:
        return Affine(self.terms, self.const + value)

    def coef(self, var: E.Var) -> int:
        return self.terms.get(("Var", id(var)), (0, None))[0]

    def uses(self, var: E.Var) -> bool:
        """True if ``var`` occurs anywhere (as a term or inside an atom)."""
        return any(var in collect_vars(atom) for _, atom in self.terms.values())

    def without(self, var: E.Var) -> Affine:
        return Affine({k: v for k, v in self.terms.items() if k != ("Var", id(var))}, self.const)

    def to_expr(self, dtype: str = "int32") -> E.PrimExpr:
        """Rebuild an expression: positive terms first, then negative ones, then the constant."""
        # larger strides first: i * 64 + j * 8 + k reads like a row-major offset
        terms = sorted(self.terms.values(), key=lambda t: -abs(t[0]))
        pos = [(c, a) for c, a in terms if c > 0]
        neg = [(-c, a) for c, a in terms if c < 0]
        out: E.PrimExpr | None = None
        for coef, atom in pos:
            term = _scaled(E.cast(dtype, atom), coef)
            out = term if out is None else E.Add(out, term)
        if out is None:
            out = E.const(0, dtype) if neg else E.const(self.const, dtype)
            if not neg:
                return out
        for coef, atom in neg:
            out = E.Sub(out, _scaled(E.cast(dtype, atom), coef))
        return _add_const(out, self.const, dtype)


def _scaled(atom: E.PrimExpr, coef: int) -> E.PrimExpr:
    return atom if coef == 1 else E.Mul(atom, E.const(coef, atom.dtype))


def _add_const(e: E.PrimExpr, c: int, dtype: str) -> E.PrimExpr:
    if isinstance(e, E.IntImm):
        return E.const(e.value + c, dtype)
    if c > 0:
        return E.Add(e, E.const(c, dtype))
    if c < 0:
        return E.Sub(e, E.const(-c, dtype))
    return e


def affine(e: E.PrimExpr) -> Affine:
    """The exact affine form of the integer expression ``e``."""
    terms, const = _form(e)
    return Affine(terms, const)


Terms = dict[Key, tuple[int, E.PrimExpr]]


#: the node types :func:`_form` looks into, in the order it tests a subclass for them
_KINDS = (E.Var, E.IntImm, E.Add, E.Sub, E.Mul, E.Cast, E.FloorDiv, E.FloorMod)
_KIND_SET = frozenset(_KINDS)


def _form(e: E.PrimExpr) -> tuple[Terms, int]:
    """``affine(e)`` as (terms, const), the terms a new dict the caller owns.

    The hot path of code generation (every access's offset): the forms of sub-expressions
    are merged in place, without an :class:`Affine` or a copy per node. The merges are
    those of ``Affine.__add__`` and ``Affine.scale`` in the same order, so the terms come
    out in the same order (``to_expr`` breaks ties by it)."""
    t = type(e)
    if t is E.Var:  # the most common atom: skip the tests below
        return {("Var", id(e)): (1, e)}, 0
    if t not in _KIND_SET:  # an atom, or a subclass of a kind
        t = next((k for k in _KINDS if isinstance(e, k)), None)
    if t is E.IntImm:
        return {}, int(e.value)
    if t is E.Add or t is E.Sub:
        terms, const = _form(e.a)
        other, other_const = _form(e.b)
        sign = 1 if t is E.Add else -1
        for key, (coef, atom) in other.items():
            total = terms.get(key, (0, atom))[0] + sign * coef
            if total == 0:
                terms.pop(key, None)
            else:
                terms[key] = (total, atom)
        return terms, const + sign * other_const
    if t is E.Mul:
        a, b = _form(e.a), _form(e.b)
        if not b[0]:
            return _scale(a, b[1])
        if not a[0]:
            return _scale(b, a[1])
    elif t is E.Cast:
        if is_int(e.dtype) and is_int(e.value.dtype):
            return _form(e.value)  # assume no wrap-around in index arithmetic
    elif t is E.FloorDiv:
        (terms, const), (b_terms, div) = _form(e.a), _form(e.b)
        if not b_terms and div > 0:
            if not terms:
                return {}, const // div
            # floordiv(c*X + k, c) == X + floordiv(k, c) when every coefficient divides by c
            if all(c % div == 0 for c, _ in terms.values()):
                return {k: (c // div, x) for k, (c, x) in terms.items()}, const // div
    elif t is E.FloorMod:
        (terms, const), (b_terms, div) = _form(e.a), _form(e.b)
        if not b_terms and div > 0:
            if not terms or all(c % div == 0 for c, _ in terms.values()):
                return {}, const % div
    return {structural_key(e): (1, e)}, 0


def _scale(form: tuple[Terms, int], factor: int) -> tuple[Terms, int]:
    """``Affine.scale`` of a form."""
    terms, const = form
    if factor == 0:
        return {}, 0
    return {k: (c * factor, a) for k, (c, a) in terms.items()}, const * factor


# ----------------------------------------------------------------------------- bounds

Interval = tuple[Affine, Affine]
Ranges = Mapping[E.Var, tuple[E.PrimExpr, E.PrimExpr]]  # var -> (min, extent)


def bounds(e: E.PrimExpr, ranges: Ranges) -> Interval | None:
    """Inclusive bounds of ``e`` while each var in ``ranges`` sweeps ``[min, min + extent)``.

    Returns None when no affine bounds are known (e.g. a symbolic extent).
    """
    form = affine(e)
    lo, hi = Affine.constant(form.const), Affine.constant(form.const)
    for coef, atom in form.terms.values():
        iv = _atom_bounds(atom, ranges)
        if iv is None:
            return None
        a_lo, a_hi = iv
        if coef > 0:
            lo, hi = lo + a_lo.scale(coef), hi + a_hi.scale(coef)
        else:
            lo, hi = lo + a_hi.scale(coef), hi + a_lo.scale(coef)
    return lo, hi


def const_bounds(e: E.PrimExpr, ranges: Ranges) -> tuple[int, int] | None:
    """Constant inclusive bounds of ``e``, or None."""
    iv = bounds(e, ranges)
    if iv is None or not iv[0].is_const() or not iv[1].is_const():
        return None
    return iv[0].const, iv[1].const


def _free_of(e: E.PrimExpr, ranges: Ranges) -> bool:
    return not any(v in ranges for v in collect_vars(e))


def _atom_bounds(atom: E.PrimExpr, ranges: Ranges) -> Interval | None:
    if isinstance(atom, E.Var) and atom in ranges:
        vmin, extent = ranges[atom]
        if type(vmin) is E.IntImm and type(extent) is E.IntImm:  # a loop's usual range
            if extent.value <= 0:
                return None
            return Affine.constant(vmin.value), Affine.constant(vmin.value + extent.value - 1)
        ext = affine(extent)
        if not ext.is_const() or ext.const <= 0:
            return None
        lo = bounds(vmin, ranges)
        if lo is None:
            return None
        return lo[0], lo[1].offset(ext.const - 1)
    if _free_of(atom, ranges):
        form = Affine.atom(atom)
        return form, form
    if isinstance(atom, (E.FloorDiv, E.FloorMod, E.Div)):
        return _div_bounds(atom, ranges)
    if isinstance(atom, (E.Min, E.Max)):
        a, b = bounds(atom.a, ranges), bounds(atom.b, ranges)
        if a is None or b is None:
            return None
        pick = _min if isinstance(atom, E.Min) else _max
        lo, hi = pick(a[0], b[0]), pick(a[1], b[1])
        return None if lo is None or hi is None else (lo, hi)
    if isinstance(atom, E.Select):
        a, b = bounds(atom.true_value, ranges), bounds(atom.false_value, ranges)
        if a is None or b is None:
            return None
        lo, hi = _min(a[0], b[0]), _max(a[1], b[1])
        return None if lo is None or hi is None else (lo, hi)
    return None


def _min(a: Affine, b: Affine) -> Affine | None:
    d = a - b
    if d.is_const():
        return a if d.const <= 0 else b
    return None


def _max(a: Affine, b: Affine) -> Affine | None:
    d = a - b
    if d.is_const():
        return a if d.const >= 0 else b
    return None


def _div_bounds(atom: E.BinaryOp, ranges: Ranges) -> Interval | None:
    divisor = affine(atom.b)
    if not divisor.is_const() or divisor.const <= 0:
        return None
    c = divisor.const
    iv = bounds(atom.a, ranges)
    if iv is None:
        return None
    lo, hi = iv
    if isinstance(atom, E.FloorMod):
        d = hi - lo
        # lo and hi share a symbolic part that is a multiple of c: look at the constants
        shared = d.is_const() and all(k % c == 0 for k, _ in lo.terms.values())
        if shared and lo.const // c == hi.const // c:
            return Affine.constant(lo.const % c), Affine.constant(hi.const % c)
        return Affine.constant(0), Affine.constant(c - 1)
    if isinstance(atom, E.Div) and not (lo.is_const() and lo.const >= 0):
        return None  # truncating division of possibly negative values
    return _floordiv_form(lo, c), _floordiv_form(hi, c)


def _floordiv_form(form: Affine, c: int) -> Affine:
    if all(k % c == 0 for k, _ in form.terms.values()):
        return Affine({key: (k // c, x) for key, (k, x) in form.terms.items()}, form.const // c)
    return Affine.atom(E.FloorDiv(form.to_expr(_dtype_of(form)), E.const(c, _dtype_of(form))))


def _dtype_of(form: Affine) -> str:
    for _, atom in form.terms.values():
        if atom.dtype == "int64":
            return "int64"
    return "int32"
