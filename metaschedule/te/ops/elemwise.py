"""Element-wise and broadcasting operators (numpy broadcasting rules)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Union

from ...tir import op as _op
from ...tir.expr import PrimExpr, const, convert
from ..tensor import Tensor, compute
from ._util import check_tensor, normalize_axis

Operand = Union[Tensor, PrimExpr, int, float]  # noqa: UP007 (a runtime alias, py3.10)


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...], op: str) -> tuple[int, ...]:
    """The numpy broadcast of two shapes; ``ValueError`` if they do not broadcast."""
    out = []
    for d in range(max(len(a), len(b))):
        x = a[len(a) - 1 - d] if d < len(a) else 1
        y = b[len(b) - 1 - d] if d < len(b) else 1
        if x != y and 1 not in (x, y):
            raise ValueError(f"{op}: shapes {a} and {b} do not broadcast")
        out.append(x if y == 1 else y)
    return tuple(reversed(out))


def broadcast_load(
    x: Tensor, out_index: tuple, out_shape: tuple[int, ...] | None = None
) -> PrimExpr:
    """``x`` read at ``out_index`` of a broadcast result (size-1 dims read at 0, except
    where the result has size 1 too: there the output index, so that the access stays
    a plain copy of the output's index, as inlining an epilogue wants)."""
    lead = len(out_index) - x.ndim

    def at(d: int, s: int):
        if s == 1 and (out_shape is None or out_shape[lead + d] != 1):
            return 0
        return out_index[lead + d]

    return x[tuple(at(d, s) for d, s in enumerate(x.shape))]


def _binary(a: Operand, b: Operand, fn: Callable, name: str) -> Tensor:
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError(f"{name}: at least one operand must be a te.Tensor")
    ref = a if isinstance(a, Tensor) else b
    shape = broadcast_shape(
        a.shape if isinstance(a, Tensor) else (), b.shape if isinstance(b, Tensor) else (), name
    )

    def read(x: Operand, idx: tuple) -> PrimExpr:
        return broadcast_load(x, idx, shape) if isinstance(x, Tensor) else convert(x, ref.dtype)

    return compute(shape, lambda *idx: fn(read(a, idx), read(b, idx)), name=name, tag="broadcast")


def add(a: Operand, b: Operand, name: str = "T_add") -> Tensor:
    """``a + b`` with numpy broadcasting; either side may be a scalar."""
    return _binary(a, b, lambda x, y: x + y, name)


def subtract(a: Operand, b: Operand, name: str = "T_subtract") -> Tensor:
    return _binary(a, b, lambda x, y: x - y, name)


def multiply(a: Operand, b: Operand, name: str = "T_multiply") -> Tensor:
    return _binary(a, b, lambda x, y: x * y, name)


def divide(a: Operand, b: Operand, name: str = "T_divide") -> Tensor:
    """``a / b``: true division for floats, truncating (C) division for integers."""
    return _binary(a, b, lambda x, y: x / y, name)


def maximum(a: Operand, b: Operand, name: str = "T_maximum") -> Tensor:
    return _binary(a, b, _op.max, name)


def minimum(a: Operand, b: Operand, name: str = "T_minimum") -> Tensor:
    return _binary(a, b, _op.min, name)


def _unary(x: Tensor, fn: Callable[[PrimExpr], PrimExpr], name: str) -> Tensor:
    check_tensor(x, name, "x")
    return compute(x.shape, lambda *idx: fn(x[idx]), name=name, tag="elemwise")


def relu(x: Tensor, name: str = "T_relu") -> Tensor:
    return _unary(x, lambda v: _op.max(v, const(0, x.dtype)), name)


def sigmoid(x: Tensor, name: str = "T_sigmoid") -> Tensor:
    return _unary(x, _op.sigmoid, name)


def tanh(x: Tensor, name: str = "T_tanh") -> Tensor:
    return _unary(x, _op.tanh, name)


def exp(x: Tensor, name: str = "T_exp") -> Tensor:
    return _unary(x, _op.exp, name)


def gelu(x: Tensor, name: str = "T_gelu") -> Tensor:
    """GELU, tanh approximation: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""
    c = math.sqrt(2.0 / math.pi)

    def f(v: PrimExpr) -> PrimExpr:
        inner = (v + v * v * v * 0.044715) * c
        return v * 0.5 * (_op.tanh(inner) + 1.0)

    return _unary(x, f, name)


def bias_add(x: Tensor, bias: Tensor, axis: int = -1, name: str = "T_add") -> Tensor:
    """``x + bias`` with the 1-D ``bias`` along ``axis`` of ``x``."""
    check_tensor(x, "bias_add", "x")
    check_tensor(bias, "bias_add", "bias", ndim=1)
    axis = normalize_axis(axis, x.ndim, "bias_add")
    if bias.shape[0] != x.shape[axis]:
        raise ValueError(
            f"bias_add: bias has {bias.shape[0]} elements but axis {axis} of x has "
            f"{x.shape[axis]} (x shape {x.shape})"
        )
    return compute(x.shape, lambda *idx: x[idx] + bias[idx[axis]], name=name, tag="broadcast")
