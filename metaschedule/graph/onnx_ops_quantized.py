"""ONNX converters of quantized models (registered into :mod:`.onnx_convert`'s table).

* QuantizeLinear / DequantizeLinear (per tensor or per channel along ``axis``),
  DynamicQuantizeLinear, QLinearConv, QLinearMatMul, ConvInteger and MatMulInteger;
* Conv, MatMul and Gemm whose operands are dequantized (the QDQ form that
  ``onnxruntime.quantization.quantize_static`` writes) become integer kernels:
  ``qnn_conv2d`` / ``qnn_matmul`` on the 8-bit tensors with the int32 bias, then a
  ``dequantize`` by ``x_scale * w_scale``; when a QuantizeLinear follows,
  :func:`~.quantize_rewrite.fuse_requantize` makes that pair one ``requantize``
  epilogue, the arithmetic of onnxruntime's QLinearConv. Other operands go to the float
  converters, which this module keeps and calls.

onnxruntime's QOperator-format operators of the ``com.microsoft`` domain: QLinearAdd and
QLinearGlobalAveragePool import as their QDQ form (``quantize(op(dequantize(..)))``), which
:mod:`.quantize_rewrite` makes integer again, and QGemm as QLinearMatMul does.

A DequantizeLinear of constants is folded to a float constant, like every weight-only
subgraph; the builder's ``notes`` remember its integer source for the converters here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import ops_quantized  # noqa: F401  (registers the quantized graph operators)
from .onnx_convert import _CONVERTERS, _auto_pads, _conv, _Ctx, _spatial_2d

_EIGHT_BITS = ("uint8", "int8")
#: the float converters of the operators that take dequantized operands
_FLOAT = {op: _CONVERTERS[op] for op in ("Conv", "MatMul", "Gemm")}


@dataclass(frozen=True)
class QSource:
    """What a DequantizeLinear read: the integer tensor (an array for a constant, else
    the graph value), its flat scale and zero point, and the channel axis."""

    q: np.ndarray | str
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int


def _wrap32(x) -> np.ndarray:
    return ((np.asarray(x, np.int64) + 2**31) % 2**32 - 2**31).astype(np.int32)


def _axis(ctx: _Ctx, axis: int, ndim: int) -> int:
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        raise ctx.fail(f"axis {axis} is out of range for a tensor of rank {ndim}")
    return axis % max(ndim, 1)


def _param(ctx: _Ctx, v: str, ndim: int, axis: int, what: str) -> str:
    """A scale or zero point as a graph operand broadcast against the data: one value as
    it is, a per-channel constant reshaped to ``[1, .., C, .., 1]``."""
    if not ctx.b.is_const(v):
        if int(np.prod(ctx.shape(v))) != 1:
            raise ctx.fail(f"a computed per-channel {what}")
        return v
    arr = ctx.b.value(v)
    if arr.size == 1:
        return v
    if arr.ndim != 1:
        raise ctx.fail(f"{what} of shape {arr.shape} (one value, or one per channel)")
    shape = [1] * ndim
    shape[axis] = arr.size
    return ctx.b.const(arr.reshape(shape), what)


def _zero(ctx: _Ctx, dtype: str) -> str:
    return ctx.b.const(np.zeros((), dtype), "zero_point")


def _scale_zp(ctx: _Ctx, ins: list, x: str, at: dict, default_dtype: str):
    if int(at.get("block_size", 0) or 0):
        raise ctx.fail("blocked quantization (block_size)")
    nd = len(ctx.shape(x))
    per_channel = int(np.prod(ctx.shape(ins[1]))) != 1  # else the axis is not read
    axis = _axis(ctx, int(at.get("axis", 1)), nd) if per_channel else 0
    s = _param(ctx, ins[1], nd, axis, "scale")
    has_zp = len(ins) > 2 and ins[2]
    z = _param(ctx, ins[2], nd, axis, "zero_point") if has_zp else _zero(ctx, default_dtype)
    return s, z, axis, (ins[2] if has_zp else None)


@_conv("QuantizeLinear")
def _quantize(ctx, ins, at):
    x = ins[0]
    out_dtype = "uint8"
    if len(ins) > 2 and ins[2]:
        out_dtype = ctx.b.types[ins[2]].dtype
    elif at.get("output_dtype"):
        from onnx.helper import tensor_dtype_to_np_dtype

        out_dtype = str(np.dtype(tensor_dtype_to_np_dtype(int(at["output_dtype"]))))
    if out_dtype not in _EIGHT_BITS:
        raise ctx.fail(f"a {out_dtype} output (uint8 and int8 are supported)")
    if ctx.b.types[x].dtype != "float32":
        raise ctx.fail(f"{ctx.b.types[x].dtype} input (float32 is supported)")
    s, z, _, _ = _scale_zp(ctx, ins, x, at, out_dtype)
    return ctx.call("quantize", [x, s, z], out_dtype=out_dtype)


@_conv("DequantizeLinear")
def _dequantize(ctx, ins, at):
    x = ins[0]
    dtype = ctx.b.types[x].dtype
    if dtype not in (*_EIGHT_BITS, "int32"):
        raise ctx.fail(f"{dtype} input (uint8, int8 and int32 are supported)")
    s, z, axis, z_in = _scale_zp(ctx, ins, x, at, dtype)
    out = ctx.call("dequantize", [x, s, z])
    if ctx.b.is_const(ins[1]) and (z_in is None or ctx.b.is_const(z_in)):
        zp = ctx.b.value(z_in).reshape(-1) if z_in else np.zeros(1, dtype)
        q = ctx.b.value(x) if ctx.b.is_const(x) else x
        scale = ctx.b.value(ins[1]).astype(np.float32).reshape(-1)
        ctx.b.notes[out] = QSource(q, scale, zp, axis)
    return out


# ----------------------------------------------------------------------------- operands
def _source(ctx: _Ctx, v: str | None) -> QSource | None:
    note = ctx.b.notes.get(v) if v else None
    return note if isinstance(note, QSource) else None


def _activation(ctx: _Ctx, v: str) -> QSource | None:
    """A computed 8-bit tensor dequantized per tensor, or None."""
    src = _source(ctx, v)
    if src is None or not isinstance(src.q, str) or src.scale.size != 1 or src.zero_point.size != 1:
        return None
    return src if ctx.b.types[src.q].dtype in _EIGHT_BITS else None


def _weight(ctx: _Ctx, v: str, axis: int) -> QSource | None:
    """A constant 8-bit tensor dequantized per tensor or per channel along ``axis``
    with one zero point, or None."""
    src = _source(ctx, v)
    if src is None or not isinstance(src.q, np.ndarray) or str(src.q.dtype) not in _EIGHT_BITS:
        return None
    if src.scale.size != 1 and (
        src.axis != axis % src.q.ndim or src.scale.size != src.q.shape[axis]
    ):
        return None
    return src if np.all(src.zero_point == src.zero_point[0]) else None


def _bias(ctx: _Ctx, v: str | None, scale: np.ndarray) -> np.ndarray | None | bool:
    """The int32 bias of a dequantized bias operand whose scale is ``scale`` (the
    accumulator's), None without a bias, False when it is not such a bias."""
    if not v:
        return None
    src = _source(ctx, v)
    if src is None or not isinstance(src.q, np.ndarray) or src.q.dtype != np.int32:
        return False
    if np.any(src.zero_point != 0):
        return False
    if not np.allclose(np.broadcast_to(src.scale, scale.shape), scale, rtol=1e-4, atol=0):
        return False
    return src.q.reshape(-1)


def _acc_scale(a: QSource, w: QSource) -> np.ndarray:
    """``a_scale * w_scale`` in float32 (onnxruntime's first step of the multiplier)."""
    return (np.float32(a.scale[0]) * w.scale.astype(np.float32)).astype(np.float32)


def _channel_const(ctx: _Ctx, values: np.ndarray, ndim: int, axis: int, hint: str) -> str:
    if values.size == 1:
        return ctx.b.const(values.reshape(()), hint)
    shape = [1] * ndim
    shape[axis] = values.size
    return ctx.b.const(values.reshape(shape), hint)


# ----------------------------------------------------------------------------- kernels
def _emit_conv(ctx: _Ctx, x: str, za: int, wq: np.ndarray, zw: int, bias, at: dict) -> str:
    """``qnn_conv2d`` with the weight sums folded into the bias (int32 NCHW out)."""
    _spatial_2d(ctx, x)
    kernel = tuple(at.get("kernel_shape", wq.shape[2:]))
    strides = tuple(at.get("strides", [1, 1]))
    dil = tuple(at.get("dilations", [1, 1]))
    pads = _auto_pads(ctx, at, ctx.shape(x)[2:], kernel, strides, dil)
    K = int(np.prod(wq.shape[1:]))
    folded = np.zeros(wq.shape[0], np.int64) if bias is None else bias.astype(np.int64)
    folded = folded - za * wq.astype(np.int64).reshape(wq.shape[0], -1).sum(1) + K * za * zw
    x, wq = _channels_by_four(ctx, x, za, wq, zw, int(at.get("group", 1)))
    args = [x, ctx.b.const(wq, "weight"), ctx.b.const(_wrap32(folded), "bias")]
    return ctx.call(
        "qnn_conv2d",
        args,
        strides=strides,
        pads=pads,
        dilations=dil,
        groups=int(at.get("group", 1)),
        data_zero_point=za,
        kernel_zero_point=zw,
        weight_sums_in_bias=True,
    )


def _channels_by_four(ctx: _Ctx, x: str, za: int, wq: np.ndarray, zw: int, groups: int):
    """The data and weight of a convolution whose input channels are not a multiple of 4
    (an RGB image's 3), padded with channels of zero weights (and data of value ``za``),
    so that the 4-wide dot-product intrinsics apply (schedule_quantized); the sum does
    not change. Only for one group and a zero weight zero point (onnxruntime's symmetric
    s8 weights), where the folded bias stays as it is."""
    c = wq.shape[1]
    if groups != 1 or zw != 0 or c % 4 == 0:
        return x, wq
    extra = -c % 4
    wq = np.pad(wq, ((0, 0), (0, extra), (0, 0), (0, 0)))
    padded = ctx.call(
        "pad", [x], before=(0, 0, 0, 0), after=(0, extra, 0, 0), mode="constant", value=za
    )
    return padded, wq


def _emit_matmul(ctx: _Ctx, a: str, za: int, bq: np.ndarray | str, zb: int, bias) -> str:
    """``qnn_matmul`` of ``a`` (any rank, flattened to 2-D) by ``b [K, N]``; the weight
    sums are folded into the bias when ``b`` is a constant."""
    shape = ctx.shape(a)
    if len(shape) < 2:
        raise ctx.fail("a 1-D operand")
    a2 = a if len(shape) == 2 else ctx.call("reshape", [a], shape=(-1, shape[-1]))
    if isinstance(bq, np.ndarray):
        K, N = bq.shape
        folded = np.zeros(N, np.int64) if bias is None else bias.astype(np.int64)
        folded = folded - za * bq.astype(np.int64).sum(0) + K * za * zb
        args = [a2, ctx.b.const(bq, "weight"), ctx.b.const(_wrap32(folded), "bias")]
        acc = ctx.call(
            "qnn_matmul", args, a_zero_point=za, b_zero_point=zb, weight_sums_in_bias=True
        )
    else:
        N = ctx.shape(bq)[1]
        extra = [] if bias is None else [ctx.b.const(bias.astype(np.int32), "bias")]
        acc = ctx.call("qnn_matmul", [a2, bq, *extra], a_zero_point=za, b_zero_point=zb)
    if len(shape) != 2:
        acc = ctx.call("reshape", [acc], shape=(*shape[:-1], N))
    return acc


def _requantize(ctx: _Ctx, acc: str, acc_scale: np.ndarray, axis: int, ys: str, yz: str | None):
    """``requantize(acc)`` to the output scale and zero point of a QLinear operator."""
    sy = ctx.const(ys, "y_scale").astype(np.float32).reshape(-1)
    if sy.size != 1:
        raise ctx.fail("a per-channel output scale")
    zy = ctx.const(yz, "y_zero_point").reshape(-1) if yz else np.zeros(1, np.uint8)
    mult = (acc_scale / sy[0]).astype(np.float32)
    nd = len(ctx.shape(acc))
    m = _channel_const(ctx, mult, nd, axis % nd, "multiplier")
    return ctx.call("requantize", [acc, m], output_zero_point=int(zy[0]), out_dtype=str(zy.dtype))


def _dequantized(ctx: _Ctx, acc: str, acc_scale: np.ndarray, axis: int) -> str:
    nd = len(ctx.shape(acc))
    s = _channel_const(ctx, acc_scale, nd, axis % nd, "acc_scale")
    return ctx.call("dequantize", [acc, s, _zero(ctx, "int32")])


# ----------------------------------------------------------------------------- QDQ
@_conv("Conv")
def _conv_qdq(ctx, ins, at):
    x, w = _activation(ctx, ins[0]), _weight(ctx, ins[1], 0)
    if x is None or w is None or len(ctx.shape(ins[0])) != 4:
        return _FLOAT["Conv"](ctx, ins, at)
    scale = _acc_scale(x, w)
    bias = _bias(ctx, ins[2] if len(ins) > 2 else None, scale)
    if bias is False:
        return _FLOAT["Conv"](ctx, ins, at)
    assert isinstance(x.q, str) and isinstance(w.q, np.ndarray)
    za, zw = int(x.zero_point[0]), int(w.zero_point[0])
    acc = _emit_conv(ctx, x.q, za, w.q, zw, bias, at)
    return _dequantized(ctx, acc, scale, 1)


@_conv("MatMul")
def _matmul_qdq(ctx, ins, at):
    a, b = _activation(ctx, ins[0]), _weight(ctx, ins[1], 1)
    if a is None or b is None or b.q.ndim != 2:  # type: ignore[union-attr]
        return _FLOAT["MatMul"](ctx, ins, at)
    assert isinstance(a.q, str) and isinstance(b.q, np.ndarray)
    acc = _emit_matmul(ctx, a.q, int(a.zero_point[0]), b.q, int(b.zero_point[0]), None)
    return _dequantized(ctx, acc, _acc_scale(a, b), -1)


@_conv("Gemm")
def _gemm_qdq(ctx, ins, at):
    trans_b = bool(at.get("transB", 0))
    a, b = _activation(ctx, ins[0]), _weight(ctx, ins[1], 0 if trans_b else 1)
    plain = (
        at.get("transA", 0) or float(at.get("alpha", 1.0)) != 1 or float(at.get("beta", 1.0)) != 1
    )
    if a is None or b is None or plain or len(ctx.shape(ins[0])) != 2:
        return _FLOAT["Gemm"](ctx, ins, at)
    scale = _acc_scale(a, b)
    bias = _bias(ctx, ins[2] if len(ins) > 2 else None, scale)
    assert isinstance(a.q, str) and isinstance(b.q, np.ndarray)
    bq = np.ascontiguousarray(b.q.T) if trans_b else b.q
    if bias is False or (bias is not None and bias.size != bq.shape[1]):
        return _FLOAT["Gemm"](ctx, ins, at)
    acc = _emit_matmul(ctx, a.q, int(a.zero_point[0]), bq, int(b.zero_point[0]), bias)
    return _dequantized(ctx, acc, scale, -1)


# ----------------------------------------------------------------------------- QLinear
def _const_zp(ctx: _Ctx, v: str | None, what: str, per_channel: bool = False) -> int:
    if not v:
        return 0
    arr = ctx.const(v, what).reshape(-1)
    if arr.size > 1 and (not per_channel or np.any(arr != arr[0])):
        raise ctx.fail(f"{what} with different values per channel")
    return int(arr[0])


def _const_scale(ctx: _Ctx, v: str, what: str) -> np.ndarray:
    return ctx.const(v, what).astype(np.float32).reshape(-1)


@_conv("QLinearConv")
def _qlinear_conv(ctx, ins, at):
    x, xs, xz, w, ws, wz, ys, yz = ins[:8]
    wq = ctx.const(w, "w")
    sx, sw = _const_scale(ctx, xs, "x_scale"), _const_scale(ctx, ws, "w_scale")
    za, zw = _const_zp(ctx, xz, "x_zero_point"), _const_zp(ctx, wz, "w_zero_point", True)
    bias = ctx.const(ins[8], "B").reshape(-1) if len(ins) > 8 and ins[8] else None
    acc = _emit_conv(ctx, x, za, wq, zw, bias, at)
    return _requantize(ctx, acc, (np.float32(sx[0]) * sw).astype(np.float32), 1, ys, yz)


@_conv("QLinearMatMul")
def _qlinear_matmul(ctx, ins, at):
    a, as_, az, b, bs, bz, ys, yz = ins[:8]
    bq = ctx.const(b, "b")
    if bq.ndim != 2:
        raise ctx.fail(f"a {bq.ndim}-D second operand (a 2-D constant is supported)")
    sa, sb = _const_scale(ctx, as_, "a_scale"), _const_scale(ctx, bs, "b_scale")
    za, zb = _const_zp(ctx, az, "a_zero_point"), _const_zp(ctx, bz, "b_zero_point", True)
    acc = _emit_matmul(ctx, a, za, bq, zb, None)
    return _requantize(ctx, acc, (np.float32(sa[0]) * sb).astype(np.float32), -1, ys, yz)


@_conv("ConvInteger")
def _conv_integer(ctx, ins, at):
    za = _const_zp(ctx, ins[2] if len(ins) > 2 else None, "x_zero_point")
    zw = _const_zp(ctx, ins[3] if len(ins) > 3 else None, "w_zero_point", True)
    if ctx.b.is_const(ins[1]):
        return _emit_conv(ctx, ins[0], za, ctx.b.value(ins[1]), zw, None, at)
    _spatial_2d(ctx, ins[0])
    kernel = tuple(at.get("kernel_shape", ctx.shape(ins[1])[2:]))
    strides, dil = tuple(at.get("strides", [1, 1])), tuple(at.get("dilations", [1, 1]))
    return ctx.call(
        "qnn_conv2d",
        [ins[0], ins[1]],
        strides=strides,
        pads=_auto_pads(ctx, at, ctx.shape(ins[0])[2:], kernel, strides, dil),
        dilations=dil,
        groups=int(at.get("group", 1)),
        data_zero_point=za,
        kernel_zero_point=zw,
    )


@_conv("MatMulInteger")
def _matmul_integer(ctx, ins, at):
    a, b = ins[0], ins[1]
    a_zp = ins[2] if len(ins) > 2 and ins[2] else None
    zb = _const_zp(ctx, ins[3] if len(ins) > 3 else None, "b_zero_point", True)
    bq = ctx.b.value(b) if ctx.b.is_const(b) else b
    if a_zp is None or ctx.b.is_const(a_zp):
        return _emit_matmul(ctx, a, _const_zp(ctx, a_zp, "a_zero_point"), bq, zb, None)
    # a zero point computed at run time (DynamicQuantizeLinear): subtract za * (colsum(b)
    # - K * zb) after the product, from the constant's column sums
    if not isinstance(bq, np.ndarray) or int(np.prod(ctx.shape(a_zp))) != 1:
        raise ctx.fail("a computed a_zero_point with a computed b (b must be a constant)")
    acc = _emit_matmul(ctx, a, 0, bq, zb, None)
    K = bq.shape[0]
    sums = _wrap32(bq.astype(np.int64).sum(0) - K * zb)
    za = ctx.call("cast", [a_zp], dtype="int32")
    corr = ctx.call("multiply", [za, ctx.b.const(sums, "weight_sums")])
    return ctx.call("subtract", [acc, corr])


@_conv("DynamicQuantizeLinear")
def _dynamic_quantize(ctx, ins, at):
    """onnxruntime's: the range of ``x`` and 0, ``scale = range / 255`` (1 for an empty
    range), ``zero_point = round(clip(-min / scale, 0, 255))``, then QuantizeLinear."""
    x = ins[0]
    axes = tuple(range(len(ctx.shape(x))))
    zero = ctx.b.const(np.float32(0), "zero")
    lo = ctx.call("reduce", [x], kind="min", axes=axes, keepdims=False)
    hi = ctx.call("reduce", [x], kind="max", axes=axes, keepdims=False)
    lo = ctx.call("minimum", [lo, zero])
    hi = ctx.call("maximum", [hi, zero])
    span = ctx.call("subtract", [hi, lo])
    scale = ctx.call("divide", [span, ctx.b.const(np.float32(255), "levels")])
    empty = ctx.call("equal", [span, zero])
    scale = ctx.call("where", [empty, ctx.b.const(np.float32(1), "one"), scale])
    zp = ctx.call("subtract", [zero, ctx.call("divide", [lo, scale])])
    zp = ctx.call("round", [ctx.call("clip", [zp], min=0.0, max=255.0)])
    zp = ctx.call("cast", [zp], dtype="uint8")
    y = ctx.call("quantize", [x, scale, zp], out_dtype="uint8")
    return [y, scale, zp]


# ----------------------------------------------------------------------------- com.microsoft
def _scalar_scale(ctx: _Ctx, v: str, what: str) -> str:
    arr = _const_scale(ctx, v, what)
    if arr.size != 1:
        raise ctx.fail(f"a per-channel {what}")
    return ctx.b.const(arr.reshape(()), what)


def _dq_of(ctx: _Ctx, x: str, scale: str, zp: str | None) -> str:
    """``dequantize(x)`` by per-tensor constant parameters (a QOperator operand)."""
    s = _scalar_scale(ctx, scale, "scale")
    z = _const_zp(ctx, zp, "zero_point")
    return ctx.call("dequantize", [x, s, ctx.b.const(np.array(z, ctx.b.types[x].dtype), "zp")])


def _q_of(ctx: _Ctx, v: str, scale: str, zp: str | None, dtype: str) -> str:
    s = _scalar_scale(ctx, scale, "y_scale")
    z = ctx.b.const(np.array(_const_zp(ctx, zp, "y_zero_point"), dtype), "y_zero_point")
    return ctx.call("quantize", [v, s, z], out_dtype=dtype)


def _arg(ins: list, i: int) -> str | None:
    return ins[i] if len(ins) > i and ins[i] else None


@_conv("com.microsoft.QLinearAdd")
def _qlinear_add(ctx, ins, at):
    a, b = ins[0], ins[3]
    dtype = ctx.b.types[a].dtype
    total = ctx.call(
        "add", [_dq_of(ctx, a, ins[1], _arg(ins, 2)), _dq_of(ctx, b, ins[4], _arg(ins, 5))]
    )
    return _q_of(ctx, total, ins[6], _arg(ins, 7), dtype)


@_conv("com.microsoft.QLinearGlobalAveragePool")
def _qlinear_global_avg_pool(ctx, ins, at):
    x = ins[0]
    _spatial_2d(ctx, x)
    layout = "NHWC" if int(at.get("channels_last", 0)) else "NCHW"
    pooled = ctx.call(
        "global_avg_pool2d", [_dq_of(ctx, x, ins[1], _arg(ins, 2))], data_layout=layout
    )
    return _q_of(ctx, pooled, ins[3], _arg(ins, 4), ctx.b.types[x].dtype)


@_conv("com.microsoft.QGemm")
def _qgemm(ctx, ins, at):
    """``alpha * A @ B + C`` of 8-bit A and constant B, int32 C at ``a_scale * b_scale``;
    requantized when ``y_scale`` is given, else dequantized to float32."""
    if at.get("transA", 0) or float(at.get("alpha", 1.0)) != 1.0:
        raise ctx.fail("transA or an alpha other than 1")
    bq = ctx.const(ins[3], "B")
    if bq.ndim != 2:
        raise ctx.fail(f"a {bq.ndim}-D B (a 2-D constant is supported)")
    bq = np.ascontiguousarray(bq.T) if at.get("transB", 0) else bq
    sa, sb = _const_scale(ctx, ins[1], "a_scale"), _const_scale(ctx, ins[4], "b_scale")
    za = _const_zp(ctx, _arg(ins, 2), "a_zero_point")
    zb = _const_zp(ctx, _arg(ins, 5), "b_zero_point", True)
    bias = ctx.const(ins[6], "C").reshape(-1) if _arg(ins, 6) else None
    if bias is not None and bias.size not in (1, bq.shape[1]):
        raise ctx.fail(f"a C of {bias.size} values (one, or one per column)")
    if bias is not None:
        bias = np.broadcast_to(bias, (bq.shape[1],)).astype(np.int64)
    acc = _emit_matmul(ctx, ins[0], za, bq, zb, bias)
    scale = (np.float32(sa[0]) * sb).astype(np.float32)
    if _arg(ins, 7) is None:
        return _dequantized(ctx, acc, scale, -1)
    return _requantize(ctx, acc, scale, -1, ins[7], _arg(ins, 8))
