"""``LinearForm``: an integer index approximated as a linear form of loop positions."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...tir import expr as E

__all__ = ["LinearForm", "vars_of"]


@dataclass
class LinearForm:
    """``const + sum plain[j]*v_j + sum min(cap, capped term)``, ``j`` a loop position.

    :meth:`of` builds one from an index expression: exact for affine indices; floordiv by
    a constant scales the coefficients, floormod by a constant becomes a capped term, and
    anything else counts a unit coefficient per loop it uses.
    """

    plain: dict[int, float]
    capped: list[tuple[dict[int, float], float]]
    const: float

    @staticmethod
    def of(e: E.PrimExpr, pos: dict[E.Var, int]) -> LinearForm:
        """The form of the index ``e``; ``pos`` maps loop variables to positions."""
        t = type(e)
        if t is E.IntImm:
            return LinearForm({}, [], float(e.value))
        if t is E.Var:
            j = pos.get(e)
            return LinearForm({} if j is None else {j: 1.0}, [], 0.0)
        if t is E.Cast:
            return LinearForm.of(e.value, pos)
        if t is E.Add:
            return LinearForm.of(e.a, pos).plus(LinearForm.of(e.b, pos))
        if t is E.Sub:
            return LinearForm.of(e.a, pos).plus(LinearForm.of(e.b, pos).scaled(-1.0))
        if t is E.Mul:
            a, b = LinearForm.of(e.a, pos), LinearForm.of(e.b, pos)
            if not b.loops():
                return a.scaled(b.const)
            if not a.loops():
                return b.scaled(a.const)
        if (t is E.FloorDiv or t is E.Div) and type(e.b) is E.IntImm and e.b.value > 0:
            a = LinearForm.of(e.a, pos).scaled(1.0 / e.b.value)
            a.const = math.floor(a.const)
            return a
        if t is E.FloorMod and type(e.b) is E.IntImm and e.b.value > 0:
            a = LinearForm.of(e.a, pos)
            coefs = {j: a.coef(j) for j in a.loops()}
            if not coefs:
                return LinearForm({}, [], a.const % e.b.value)
            return LinearForm({}, [(coefs, float(e.b.value - 1))], 0.0)
        # anything else (min/max/select/indirect loads): unit coefficient per loop inside
        return LinearForm({pos[v]: 1.0 for v in vars_of(e) if v in pos}, [], 0.0)

    def loops(self) -> set[int]:
        """The loop positions the form depends on."""
        out = set(self.plain)
        for coefs, _ in self.capped:
            out.update(coefs)
        return out

    def coef(self, j: int) -> float:
        """The total coefficient of loop ``j``."""
        return self.plain.get(j, 0.0) + sum(c.get(j, 0.0) for c, _ in self.capped)

    def scaled(self, s: float) -> LinearForm:
        return LinearForm(
            {j: c * s for j, c in self.plain.items()},
            [({j: c * s for j, c in co.items()}, cap * abs(s)) for co, cap in self.capped],
            self.const * s,
        )

    def plus(self, other: LinearForm) -> LinearForm:
        plain = dict(self.plain)
        for j, c in other.plain.items():
            plain[j] = plain.get(j, 0.0) + c
        return LinearForm(plain, self.capped + other.capped, self.const + other.const)

    def signature(self) -> tuple:
        """The form without its constant: accesses with equal signatures differ by an offset."""
        return (
            tuple(sorted(self.plain.items())),
            tuple((tuple(sorted(c.items())), cap) for c, cap in self.capped),
        )


def vars_of(e: E.PrimExpr) -> list[E.Var]:
    """The variables ``e`` uses (with repeats)."""
    out: list[E.Var] = []
    stack = [e]
    while stack:
        x = stack.pop()
        if type(x) is E.Var:
            out.append(x)
        elif isinstance(x, E.BufferLoad):
            stack.extend(x.indices)
        elif isinstance(x, E.BinaryOp):
            stack += [x.a, x.b]
        elif isinstance(x, E.Cast):
            stack.append(x.value)
        elif isinstance(x, E.Not):
            stack.append(x.a)
        elif isinstance(x, E.Select):
            stack += [x.condition, x.true_value, x.false_value]
        elif isinstance(x, E.Call):
            stack.extend(x.args)
    return out
