"""Quantized operators of the graph IR, with their numpy references:

* ``quantize(x, scale, zero_point)`` and ``dequantize(q, scale, zero_point)`` (ONNX's
  QuantizeLinear / DequantizeLinear; the output type is ``out_dtype``);
* ``qnn_conv2d(x, w[, bias])`` (NCHW data and an OIHW kernel, or, after layout
  conversion, ``data_layout="NHWC"`` and an HWIO kernel) and ``qnn_matmul(a, b[, bias])``
  (``b`` is ``[K, N]``): u8/s8 operands, int32 out, zero points as attributes; with
  ``weight_sums_in_bias`` the bias already holds the zero-point terms of the weights
  (see :mod:`metaschedule.te.ops.quantized_conv`);
* ``requantize(acc, multiplier)``: int32 back to 8 bits, onnxruntime's arithmetic;
* ``qnn_add(a, b)``: the sum of two 8-bit tensors, their scales and zero points and the
  output's as attributes (onnxruntime's QLinearAdd; :mod:`.quantize_rewrite` makes it of
  ``quantize(dequantize(a) + dequantize(b))``).

Scales, zero points and multipliers are arguments broadcast against the data (numpy's
rule): a per-channel constant is ``[1, C, 1, 1]``, so that layout conversion moves it
like any other broadcast operand, and a one-element constant lowers to an immediate.
"""

from __future__ import annotations

import numpy as np

from ..te.ops import quantized as QP
from ..te.ops import quantized_conv as QC
from ..te.ops import quantized_scale as QS
from .op import Pattern, _ensure_loaded, register

# the registry loads its built-in operators only while it is empty: fill it first
_ensure_loaded()


def _wrap32(x: np.ndarray) -> np.ndarray:
    return ((np.asarray(x, np.int64) + 2**31) % 2**32 - 2**31).astype(np.int32)


def quantize_ref(x, scale, zp, out_dtype: str) -> np.ndarray:
    """onnxruntime's QuantizeLinear: float32 division, clamp, round half to even."""
    info = np.iinfo(out_dtype)
    zp = np.asarray(zp).astype(np.int32)
    v = np.asarray(x, np.float32) / np.asarray(scale, np.float32)
    v = np.clip(v, (info.min - zp).astype(np.float32), (info.max - zp).astype(np.float32))
    return (np.rint(v).astype(np.int32) + zp).astype(out_dtype)


def dequantize_ref(q, scale, zp) -> np.ndarray:
    diff = np.asarray(q).astype(np.int32) - np.asarray(zp).astype(np.int32)
    return (diff.astype(np.float32) * np.asarray(scale, np.float32)).astype(np.float32)


def requantize_ref(acc, multiplier, at) -> np.ndarray:
    info = np.iinfo(at["out_dtype"])
    zp = int(at.get("output_zero_point", 0))
    lo = max(info.min, at.get("out_min") if at.get("out_min") is not None else info.min)
    hi = min(info.max, at.get("out_max") if at.get("out_max") is not None else info.max)
    v = acc.astype(np.float32) * np.asarray(multiplier, np.float32)
    v = np.clip(v, np.float32(lo - zp), np.float32(hi - zp))
    return (np.rint(v).astype(np.int32) + zp).astype(at["out_dtype"])


register(
    "quantize",
    Pattern.BROADCAST,
    lambda a, at: QS.quantize_linear(a[0], a[1], a[2], axis=-1, out_dtype=at["out_dtype"]),
    lambda a, at: quantize_ref(a[0], a[1], a[2], at["out_dtype"]),
)
register(
    "dequantize",
    Pattern.BROADCAST,
    lambda a, at: QS.dequantize_linear(a[0], a[1], a[2], axis=-1),
    lambda a, at: dequantize_ref(a[0], a[1], a[2]),
)


def qnn_add_ref(a, b, at) -> np.ndarray:
    """:func:`~metaschedule.te.ops.quantized_scale.quantized_add` in numpy: each
    multiply-add rounded once to float32 (exact in float64 first), as an FMA does."""
    ra, rb, offset = QS.quantized_add_constants(*_qadd_params(at))
    f64, f32 = np.float64, np.float32
    t = (np.asarray(b, f64) * rb + offset).astype(f32)
    v = np.asarray(a, f64) * ra + t.astype(f64)
    info = np.iinfo(at["out_dtype"])
    v = np.clip(v.astype(f32), f32(info.min), f32(info.max))
    return np.rint(v).astype(at["out_dtype"])


def _qadd_params(at) -> tuple:
    return (
        at["a_scale"],
        at["a_zero_point"],
        at["b_scale"],
        at["b_zero_point"],
        at["scale"],
        at["zero_point"],
    )


register(
    "qnn_add",
    Pattern.BROADCAST,
    lambda a, at: QS.quantized_add(a[0], a[1], *_qadd_params(at), out_dtype=at["out_dtype"]),
    lambda a, at: qnn_add_ref(a[0], a[1], at),
)
register(
    "requantize",
    Pattern.BROADCAST,
    lambda a, at: QP.requantize(
        a[0],
        a[1],
        at.get("output_zero_point", 0),
        at["out_dtype"],
        axis=-1,
        out_min=at.get("out_min"),
        out_max=at.get("out_max"),
    ),
    lambda a, at: requantize_ref(a[0], a[1], at),
)


def _qconv_lower(a, at):
    layout = at.get("data_layout", "NCHW")
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"qnn_conv2d takes NCHW or NHWC data, got {layout!r}")
    if layout == "NHWC" and at.get("kernel_layout", "HWIO") != "HWIO":
        raise ValueError(f"NHWC qnn_conv2d needs an HWIO kernel, got {at['kernel_layout']!r}")
    conv = QC.quantized_conv2d_nhwc if layout == "NHWC" else QC.quantized_conv2d_nchw
    return conv(
        a[0],
        a[1],
        at.get("data_zero_point", 0),
        at.get("kernel_zero_point", 0),
        a[2] if len(a) > 2 else None,
        at["strides"],
        at["pads"],
        at["dilations"],
        at["groups"],
        at.get("weight_sums_in_bias", False),
    )


def _qconv_ref(a, at):
    if at.get("data_layout", "NCHW") == "NHWC":  # via NCHW: data NHWC, kernel HWIO
        nchw = [np.transpose(a[0], (0, 3, 1, 2)), np.transpose(a[1], (3, 2, 0, 1)), *a[2:]]
        out = _qconv_ref(nchw, {**at, "data_layout": "NCHW"})
        return np.ascontiguousarray(np.transpose(out, (0, 2, 3, 1)))
    from .ops_nn import _conv_ref  # here: importing it first would keep the others unloaded

    x, w = a[0], a[1]
    za, zw = int(at.get("data_zero_point", 0)), int(at.get("kernel_zero_point", 0))
    t, l, b, r = at["pads"]
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (t, b), (l, r)), constant_values=za)
    if not at.get("weight_sums_in_bias", False):
        xp = xp - za
    out = _conv_ref([xp, w.astype(np.int64) - zw], {**at, "pads": (0, 0, 0, 0)})
    if len(a) > 2:
        out = out + a[2].astype(np.int64).reshape(1, -1, 1, 1)
    return _wrap32(out)


def _qmatmul_ref(a, at):
    x, w = a[0].astype(np.int64), a[1].astype(np.int64)
    za, zw = int(at.get("a_zero_point", 0)), int(at.get("b_zero_point", 0))
    if not at.get("weight_sums_in_bias", False):
        x = x - za
    out = x @ (w - zw)
    if len(a) > 2:
        out = out + a[2].astype(np.int64)
    return _wrap32(out)


register("qnn_conv2d", Pattern.OUT_EWISE_FUSABLE, _qconv_lower, _qconv_ref)
register(
    "qnn_matmul",
    Pattern.OUT_EWISE_FUSABLE,
    lambda a, at: QP.quantized_matmul(
        a[0],
        a[1],
        at.get("a_zero_point", 0),
        at.get("b_zero_point", 0),
        a[2] if len(a) > 2 else None,
        weight_sums_in_bias=at.get("weight_sums_in_bias", False),
    ),
    _qmatmul_ref,
)
