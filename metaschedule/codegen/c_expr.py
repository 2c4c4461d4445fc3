"""C expressions for lowered PrimFuncs: the scalar half of the CPU back end.

:class:`ExprWriter` turns a ``PrimExpr`` into C source text; ``FunctionWriter``
(:mod:`.c_codegen`) inherits it for statements and loops, and :mod:`.c_vector` calls it
for the scalar parts of vector code. Parentheses that C's precedence makes redundant are
dropped; ``floordiv``/``floormod`` become plain ``/``/``%`` when the dividend is provably
non-negative over the enclosing loops.
"""

from __future__ import annotations

from ..tir import expr as E
from ..tir.buffer import Buffer
from ..tir.dtype import is_bool, is_float, is_int
from ..tir.transform.affine import Affine, affine, const_bounds
from .c_helpers import Helpers, c_literal, scalar_call
from .c_intrin import C_INTRINSICS, intrinsic_call


class CodegenError(ValueError):
    """The IR cannot be turned into C for this target."""


class ExprWriter:
    """Emits C for expressions; the subclass provides the names and loop ranges in scope."""

    name: str
    helpers: Helpers
    var_names: dict[E.Var, str]
    buf_names: dict[Buffer, str]
    ranges: dict[E.Var, tuple[E.PrimExpr, E.PrimExpr]]

    def index(self, buf: Buffer, indices: tuple[E.PrimExpr, ...]) -> str:
        return strip_parens(self.expr(linear_index(buf, indices)))

    def nonneg(self, e: E.PrimExpr) -> bool:
        b = const_bounds(e, self.ranges)
        return b is not None and b[0] >= 0

    def expr(self, e: E.PrimExpr) -> str:
        method = _EXPR_DISPATCH.get(type(e))
        if method is None:
            for cls, m in _EXPR_DISPATCH.items():
                if isinstance(e, cls):
                    method = m
                    break
        if method is None:
            raise CodegenError(f"cannot generate C for expression {type(e).__name__}: {e}")
        return method(self, e)

    def _var(self, e: E.Var) -> str:
        if e not in self.var_names:
            raise CodegenError(
                f"free variable {e.name} in {self.name}: only loop variables may appear after "
                "lowering (dynamic shapes are not supported)"
            )
        return self.var_names[e]

    def _imm(self, e) -> str:
        return c_literal(e.value, e.dtype, self.helpers.dialect)

    def _cast(self, e: E.Cast) -> str:
        if is_bool(e.dtype):
            return f"({self.expr(e.value)} != 0)"
        return f"(({self.helpers.ctype(e.dtype)}){self.expr(e.value)})"

    def _binary(self, e: E.BinaryOp) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        prec = _prec(e)
        if prec:  # drop parentheses C's precedence makes redundant (left-associative ops)
            if _prec(e.a) >= prec:
                a = strip_parens(a)
            if _prec(e.b) > prec:
                b = strip_parens(b)
        if isinstance(e, (E.Min, E.Max)):
            return f"{self.helpers.minmax(e.symbol, e.dtype)}({a}, {b})"
        if isinstance(e, (E.FloorDiv, E.FloorMod)):
            return self._floor_divmod(e, a, b)
        op = {E.And: "&&", E.Or: "||"}.get(type(e), e.symbol)
        if isinstance(e, E.EQ):
            op = "=="
        elif isinstance(e, E.NE):
            op = "!="
        return f"({a} {op} {b})"

    def _floor_divmod(self, e: E.BinaryOp, a: str, b: str) -> str:
        div = isinstance(e, E.FloorDiv)
        if is_float(e.dtype):
            q = scalar_call("floor", e.dtype, [f"{a} / {b}"], self.helpers.dialect)
            return q if div else f"({a} - {q} * {b})"
        if is_int(e.dtype) and self.nonneg(e.a) and _positive_const(e.b):
            return f"({a} {'/' if div else '%'} {b})"
        return f"{self.helpers.floordiv('div' if div else 'mod', e.dtype)}({a}, {b})"

    def _not(self, e: E.Not) -> str:
        return f"(!{self.expr(e.a)})"

    def _select(self, e: E.Select) -> str:
        cond = self.known_guard(e.condition)
        if isinstance(cond, bool):
            return self.expr(e.true_value if cond else e.false_value)
        return f"({self.expr(cond)} ? {self.expr(e.true_value)} : {self.expr(e.false_value)})"

    def known_guard(self, cond: E.PrimExpr) -> E.PrimExpr | bool:
        """``cond`` without the conjuncts the enclosing loops' ranges prove true: True if
        every one is, False if one never holds. An inlined padding's guard tests four
        bounds per input pixel, and in a window's border tile, written out with its
        steps as constants, most of them hold for every tile (only the outermost input
        rows and columns can fall outside)."""
        kept: list[E.PrimExpr] = []
        for atom in conjuncts(cond):
            holds = _holds(atom, self.ranges)
            if holds is False:
                return False
            if holds is None:
                kept.append(atom)
        if not kept:
            return True
        out = kept[0]
        for atom in kept[1:]:
            out = E.And(out, atom)
        return out

    def _call(self, e: E.Call) -> str:
        if e.op in C_INTRINSICS:  # a tensor intrinsic's C function
            return intrinsic_call(self, e, CodegenError)
        if not is_float(e.dtype):
            raise CodegenError(f"intrinsic {e.op} needs float arguments, got {e.dtype}")
        return scalar_call(e.op, e.dtype, [self.expr(a) for a in e.args], self.helpers.dialect)

    def _load(self, e: E.BufferLoad) -> str:
        acc = self.accumulator(e.buffer, e.indices)
        if acc is not None:
            return acc
        hoisted = self.invariant_load(e, 1)
        if hoisted is not None:
            return hoisted
        return f"{self.buf_names[e.buffer]}[{self.index(e.buffer, e.indices)}]"

    def accumulator(self, buf: Buffer, indices: tuple[E.PrimExpr, ...]) -> str | None:
        """The variable that holds ``buf[indices]`` instead of memory, if any."""
        return None

    def invariant_load(self, load: E.BufferLoad, lanes: int) -> str | None:
        """The variable that holds ``load`` (made before a loop it is invariant in), if any."""
        return None

    def _unsupported(self, e: E.PrimExpr) -> str:
        raise CodegenError(
            f"{type(e).__name__} cannot appear in lowered code ({e}); "
            "reductions and strings belong in te.compute / annotations"
        )


_EXPR_DISPATCH = {
    E.Var: ExprWriter._var,
    E.IntImm: ExprWriter._imm,
    E.FloatImm: ExprWriter._imm,
    E.Cast: ExprWriter._cast,
    E.Not: ExprWriter._not,
    E.Select: ExprWriter._select,
    E.Call: ExprWriter._call,
    E.BufferLoad: ExprWriter._load,
    E.Reduce: ExprWriter._unsupported,
    E.StringImm: ExprWriter._unsupported,
    E.BinaryOp: ExprWriter._binary,
}


# ----------------------------------------------------------------------------- helpers


def _prec(e: E.PrimExpr) -> int:
    """C precedence of the operator ``e`` is emitted with (0: always keep parentheses)."""
    if isinstance(e, (E.Mul, E.Div)):
        return 13
    if isinstance(e, (E.Add, E.Sub)):
        return 12
    if isinstance(e, (E.EQ, E.NE)):
        return 9
    if isinstance(e, E.CmpOp):
        return 10
    if isinstance(e, E.And):
        return 5
    if isinstance(e, E.Or):
        return 4
    return 0


def strip_parens(code: str) -> str:
    """``code`` without one pair of parentheses enclosing all of it."""
    if not (code.startswith("(") and code.endswith(")")):
        return code
    depth = 0
    for i, ch in enumerate(code):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and i < len(code) - 1:
            return code
    return code[1:-1]


def conjuncts(cond: E.PrimExpr) -> list[E.PrimExpr]:
    """The conjuncts of ``cond``."""
    if isinstance(cond, E.And):
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]


def nonneg_form(atom: E.PrimExpr) -> Affine | None:
    """The affine form ``d`` with the integer comparison ``atom`` equivalent to
    ``d >= 0``, or None (not such a comparison)."""
    if not isinstance(atom, (E.LT, E.LE, E.GT, E.GE)):
        return None
    if not (is_int(atom.a.dtype) and is_int(atom.b.dtype)):
        return None
    a, b = affine(atom.a), affine(atom.b)
    if isinstance(atom, E.GE):
        return a - b
    if isinstance(atom, E.GT):
        return (a - b).offset(-1)
    if isinstance(atom, E.LE):
        return b - a
    return (b - a).offset(-1)


def _holds(atom: E.PrimExpr, ranges) -> bool | None:
    """Whether the integer comparison ``atom`` holds over ``ranges``: always (True), never
    (False) or unknown (None)."""
    form = nonneg_form(atom)
    b = None if form is None else const_bounds(form.to_expr(), ranges)
    if b is None:
        return None
    return True if b[0] >= 0 else False if b[1] < 0 else None


def _positive_const(e: E.PrimExpr) -> bool:
    return isinstance(e, E.IntImm) and e.value > 0


def linear_index(buf: Buffer, indices: tuple[E.PrimExpr, ...]) -> E.PrimExpr:
    """The row-major element offset of ``buf[indices]`` (int64 for buffers of 2**31+ elements)."""
    total, dtype = _offset(buf, indices)
    if total is None:
        return E.const(0, dtype)
    return total.to_expr(dtype)


def linear_form(buf: Buffer, indices: tuple[E.PrimExpr, ...]) -> Affine:
    """``affine(linear_index(buf, indices))``, without writing the offset out and reading
    it back (the code generator asks it of every access, often more than once): the terms
    in the order ``to_expr`` writes them."""
    total, dtype = _offset(buf, indices)
    if total is None:
        return Affine.constant(0)
    if any(not is_int(atom.dtype) for _, atom in total.terms.values()):
        return affine(total.to_expr(dtype))  # to_expr casts such an atom: a new atom
    ordered = sorted(total.terms.items(), key=lambda kv: -abs(kv[1][0]))
    pos = [kv for kv in ordered if kv[1][0] > 0]
    return Affine(dict(pos + [kv for kv in ordered if kv[1][0] < 0]), total.const)


def _offset(buf: Buffer, indices: tuple[E.PrimExpr, ...]) -> tuple[Affine | None, str]:
    """The affine form of ``buf[indices]``'s row-major offset (None: no indices) and the
    offset's dtype."""
    shape = buf.static_shape()
    wide = any(i.dtype == "int64" for i in indices) or _numel(shape) >= 2**31
    dtype = "int64" if wide else "int32"
    total = None
    stride = 1
    for idx, dim in reversed(list(zip(indices, shape))):
        form = affine(idx).scale(stride)
        total = form if total is None else total + form
        stride *= dim
    return total, dtype


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


__all__ = [
    "CodegenError",
    "ExprWriter",
    "conjuncts",
    "linear_form",
    "linear_index",
    "nonneg_form",
    "strip_parens",
]
