"""Channels-first (NCHW) convolutions and pooling, the layout ONNX and PyTorch use.

data ``[N, C, H, W]``; conv kernels ``[F, C // groups, KH, KW]`` (OIHW); transposed
conv kernels ``[C, F, KH, KW]`` (IOHW, as ONNX's ConvTranspose with one group).
``pads`` is ``(top, left, bottom, right)``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...tir import op as _op
from ...tir.expr import const
from ..tensor import Tensor, compute, reduce_axis
from ..tensor import max as te_max
from ..tensor import sum as te_sum
from ._util import check_tensor, layout_free, named, spread_source, window_count, window_index
from .transform import pad

Pads = Sequence[int]


def _out(size: int, k: int, s: int, d: int, lo: int, hi: int, ceil: bool = False) -> int:
    n = window_count(size, k, s, d, lo, hi, ceil)
    if n is None:
        raise ValueError(f"window {k} (dilation {d}) is larger than the padded input {size}")
    return n


def _padded(
    data: Tensor,
    pads: Pads,
    extra: Sequence[int] = (0, 0),
    value: float = 0.0,
    name: str = "pad_temp",
) -> Tensor:
    t, l, b, r = pads
    b, r = b + extra[0], r + extra[1]
    if not any((t, l, b, r)):
        return data
    return pad(data, (0, 0, t, l), (0, 0, b, r), pad_value=value, name=name)


def conv2d_nchw(
    data: Tensor,
    kernel: Tensor,
    strides: Sequence[int] = (1, 1),
    pads: Pads = (0, 0, 0, 0),
    dilations: Sequence[int] = (1, 1),
    groups: int = 1,
    name: str = "conv2d_nchw",
) -> Tensor:
    """Grouped 2-D convolution in NCHW/OIHW (depthwise when ``groups == C``)."""
    check_tensor(data, name, "data", ndim=4)
    check_tensor(kernel, name, "kernel", ndim=4)
    N, C, H, W = data.shape
    F, cin_g, KH, KW = kernel.shape
    if groups <= 0 or C % groups or F % groups or cin_g * groups != C:
        raise ValueError(
            f"{name}: kernel {kernel.shape} with {groups} groups does not fit data {data.shape}"
        )
    sh, sw = strides
    dh, dw = dilations
    OH = _out(H, KH, sh, dh, pads[0], pads[2])
    OW = _out(W, KW, sw, dw, pads[1], pads[3])
    padded = _padded(data, pads)
    rc = reduce_axis((0, cin_g), name="rc")
    ry = reduce_axis((0, KH), name="ry")
    rx = reduce_axis((0, KW), name="rx")
    f_per_g = F // groups

    def body(n, f, y, x):
        if groups == 1:
            c = rc.var
        elif cin_g == 1:
            c = _op.floordiv(f, f_per_g) if f_per_g != 1 else f
        else:
            c = _op.floordiv(f, f_per_g) * cin_g + rc.var
        a = padded[n, c, window_index(y, ry.var, sh, dh), window_index(x, rx.var, sw, dw)]
        axes = [ry, rx] if cin_g == 1 else [rc, ry, rx]
        w = kernel[f, 0 if cin_g == 1 else rc.var, ry.var, rx.var]
        return te_sum(a * w, axis=axes)

    return compute(
        (N, F, OH, OW),
        named(("nn", "ff", "yy", "xx"), body),
        name=name,
        tag=name,
        attrs=layout_free(kernel),
    )


def conv2d_transpose_nchw(
    data: Tensor,
    kernel: Tensor,
    strides: Sequence[int] = (1, 1),
    pads: Pads = (0, 0, 0, 0),
    output_padding: Sequence[int] = (0, 0),
    dilations: Sequence[int] = (1, 1),
    name: str = "conv2d_transpose_nchw",
) -> Tensor:
    """Transposed 2-D convolution, one group: data NCHW, kernel ``[C, F, KH, KW]``.

    ``OH = (H - 1) * stride + dilation * (KH - 1) + 1 - pad_top - pad_bottom + out_pad``.
    Two blocks: ``data_dilate_pad`` spreads the input ``stride`` apart inside a border,
    then a stride-1 convolution with the flipped kernel.
    """
    check_tensor(data, name, "data", ndim=4)
    check_tensor(kernel, name, "kernel", ndim=4)
    N, C, H, W = data.shape
    C2, F, KH, KW = kernel.shape
    if C2 != C:
        raise ValueError(
            f"{name}: kernel {kernel.shape} expects {C2} input channels, data {data.shape} has {C}"
        )
    ek = [d * (k - 1) + 1 for d, k in zip(dilations, (KH, KW))]
    lo = [e - 1 - p for e, p in zip(ek, pads[:2])]
    hi = [e - 1 - p + op for e, p, op in zip(ek, pads[2:], output_padding)]
    if any(v < 0 for v in lo + hi):
        raise ValueError(f"{name}: padding {tuple(pads)} larger than the dilated kernel {ek}")
    spread = [(s - 1) * st + 1 for s, st in zip((H, W), strides)]
    pshape = (N, C, spread[0] + lo[0] + hi[0], spread[1] + lo[1] + hi[1])

    def pad_body(n, c, y, x):
        conds, src = spread_source((y, x), lo, spread, strides)
        return _op.if_then_else(_op.all(*conds), data[n, c, src[0], src[1]], const(0.0, data.dtype))

    padded = compute(
        pshape,
        named(("i0", "i1", "i2", "i3"), pad_body),
        name="data_dilate_pad",
        tag="injective,pad",
    )
    rc = reduce_axis((0, C), name="rc")
    ry = reduce_axis((0, KH), name="ry")
    rx = reduce_axis((0, KW), name="rx")
    dh, dw = dilations

    def body(n, f, y, x):
        a = padded[n, rc.var, window_index(y, ry.var, 1, dh), window_index(x, rx.var, 1, dw)]
        return te_sum(a * kernel[rc.var, f, KH - 1 - ry.var, KW - 1 - rx.var], axis=[rc, ry, rx])

    out = (N, F, pshape[2] - ek[0] + 1, pshape[3] - ek[1] + 1)
    return compute(out, named(("nn", "ff", "yy", "xx"), body), name=name, tag=name)


def _pool_geometry(data, kernel, strides, pads, dilations, ceil_mode):
    N, C, H, W = data.shape
    oh = _out(H, kernel[0], strides[0], dilations[0], pads[0], pads[2], ceil_mode)
    ow = _out(W, kernel[1], strides[1], dilations[1], pads[1], pads[3], ceil_mode)
    extra = [
        max(0, (o - 1) * s + d * (k - 1) + 1 - size - lo - hi)
        for o, s, d, k, size, lo, hi in zip(
            (oh, ow), strides, dilations, kernel, (H, W), pads[:2], pads[2:]
        )
    ]
    return (N, C, oh, ow), extra


def max_pool2d_nchw(
    data: Tensor,
    kernel: Sequence[int],
    strides: Sequence[int] = (1, 1),
    pads: Pads = (0, 0, 0, 0),
    dilations: Sequence[int] = (1, 1),
    ceil_mode: bool = False,
    name: str = "pool_max",
) -> Tensor:
    """Max pooling of NCHW ``data`` (padding never wins: it is the lowest value)."""
    check_tensor(data, name, "data", ndim=4)
    shape, extra = _pool_geometry(data, kernel, strides, pads, dilations, ceil_mode)
    padded = _padded(data, pads, extra, float("-inf"))
    ry = reduce_axis((0, kernel[0]), name="rv0")
    rx = reduce_axis((0, kernel[1]), name="rv1")

    def body(n, c, y, x):
        return te_max(
            padded[
                n,
                c,
                window_index(y, ry.var, strides[0], dilations[0]),
                window_index(x, rx.var, strides[1], dilations[1]),
            ],
            axis=[ry, rx],
        )

    return compute(shape, named(("ax0", "ax1", "ax2", "ax3"), body), name=name, tag="pool_max")


def avg_pool2d_nchw(
    data: Tensor,
    kernel: Sequence[int],
    strides: Sequence[int] = (1, 1),
    pads: Pads = (0, 0, 0, 0),
    ceil_mode: bool = False,
    count_include_pad: bool = False,
    name: str = "pool_avg",
) -> Tensor:
    """Average pooling of NCHW ``data``: a ``pool_sum`` block, then the division by the
    number of window positions inside the data (or the explicitly padded data)."""
    check_tensor(data, name, "data", ndim=4)
    shape, extra = _pool_geometry(data, kernel, strides, pads, (1, 1), ceil_mode)
    padded = _padded(data, pads, extra, 0.0)
    ry = reduce_axis((0, kernel[0]), name="rv0")
    rx = reduce_axis((0, kernel[1]), name="rv1")

    def body(n, c, y, x):
        return te_sum(
            padded[
                n, c, window_index(y, ry.var, strides[0], 1), window_index(x, rx.var, strides[1], 1)
            ],
            axis=[ry, rx],
        )

    pooled = compute(
        shape, named(("ax0", "ax1", "ax2", "ax3"), body), name="pool_sum", tag="pool_sum"
    )
    H, W = data.shape[2:]
    if count_include_pad:
        bounds = [(-pads[0], H + pads[2]), (-pads[1], W + pads[3])]
    else:
        bounds = [(0, H), (0, W)]
    if not any(extra) and (count_include_pad or not any(pads)):
        k = const(kernel[0] * kernel[1], data.dtype)
        return compute(
            shape,
            named(("ax0", "ax1", "ax2", "ax3"), lambda n, c, y, x: pooled[n, c, y, x] / k),
            name=name,
            tag="elemwise",
        )

    def count(o, k, s, p, lo, hi):
        start = (o * s if s != 1 else o) - p
        first = _op.max(lo - start, 0)
        last = _op.min(hi - start, k)
        return _op.max(last - first, 1)

    def divide(n, c, y, x):
        cnt = count(y, kernel[0], strides[0], pads[0], *bounds[0]) * count(
            x, kernel[1], strides[1], pads[1], *bounds[1]
        )
        return pooled[n, c, y, x] / _op.cast(data.dtype, cnt)

    return compute(shape, named(("ax0", "ax1", "ax2", "ax3"), divide), name=name, tag="elemwise")


def global_avg_pool2d_nchw(data: Tensor, name: str = "adaptive_pool_avg") -> Tensor:
    """Mean over H and W of NCHW ``data``, kept as size-1 dimensions."""
    check_tensor(data, name, "data", ndim=4)
    N, C, H, W = data.shape
    ry, rx = reduce_axis((0, H), name="rv0"), reduce_axis((0, W), name="rv1")
    summed = compute(
        (N, C, 1, 1),
        named(
            ("ax0", "ax1", "ax2", "ax3"),
            lambda n, c, y, x: te_sum(data[n, c, ry.var, rx.var], axis=[ry, rx]),
        ),
        name="adaptive_pool_sum",
        tag="adaptive_pool_sum",
    )
    return compute(
        (N, C, 1, 1),
        named(
            ("ax0", "ax1", "ax2", "ax3"),
            lambda n, c, y, x: summed[n, c, y, x] / const(float(H * W), data.dtype),
        ),
        name=name,
        tag="elemwise",
    )
