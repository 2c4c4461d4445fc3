"""The values of affine iteration maps: iterator marks, splits of them, and sums of splits.

A split ``(mark, lower_factor, extent, scale)`` denotes ``((mark // lower_factor) % extent)
* scale``: digits ``[lower_factor, lower_factor * extent)`` of the mark, scaled. An
:class:`IterMark` ranges over ``[0, extent)``: an input loop variable (minus its minimum)
or a fused chain of splits, stored lowest digit first with scales ``1, e0, e0*e1, ...``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import expr as E
from .analyzer import Analyzer


@dataclass(frozen=True, eq=False)
class IterMark:
    """An iterator over ``[0, extent)``; ``source`` is an expression or an IterSumExpr."""

    source: E.PrimExpr | IterSumExpr
    extent: E.PrimExpr

    def __repr__(self) -> str:
        src = self.source
        text = normalize_iter_map_to_expr(src) if isinstance(src, IterSumExpr) else src
        return f"IterMark({text}, extent={self.extent})"


@dataclass(frozen=True, eq=False)
class IterSplitExpr:
    """``((source // lower_factor) % extent) * scale``."""

    source: IterMark
    lower_factor: E.PrimExpr
    extent: E.PrimExpr
    scale: E.PrimExpr

    def __repr__(self) -> str:
        return (
            f"split({self.source!r}, lower_factor={self.lower_factor}, "
            f"extent={self.extent}, scale={self.scale})"
        )

    def __str__(self) -> str:
        return str(normalize_iter_map_to_expr(self))


@dataclass(frozen=True, eq=False)
class IterSumExpr:
    """``sum(args) + base``."""

    args: tuple[IterSplitExpr, ...]
    base: E.PrimExpr

    def __repr__(self) -> str:
        return f"IterSumExpr([{', '.join(repr(a) for a in self.args)}], base={self.base})"

    def __str__(self) -> str:
        return str(normalize_iter_map_to_expr(self))


class NotAffine(Exception):
    """Internal to the iter-map analysis: becomes an entry of ``IterMapResult.errors``."""


def is_int(e: E.PrimExpr, value: int | None = None) -> bool:
    return isinstance(e, E.IntImm) and (value is None or e.value == value)


class SplitArith:
    """Arithmetic on the (mostly constant) factors of splits, with an analyzer's facts."""

    def __init__(self, analyzer: Analyzer):
        self.ana = analyzer

    def mul(self, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
        if is_int(a) and is_int(b):
            return E.IntImm(a.dtype, a.value * b.value)
        return self.ana.simplify(a * b)

    def eq(self, a: E.PrimExpr, b: E.PrimExpr | int) -> bool:
        if isinstance(b, int):
            b = E.IntImm(a.dtype, b)
        if is_int(a) and is_int(b):
            return a.value == b.value
        return a is b or self.ana.can_prove_equal(a, b)

    def divisible(self, a: E.PrimExpr, c: E.PrimExpr) -> bool:
        if is_int(a) and is_int(c):
            return c.value != 0 and a.value % c.value == 0
        return self.ana.can_prove_equal(E.FloorMod(a, c), E.IntImm(a.dtype, 0))

    def positive(self, a: E.PrimExpr) -> bool:
        return a.value > 0 if is_int(a) else self.ana.can_prove(a > 0)

    def div(self, a: E.PrimExpr, c: E.PrimExpr) -> E.PrimExpr:
        if is_int(a) and is_int(c):
            return E.IntImm(a.dtype, a.value // c.value)
        return self.ana.simplify(E.FloorDiv(a, c))


def normalize_iter_map_to_expr(expr: IterSumExpr | IterSplitExpr) -> E.PrimExpr:
    """The plain expression an IterSumExpr (or IterSplitExpr) stands for."""
    if isinstance(expr, IterSplitExpr):
        return _norm_split(expr)
    out: E.PrimExpr | None = None
    for a in reversed(expr.args):  # fused chains are stored lowest digit first
        t = _norm_split(a)
        out = t if out is None else E.Add(out, t)
    if out is None:
        return expr.base
    if not is_int(expr.base, 0):
        out = E.Add(out, expr.base)
    return out


def _norm_split(s: IterSplitExpr) -> E.PrimExpr:
    src = s.source.source
    out = normalize_iter_map_to_expr(src) if isinstance(src, IterSumExpr) else src
    if not is_int(s.lower_factor, 1):
        out = E.FloorDiv(out, s.lower_factor)
    whole = E.Mul(s.lower_factor, s.extent)
    if not Analyzer().can_prove_equal(whole, s.source.extent):
        out = E.FloorMod(out, s.extent)
    if not is_int(s.scale, 1):
        out = E.Mul(out, s.scale)
    return out
