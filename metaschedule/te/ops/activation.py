"""More element-wise operators: clip, hard_swish, hard_sigmoid, erf, exact GELU, sqrt,
power, negative, and a general unary map."""

from __future__ import annotations

import math
from collections.abc import Callable

from ...tir import op as _op
from ...tir.expr import PrimExpr, const
from ..tensor import Tensor, compute
from ._util import check_tensor
from .elemwise import _binary


def unary(x: Tensor, fn: Callable[[PrimExpr], PrimExpr], name: str) -> Tensor:
    """``fn`` applied to every element of ``x`` (one element-wise block)."""
    check_tensor(x, name, "x")
    return compute(x.shape, lambda *idx: fn(x[idx]), name=name, tag="elemwise")


def clip(x: Tensor, a_min: float | None, a_max: float | None, name: str = "T_clip") -> Tensor:
    """``min(max(x, a_min), a_max)``; a None bound is not applied."""

    def f(v):
        if a_min is not None:
            v = _op.max(v, const(a_min, x.dtype))
        if a_max is not None:
            v = _op.min(v, const(a_max, x.dtype))
        return v

    return unary(x, f, name)


def hard_sigmoid(
    x: Tensor, alpha: float = 1 / 6, beta: float = 0.5, name: str = "T_hard_sigmoid"
) -> Tensor:
    """``clip(alpha * x + beta, 0, 1)`` (ONNX's HardSigmoid; defaults of HardSwish)."""

    def f(v):
        y = v * const(alpha, x.dtype) + const(beta, x.dtype)
        return _op.min(_op.max(y, const(0.0, x.dtype)), const(1.0, x.dtype))

    return unary(x, f, name)


def hard_swish(x: Tensor, name: str = "T_hard_swish") -> Tensor:
    """``x * clip(x / 6 + 1/2, 0, 1)``."""

    def f(v):
        y = v * const(1 / 6, x.dtype) + const(0.5, x.dtype)
        return v * _op.min(_op.max(y, const(0.0, x.dtype)), const(1.0, x.dtype))

    return unary(x, f, name)


def erf(x: Tensor, name: str = "T_erf") -> Tensor:
    return unary(x, _op.erf, name)


def gelu_erf(x: Tensor, name: str = "T_gelu") -> Tensor:
    """Exact GELU: ``0.5 x (1 + erf(x / sqrt(2)))``."""
    s = 1 / math.sqrt(2.0)
    return unary(
        x,
        lambda v: v * const(0.5, x.dtype) * (_op.erf(v * const(s, x.dtype)) + const(1.0, x.dtype)),
        name,
    )


def sqrt(x: Tensor, name: str = "T_sqrt") -> Tensor:
    return unary(x, _op.sqrt, name)


def negative(x: Tensor, name: str = "T_negative") -> Tensor:
    return unary(x, lambda v: const(0, x.dtype) - v, name)


def power(a: Tensor | float, b: Tensor | float, name: str = "T_power") -> Tensor:
    """``a ** b`` with broadcasting; a scalar exponent 2 or 3 becomes multiplications."""
    if isinstance(a, Tensor) and not isinstance(b, Tensor) and float(b) in (1.0, 2.0, 3.0):
        n = int(b)
        return unary(a, lambda v: v if n == 1 else (v * v if n == 2 else v * v * v), name)
    if isinstance(a, Tensor) and not isinstance(b, Tensor) and float(b) == 0.5:
        return unary(a, _op.sqrt, name)
    return _binary(a, b, _op.pow, name)
