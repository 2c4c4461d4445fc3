"""Quantized (integer) products: u8 or s8 activations, s8 weights, s32 accumulation, and
the requantize step back to 8 bits.

With zero points ``za`` and ``zw``, ``sum_k (a - za) * (w - zw)`` is computed as TVM's
QNN legalization does, so that the main reduction stays a plain product of casts (the
pattern the dot-product tensor intrinsics match)::

    acc[i, j] = sum_k a[i, k] * w[j, k]                              (block T_qdense)
    out[i, j] = acc[i, j] - zw * rowsum(a)[i] - za * colsum(w)[j] + K * za * zw (+ bias[j])

The row and column sums are their own blocks, made only for a nonzero zero point. All
arithmetic is int32 and wraps as C's does.
"""

from __future__ import annotations

import numpy as np

from ...tir import op as _op
from ...tir.expr import PrimExpr, cast, const
from ..tensor import Tensor, compute, reduce_axis
from ..tensor import sum as te_sum
from ._util import check_tensor, layout_free, normalize_axis
from .quantized_scale import channel_param, check_param

__all__ = ["quantized_dense", "quantized_matmul", "requantize", "requantize_multiplier"]

_ACTIVATIONS = ("uint8", "int8")


def _i32(x: PrimExpr) -> PrimExpr:
    return cast("int32", x)


def _check(op: str, a: Tensor, w: Tensor) -> None:
    check_tensor(a, op, "the activations", ndim=2)
    check_tensor(w, op, "the weights", ndim=2)
    if a.dtype not in _ACTIVATIONS or w.dtype not in _ACTIVATIONS:
        raise TypeError(
            f"{op}: expected uint8 or int8 activations and weights, got {a.dtype} and {w.dtype}"
        )


def _product(
    op: str,
    a: Tensor,
    w: Tensor,
    n: int,
    weight,  # (j, k) -> the weight element
    a_zero_point: int,
    w_zero_point: int,
    bias: Tensor | None,
    name: str,
    attrs: dict | None,
    weight_sums_in_bias: bool = False,
) -> Tensor:
    m, kdim = a.shape
    k = reduce_axis((0, kdim), name="k")
    acc = compute(
        (m, n),
        lambda i, j: te_sum(_i32(a[i, k]) * _i32(weight(j, k)), axis=k),
        name=name,
        tag=op,
        attrs=attrs,
    )
    za, zw = int(a_zero_point), int(w_zero_point)
    if weight_sums_in_bias:  # the caller folded K * za * zw - za * colsum(w) into bias
        za_w = 0
    else:
        za_w = za
    if za_w == 0 and zw == 0 and bias is None:
        return acc
    if bias is not None:
        check_tensor(bias, op, "bias", ndim=1)
        if bias.dtype != "int32" or bias.shape[0] != n:
            raise ValueError(
                f"{op}: bias must be int32 of shape ({n},), got {bias.dtype}{bias.shape}"
            )
    rows = cols = None
    if zw:
        kr = reduce_axis((0, kdim), name="k")
        rows = compute((m,), lambda i: te_sum(_i32(a[i, kr]), axis=kr), name=f"{name}_rowsum")
    if za_w:
        kc = reduce_axis((0, kdim), name="k")
        cols = compute((n,), lambda j: te_sum(_i32(weight(j, kc)), axis=kc), name=f"{name}_colsum")

    def combine(i, j):
        out = acc[i, j]
        if rows is not None:
            out = out - const(zw, "int32") * rows[i]
        if cols is not None:
            out = out - const(za, "int32") * cols[j]
        if za_w and zw:
            out = out + const(_wrap32(kdim * za * zw), "int32")
        if bias is not None:
            out = out + bias[j]
        return out

    return compute((m, n), combine, name=f"{name}_zp", tag="elemwise")


def quantized_dense(
    data: Tensor,
    weight: Tensor,
    data_zero_point: int = 0,
    weight_zero_point: int = 0,
    bias: Tensor | None = None,
    name: str = "T_qdense",
    weight_sums_in_bias: bool = False,
) -> Tensor:
    """``(data - zd) @ (weight - zw).T (+ bias)`` in int32; ``weight`` is ``[out, in]``
    as in TVM's ``qnn.dense``. ``data`` is uint8 or int8, ``weight`` int8 (or uint8).
    With ``weight_sums_in_bias`` the caller has folded ``K * zd * zw - zd * colsum(weight)``
    into ``bias`` (a graph does, for constant weights).

    Raises:
        TypeError: other dtypes. ValueError: mismatched shapes.
    """
    _check("quantized_dense", data, weight)
    if data.shape[1] != weight.shape[1]:
        raise ValueError(
            f"quantized_dense: data {data.shape} has {data.shape[1]} input features but "
            f"weight {weight.shape} (out, in) expects {weight.shape[1]}"
        )
    return _product(
        "quantized_dense",
        data,
        weight,
        weight.shape[0],
        lambda j, k: weight[j, k],
        data_zero_point,
        weight_zero_point,
        bias,
        name,
        layout_free(weight),
        weight_sums_in_bias,
    )


def quantized_matmul(
    a: Tensor,
    b: Tensor,
    a_zero_point: int = 0,
    b_zero_point: int = 0,
    bias: Tensor | None = None,
    name: str = "T_qmatmul",
    weight_sums_in_bias: bool = False,
) -> Tensor:
    """``(a - za) @ (b - zb) (+ bias)`` in int32 with ``b`` of shape ``[K, N]`` (ONNX's
    ``MatMulInteger``); ``weight_sums_in_bias`` as for :func:`quantized_dense`."""
    _check("quantized_matmul", a, b)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"quantized_matmul: reduction sizes differ: a {a.shape} and b {b.shape}")
    return _product(
        "quantized_matmul",
        a,
        b,
        b.shape[1],
        lambda j, k: b[k, j],
        a_zero_point,
        b_zero_point,
        bias,
        name,
        None,
        weight_sums_in_bias,
    )


def requantize_multiplier(input_scale: float, weight_scale: float, output_scale: float) -> float:
    """``input_scale * weight_scale / output_scale`` in float32 arithmetic, as
    onnxruntime's QLinearMatMul computes its multiplier."""
    f = np.float32
    return float(f(f(input_scale) * f(weight_scale)) / f(output_scale))


def requantize(
    data: Tensor,
    multiplier: float | Tensor,
    output_zero_point: int = 0,
    out_dtype: str = "uint8",
    axis: int = -1,
    out_min: int | None = None,
    out_max: int | None = None,
    name: str = "T_requantize",
) -> Tensor:
    """int32 ``data`` back to 8 bits: ``saturate(round(float32(data) * multiplier) + zp)``,
    rounding half to even in float32 (onnxruntime's requantization of QLinearMatMul and
    QLinearConv; :func:`requantize_multiplier` gives its multiplier).

    Args:
        multiplier: a number, or a float32 tensor of one value per channel of ``axis``
            (per-channel weight scales).
        out_min, out_max: a narrower saturation range (a ReLU after the product is
            ``out_min=output_zero_point``).
    """
    check_tensor(data, "requantize", "data")
    if data.dtype != "int32" or out_dtype not in _ACTIVATIONS:
        raise TypeError(
            f"requantize: expected int32 data and a uint8 or int8 output, got {data.dtype} -> "
            f"{out_dtype}"
        )
    axis = normalize_axis(axis, data.ndim, "requantize")
    check_param(multiplier, data, axis, "requantize", "multiplier")
    info = np.iinfo(out_dtype)
    zp = int(output_zero_point)
    lo = info.min if out_min is None else max(info.min, int(out_min))
    hi = info.max if out_max is None else min(info.max, int(out_max))
    lo_f, hi_f = const(float(lo - zp)), const(float(hi - zp))
    if not isinstance(multiplier, Tensor):
        multiplier = float(np.float32(multiplier))

    def body(*idx):
        mult = channel_param(multiplier, idx, axis, "requantize", "multiplier", "float32")
        scaled = cast("float32", data[idx]) * mult
        clamped = _op.min(_op.max(scaled, lo_f), hi_f)
        return cast(out_dtype, cast("int32", _op.round(clamped)) + const(zp, "int32"))

    return compute(data.shape, body, name=name, tag="elemwise")


def _wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31
