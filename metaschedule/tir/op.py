"""Operator functions: math intrinsics, min/max, select, floordiv/floormod, ..."""

from __future__ import annotations

from .dtype import is_float
from .expr import (
    Call,
    ExprLike,
    FloorDiv,
    FloorMod,
    Max,
    Min,
    PrimExpr,
    Select,
    _binary,
    cast,
    const,
    convert,
    logical_and,
    logical_or,
)

#: Unary float intrinsics understood by the code generators and the interpreter.
UNARY_INTRINSICS = (
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "tanh",
    "erf",
    "sigmoid",
    "fabs",
    "floor",
    "ceil",
    "round",
    "sin",
    "cos",
    "exp2",
    "log2",
    "trunc",
)
#: Binary float intrinsics.
BINARY_INTRINSICS = ("pow",)


def _unary(op: str):
    def f(x: ExprLike) -> PrimExpr:
        x = convert(x)
        if not is_float(x.dtype):
            raise TypeError(f"{op} needs a float argument, got {x} of dtype {x.dtype}")
        return Call(x.dtype, op, (x,))

    f.__name__ = op
    f.__doc__ = f"Elementwise ``{op}`` of a float expression."
    return f


exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
tanh = _unary("tanh")
erf = _unary("erf")
sigmoid = _unary("sigmoid")
fabs = _unary("fabs")
floor = _unary("floor")
ceil = _unary("ceil")
round = _unary("round")  # noqa: A001
sin = _unary("sin")
cos = _unary("cos")
exp2 = _unary("exp2")
log2 = _unary("log2")
trunc = _unary("trunc")


def pow(x: ExprLike, y: ExprLike) -> PrimExpr:  # noqa: A001
    """``x ** y`` for floats."""
    x = convert(x)
    y = convert(y, x.dtype)
    if not is_float(x.dtype) or x.dtype != y.dtype:
        raise TypeError(f"pow needs two float arguments of one dtype, got {x.dtype}, {y.dtype}")
    return Call(x.dtype, "pow", (x, y))


def abs(x: ExprLike) -> PrimExpr:  # noqa: A001
    x = convert(x)
    if is_float(x.dtype):
        return fabs(x)
    return Select(x < 0, -x, x)


def min(a: ExprLike, b: ExprLike) -> PrimExpr:  # noqa: A001
    return _binary(Min, a, b)


def max(a: ExprLike, b: ExprLike) -> PrimExpr:  # noqa: A001
    return _binary(Max, a, b)


def floordiv(a: ExprLike, b: ExprLike) -> PrimExpr:
    return _binary(FloorDiv, a, b)


def floormod(a: ExprLike, b: ExprLike) -> PrimExpr:
    return _binary(FloorMod, a, b)


def if_then_else(cond: ExprLike, t: ExprLike, f: ExprLike) -> PrimExpr:
    """``t if cond else f`` (both sides may be evaluated, as in TVM's Select)."""
    cond = convert(cond)
    if isinstance(t, PrimExpr) and not isinstance(f, PrimExpr):
        f = convert(f, t.dtype)
    elif isinstance(f, PrimExpr) and not isinstance(t, PrimExpr):
        t = convert(t, f.dtype)
    return Select(cond, convert(t), convert(f))


Select_ = if_then_else


def all(*conds: ExprLike) -> PrimExpr:  # noqa: A001
    return logical_and(*conds) if conds else const(True)


def any(*conds: ExprLike) -> PrimExpr:  # noqa: A001
    return logical_or(*conds) if conds else const(False)


def min_value(dtype: str) -> PrimExpr:
    """The smallest value of ``dtype`` (-inf for floats)."""
    import numpy as np

    if is_float(dtype):
        return const(float("-inf"), dtype)
    if dtype == "bool":
        return const(False)
    return const(int(np.iinfo(dtype).min), dtype)


def max_value(dtype: str) -> PrimExpr:
    """The largest value of ``dtype`` (+inf for floats)."""
    import numpy as np

    if is_float(dtype):
        return const(float("inf"), dtype)
    if dtype == "bool":
        return const(True)
    return const(int(np.iinfo(dtype).max), dtype)


__all__ = [
    *UNARY_INTRINSICS,
    *BINARY_INTRINSICS,
    "abs",
    "min",
    "max",
    "floordiv",
    "floormod",
    "if_then_else",
    "all",
    "any",
    "min_value",
    "max_value",
    "cast",
]
