"""Quantize and dequantize (ONNX's QuantizeLinear / DequantizeLinear), per tensor or per
channel, and the per-channel parameter reads they share with ``requantize``.

A scale or zero point is a Python number, a one-element tensor (a value computed at run
time, as ``DynamicQuantizeLinear`` makes), a 1-D tensor along ``axis`` (per channel), or
a tensor of the data's rank that broadcasts against it (numpy's rule, as the graph
passes per-channel constants: ``[1, C, 1, 1]``).
The arithmetic is onnxruntime's: ``saturate(round_half_even(x / scale) + zero_point)``
in float32, and ``float32(int32(q) - zero_point) * scale``; :func:`quantized_add` is its
QLinearAdd (the sum of two 8-bit tensors of different scales, without a float tensor).
"""

from __future__ import annotations

import numpy as np

from ...tir import op as _op
from ...tir.expr import PrimExpr, cast, const
from ..tensor import Tensor, compute
from ._util import check_tensor, normalize_axis

__all__ = ["dequantize_linear", "quantize_linear", "quantized_add", "quantized_add_constants"]

QUANTIZED_DTYPES = ("uint8", "int8")
Param = float | int | Tensor


def channel_param(value: Param, idx: tuple, axis: int, op: str, what: str, dtype: str) -> PrimExpr:
    """``value`` at output index ``idx`` as a ``dtype`` expression: a number, a tensor of
    one element, a 1-D tensor indexed by ``idx[axis]``, or one of the data's rank
    broadcast against it."""
    if not isinstance(value, Tensor):
        return const(float(value) if dtype == "float32" else int(value), dtype)
    size = int(np.prod(value.shape)) if value.shape else 1
    if size == 1:
        return cast(dtype, value[(0,) * value.ndim])
    if value.ndim == len(idx) and value.ndim > 1:
        return cast(dtype, value[tuple(0 if s == 1 else i for s, i in zip(value.shape, idx))])
    if value.ndim != 1:
        raise ValueError(f"{op}: a per-channel {what} must be 1-D, got shape {value.shape}")
    return cast(dtype, value[idx[axis]])


def check_param(value: Param, data: Tensor, axis: int, op: str, what: str) -> None:
    """A per-channel tensor's length must be the size of ``data``'s ``axis`` (or it
    broadcasts against ``data``)."""
    if isinstance(value, Tensor):
        size = int(np.prod(value.shape)) if value.shape else 1
        if value.ndim == data.ndim and value.ndim > 1:
            if all(s in (1, d) for s, d in zip(value.shape, data.shape)):
                return
        if size != 1 and (value.ndim != 1 or value.shape[0] != data.shape[axis]):
            raise ValueError(
                f"{op}: {what} of shape {value.shape} is neither one value nor one per "
                f"channel of axis {axis} of {data.shape}"
            )


def quantize_linear(
    data: Tensor,
    scale: Param,
    zero_point: Param = 0,
    axis: int = 1,
    out_dtype: str = "uint8",
    name: str = "T_quantize",
) -> Tensor:
    """float32 ``data`` to 8 bits: ``saturate(round_half_even(data / scale) + zero_point)``.

    ``axis`` is the channel axis of per-channel parameters (ONNX's default 1).

    Raises:
        TypeError: data not float32 or an output type other than uint8/int8.
    """
    check_tensor(data, "quantize_linear", "data")
    if data.dtype != "float32" or out_dtype not in QUANTIZED_DTYPES:
        raise TypeError(
            f"quantize_linear: expected float32 data and a uint8 or int8 output, got "
            f"{data.dtype} -> {out_dtype}"
        )
    axis = normalize_axis(axis, max(data.ndim, 1), "quantize_linear")
    for v, what in ((scale, "scale"), (zero_point, "zero point")):
        check_param(v, data, axis, "quantize_linear", what)
    info = np.iinfo(out_dtype)

    def body(*idx):
        s = channel_param(scale, idx, axis, "quantize_linear", "scale", "float32")
        zp = channel_param(zero_point, idx, axis, "quantize_linear", "zero point", "int32")
        zf = cast("float32", zp)
        v = data[idx] / s
        # clamp first (onnxruntime's order), so the int32 conversion cannot overflow
        v = _op.min(_op.max(v, const(float(info.min)) - zf), const(float(info.max)) - zf)
        return cast(out_dtype, cast("int32", _op.round(v)) + zp)

    return compute(data.shape, body, name=name, tag="elemwise")


def dequantize_linear(
    data: Tensor,
    scale: Param,
    zero_point: Param = 0,
    axis: int = 1,
    name: str = "T_dequantize",
) -> Tensor:
    """8- or 32-bit integer ``data`` to float32: ``float32(data - zero_point) * scale``.

    Raises:
        TypeError: data not uint8, int8 or int32.
    """
    check_tensor(data, "dequantize_linear", "data")
    if data.dtype not in (*QUANTIZED_DTYPES, "int32"):
        raise TypeError(f"dequantize_linear: expected uint8, int8 or int32 data, got {data.dtype}")
    axis = normalize_axis(axis, max(data.ndim, 1), "dequantize_linear")
    for v, what in ((scale, "scale"), (zero_point, "zero point")):
        check_param(v, data, axis, "dequantize_linear", what)

    def body(*idx):
        s = channel_param(scale, idx, axis, "dequantize_linear", "scale", "float32")
        zp = channel_param(zero_point, idx, axis, "dequantize_linear", "zero point", "int32")
        q = cast("int32", data[idx])
        if not (isinstance(zero_point, (int, float)) and int(zero_point) == 0):
            q = q - zp
        return cast("float32", q) * s

    return compute(data.shape, body, name=name, tag="elemwise")


def quantized_add_constants(
    a_scale: float, a_zero_point: int, b_scale: float, b_zero_point: int, scale: float,
    zero_point: int,
) -> tuple[float, float, float]:  # fmt: skip
    """(``a_ratio``, ``b_ratio``, ``offset``) of :func:`quantized_add`, in float32:
    ``a_scale / scale``, ``b_scale / scale`` and ``zero_point - (a_ratio * a_zero_point
    + b_ratio * b_zero_point)``."""
    f = np.float32
    ra, rb = f(a_scale) / f(scale), f(b_scale) / f(scale)
    offset = f(zero_point) - (ra * f(a_zero_point) + rb * f(b_zero_point))
    return float(ra), float(rb), float(offset)


def quantized_add(
    a: Tensor,
    b: Tensor,
    a_scale: float,
    a_zero_point: int,
    b_scale: float,
    b_zero_point: int,
    scale: float,
    zero_point: int,
    out_dtype: str = "uint8",
    name: str = "T_qadd",
) -> Tensor:
    """``quantize(dequantize(a) + dequantize(b))`` on the 8-bit tensors (onnxruntime's
    QLinearAdd, per-tensor parameters), ``a`` and ``b`` broadcast against each other:
    ``saturate(round_half_even(a * a_ratio + (b * b_ratio + offset)))`` in float32 with
    the constants of :func:`quantized_add_constants`. Both products are written to be
    contracted into multiply-adds (``-ffp-contract=fast``), as onnxruntime's AVX2 kernel
    computes them; a target without FMA may round a tie differently.

    Raises:
        TypeError: operands or output not 8-bit.
        ValueError: shapes that do not broadcast (same rank, each dimension equal or 1).
    """
    for t, what in ((a, "a"), (b, "b")):
        check_tensor(t, "quantized_add", what)
        if t.dtype not in QUANTIZED_DTYPES:
            raise TypeError(f"quantized_add: expected 8-bit {what}, got {t.dtype}")
    if out_dtype not in QUANTIZED_DTYPES:
        raise TypeError(f"quantized_add: expected a uint8 or int8 output, got {out_dtype}")
    if a.ndim != b.ndim or any(x != y and 1 not in (x, y) for x, y in zip(a.shape, b.shape)):
        raise ValueError(f"quantized_add: shapes {a.shape} and {b.shape} do not broadcast")
    shape = tuple(max(x, y) for x, y in zip(a.shape, b.shape))
    ra, rb, offset = quantized_add_constants(
        a_scale, a_zero_point, b_scale, b_zero_point, scale, zero_point
    )
    info = np.iinfo(out_dtype)

    def at(t: Tensor, idx: tuple) -> PrimExpr:
        return cast("float32", t[tuple(0 if s == 1 else i for s, i in zip(t.shape, idx))])

    def body(*idx):
        v = at(a, idx) * const(ra) + (at(b, idx) * const(rb) + const(offset))
        v = _op.min(_op.max(v, const(float(info.min))), const(float(info.max)))
        return cast(out_dtype, cast("int32", _op.round(v)))

    return compute(shape, body, name=name, tag="elemwise")
