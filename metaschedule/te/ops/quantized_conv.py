"""Quantized 2-D convolutions, NHWC and NCHW, grouped and depthwise: u8 or s8 data, s8
(or u8) weights, s32 accumulation.

As :mod:`.quantized` does for products (TVM's QNN legalization), the main reduction stays
a plain product of casts, the pattern the dot-product tensor intrinsics match. The data is
padded with its zero point ``za`` (as ONNX's ``QLinearConv`` and ``ConvInteger`` pad), so
with ``K = KH * KW * channels per group``::

    acc[n, y, x, f] = sum_{ky, kx, c} pad(a)[...] * w[...]                   (block `name`)
    out = acc - zw * window_sum(a)[n, y, x, g] - za * kernel_sum(w)[f] + K * za * zw
          (+ bias[f])

The window and kernel sums are blocks of their own, made only for a nonzero zero point;
with ``weight_sums_in_bias=True`` the caller has folded ``K * za * zw - za *
kernel_sum(w)`` into ``bias`` (a graph does, for constant weights). Integer arithmetic is
int32 and wraps as C's does. :func:`~.quantized.requantize` is the epilogue back to 8 bits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...tir import op as _op
from ...tir.expr import PrimExpr, const
from ..tensor import Tensor, compute, reduce_axis
from ..tensor import sum as te_sum
from ._util import check_tensor, layout_free, named, pad_tuple, positive_tuple, window_count
from ._util import window_index as _win
from .quantized import _ACTIVATIONS, _i32, _wrap32
from .transform import pad

__all__ = [
    "quantized_conv2d_nchw",
    "quantized_conv2d_nhwc",
    "quantized_depthwise_conv2d_nchw",
    "quantized_depthwise_conv2d_nhwc",
]

IntOrSeq = int | Sequence[int]
Padding = int | str | Sequence[int]
#: (f, channel within the group, ky, kx) -> the weight element
KernelRead = Callable[[PrimExpr, PrimExpr, PrimExpr, PrimExpr], PrimExpr]


def _check(op: str, data: Tensor, kernel: Tensor, bias: Tensor | None, channels: int) -> None:
    check_tensor(data, op, "data", ndim=4)
    check_tensor(kernel, op, "kernel")
    if data.dtype not in _ACTIVATIONS or kernel.dtype not in _ACTIVATIONS:
        raise TypeError(
            f"{op}: expected uint8 or int8 data and kernel, got {data.dtype} and {kernel.dtype}"
        )
    if bias is not None:
        check_tensor(bias, op, "bias", ndim=1)
        if bias.dtype != "int32" or bias.shape[0] != channels:
            raise ValueError(
                f"{op}: bias must be int32 of shape ({channels},), got {bias.dtype}{bias.shape}"
            )


def _qconv(
    op: str,
    data: Tensor,
    kernel: Tensor,
    nhwc: bool,
    geometry: tuple[int, int, int, int, int],  # F, channels per group, groups, KH, KW
    read_kernel: KernelRead,
    zero_points: tuple[int, int],
    bias: Tensor | None,
    window: tuple[IntOrSeq, Padding, IntOrSeq],  # stride, padding, dilation
    weight_sums_in_bias: bool,
    name: str,
) -> Tensor:
    F, cin_g, groups, KH, KW = geometry
    _check(op, data, kernel, bias, F)
    stride, padding, dilation = window
    strides = positive_tuple(stride, 2, op, "stride")
    dils = positive_tuple(dilation, 2, op, "dilation")
    before, after = pad_tuple(padding, (KH, KW), dils, op)
    N, *rest = data.shape
    C, H, W = (rest[2], rest[0], rest[1]) if nhwc else rest
    if cin_g * groups != C or F % groups:
        raise ValueError(
            f"{op}: the kernel ({cin_g} channels per group, {groups} groups, {F} outputs) "
            f"does not fit data {data.shape}"
        )
    out_hw = []
    for size, k, s, d, lo, hi in zip((H, W), (KH, KW), strides, dils, before, after):
        n = window_count(size, k, s, d, lo, hi)
        if n is None:
            raise ValueError(
                f"{op}: the kernel {KH}x{KW} does not fit the padded data {data.shape}"
            )
        out_hw.append(n)
    za, zw = (int(z) for z in zero_points)
    padded = data
    if any(before) or any(after):
        b4 = (0, *before, 0) if nhwc else (0, 0, *before)
        af = (0, *after, 0) if nhwc else (0, 0, *after)
        padded = pad(data, b4, af, pad_value=za, name="PaddedInput")
    f_per_g = F // groups

    def read_data(n, c, y, x, ry, rx):
        iy, ix = _win(y, ry, strides[0], dils[0]), _win(x, rx, strides[1], dils[1])
        return padded[(n, iy, ix, c) if nhwc else (n, c, iy, ix)]

    def group_channel(g, rc):
        if groups == 1:
            return rc
        return g if cin_g == 1 else g * cin_g + rc

    def axes():
        ry, rx = reduce_axis((0, KH), name="ry"), reduce_axis((0, KW), name="rx")
        rc = reduce_axis((0, cin_g), name="rc")
        return ry, rx, rc, ([ry, rx] if cin_g == 1 else [ry, rx, rc])

    def split(idx):  # output index -> (n, y, x, f)
        return (idx[0], idx[1], idx[2], idx[3]) if nhwc else (idx[0], idx[2], idx[3], idx[1])

    def group_of(f):
        return f if f_per_g == 1 else _op.floordiv(f, f_per_g)

    def acc_body(*idx):
        n, y, x, f = split(idx)
        ry, rx, rc, red = axes()
        c = group_channel(group_of(f), rc.var)
        a = read_data(n, c, y, x, ry.var, rx.var)
        w = read_kernel(f, const(0) if cin_g == 1 else rc.var, ry.var, rx.var)
        return te_sum(_i32(a) * _i32(w), axis=red)

    out_shape = (N, *out_hw, F) if nhwc else (N, F, *out_hw)
    names = ("nn", "yy", "xx", "ff") if nhwc else ("nn", "ff", "yy", "xx")
    acc = compute(out_shape, named(names, acc_body), name=name, tag=op, attrs=layout_free(kernel))
    if (za == 0 or weight_sums_in_bias) and zw == 0 and bias is None:
        return acc
    wsum = ksum = None
    if zw:

        def wsum_body(*idx):
            n, y, x, g = split(idx)
            ry, rx, rc, red = axes()
            return te_sum(_i32(read_data(n, group_channel(g, rc.var), y, x, ry.var, rx.var)), red)

        shape = (N, *out_hw, groups) if nhwc else (N, groups, *out_hw)
        names = ("nn", "yy", "xx", "gg") if nhwc else ("nn", "gg", "yy", "xx")
        wsum = compute(shape, named(names, wsum_body), name=f"{name}_window_sum")
    if za and not weight_sums_in_bias:

        def ksum_body(f):
            ry, rx, rc, red = axes()
            return te_sum(
                _i32(read_kernel(f, const(0) if cin_g == 1 else rc.var, ry.var, rx.var)), red
            )

        ksum = compute((F,), ksum_body, name=f"{name}_kernel_sum")
    K = cin_g * KH * KW

    def combine(*idx):
        n, y, x, f = split(idx)
        out = acc[idx]
        if wsum is not None:
            g = group_of(f)
            out = out - const(zw, "int32") * wsum[(n, y, x, g) if nhwc else (n, g, y, x)]
        if ksum is not None:
            out = out - const(za, "int32") * ksum[f]
            if zw:
                out = out + const(_wrap32(K * za * zw), "int32")
        if bias is not None:
            out = out + bias[f]
        return out

    return compute(out_shape, combine, name=f"{name}_zp", tag="elemwise")


def quantized_conv2d_nhwc(
    data: Tensor,
    kernel: Tensor,
    data_zero_point: int = 0,
    kernel_zero_point: int = 0,
    bias: Tensor | None = None,
    stride: IntOrSeq = 1,
    padding: Padding = 0,
    dilation: IntOrSeq = 1,
    groups: int = 1,
    weight_sums_in_bias: bool = False,
    name: str = "T_qconv2d_nhwc",
) -> Tensor:
    """``conv2d(data - zd, kernel - zk) (+ bias)`` in int32: data ``[N, H, W, C]``, kernel
    HWIO ``[KH, KW, C // groups, F]`` -> ``[N, OH, OW, F]``. ``padding`` as
    :func:`~.conv.conv2d_nhwc` takes it.

    Raises:
        TypeError: dtypes other than uint8/int8 (int32 bias). ValueError: shapes that do
            not fit.
    """
    check_tensor(kernel, "quantized_conv2d_nhwc", "kernel", ndim=4)
    KH, KW, cin_g, F = kernel.shape
    return _qconv(
        "quantized_conv2d_nhwc",
        data,
        kernel,
        True,
        (F, cin_g, int(groups), KH, KW),
        lambda f, c, ky, kx: kernel[ky, kx, c, f],
        (data_zero_point, kernel_zero_point),
        bias,
        (stride, padding, dilation),
        weight_sums_in_bias,
        name,
    )


def quantized_conv2d_nchw(
    data: Tensor,
    kernel: Tensor,
    data_zero_point: int = 0,
    kernel_zero_point: int = 0,
    bias: Tensor | None = None,
    stride: IntOrSeq = 1,
    padding: Padding = 0,
    dilation: IntOrSeq = 1,
    groups: int = 1,
    weight_sums_in_bias: bool = False,
    name: str = "T_qconv2d_nchw",
) -> Tensor:
    """``conv2d(data - zd, kernel - zk) (+ bias)`` in int32: data ``[N, C, H, W]``, kernel
    OIHW ``[F, C // groups, KH, KW]`` -> ``[N, F, OH, OW]`` (ONNX's ``ConvInteger``, and
    ``QLinearConv`` before its requantize)."""
    check_tensor(kernel, "quantized_conv2d_nchw", "kernel", ndim=4)
    F, cin_g, KH, KW = kernel.shape
    return _qconv(
        "quantized_conv2d_nchw",
        data,
        kernel,
        False,
        (F, cin_g, int(groups), KH, KW),
        lambda f, c, ky, kx: kernel[f, c, ky, kx],
        (data_zero_point, kernel_zero_point),
        bias,
        (stride, padding, dilation),
        weight_sums_in_bias,
        name,
    )


def quantized_depthwise_conv2d_nhwc(
    data: Tensor,
    kernel: Tensor,
    data_zero_point: int = 0,
    kernel_zero_point: int = 0,
    bias: Tensor | None = None,
    stride: IntOrSeq = 1,
    padding: Padding = 0,
    dilation: IntOrSeq = 1,
    weight_sums_in_bias: bool = False,
    name: str = "T_qdepthwise_conv2d_nhwc",
) -> Tensor:
    """Depthwise: kernel ``[KH, KW, C, M]`` (or ``[KH, KW, C]``); output channel ``c * M +
    m`` convolves input channel ``c`` with ``kernel[..., c, m]``, as
    :func:`~.conv.depthwise_conv2d_nhwc`."""
    op = "quantized_depthwise_conv2d_nhwc"
    check_tensor(kernel, op, "kernel")
    if kernel.ndim not in (3, 4):
        raise ValueError(f"{op}: kernel must be [KH, KW, C, M] or [KH, KW, C], got {kernel.shape}")
    KH, KW, C = kernel.shape[:3]
    M = kernel.shape[3] if kernel.ndim == 4 else 1

    def read(f, c, ky, kx):
        if kernel.ndim == 3:
            return kernel[ky, kx, f]
        return (
            kernel[ky, kx, f, 0]
            if M == 1
            else kernel[ky, kx, _op.floordiv(f, M), _op.floormod(f, M)]
        )

    return _qconv(
        op,
        data,
        kernel,
        True,
        (C * M, 1, C, KH, KW),
        read,
        (data_zero_point, kernel_zero_point),
        bias,
        (stride, padding, dilation),
        weight_sums_in_bias,
        name,
    )


def quantized_depthwise_conv2d_nchw(
    data: Tensor,
    kernel: Tensor,
    data_zero_point: int = 0,
    kernel_zero_point: int = 0,
    bias: Tensor | None = None,
    stride: IntOrSeq = 1,
    padding: Padding = 0,
    dilation: IntOrSeq = 1,
    weight_sums_in_bias: bool = False,
    name: str = "T_qdepthwise_conv2d_nchw",
) -> Tensor:
    """Depthwise in NCHW: kernel ``[C * M, 1, KH, KW]`` (ONNX's grouped ``Conv`` with
    ``group == C``)."""
    check_tensor(data, "quantized_depthwise_conv2d_nchw", "data", ndim=4)
    return quantized_conv2d_nchw(
        data,
        kernel,
        data_zero_point,
        kernel_zero_point,
        bias,
        stride,
        padding,
        dilation,
        data.shape[1],
        weight_sums_in_bias,
        name,
    )
