"""Convolutions, channels last: data NWC / NHWC / NDHWC, kernels WIO / HWIO / DHWIO.

Padding is its own block (``PaddedInput``, an ``if_then_else`` as in topi), made only
when some padding is non-zero. ``padding`` is an int, ``"SAME"``/``"VALID"``, one int
per spatial dimension, or all the befores then all the afters
(``(top, left, bottom, right)`` in 2-D).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...tir import op as _op
from ..tensor import Tensor, compute, reduce_axis
from ..tensor import sum as te_sum
from ._util import (
    check_tensor,
    layout_free,
    named,
    pad_tuple,
    positive_tuple,
    spread_source,
    to_dtype,
    window_count,
    window_index,
)
from .transform import pad

IntOrSeq = int | Sequence[int]
Padding = int | str | Sequence[int]

_SPATIAL = {1: ("xx",), 2: ("yy", "xx"), 3: ("zz", "yy", "xx")}
_REDUCE = {1: ("rx",), 2: ("ry", "rx"), 3: ("rz", "ry", "rx")}


def _prepare(
    data: Tensor, ks: Sequence[int], stride: IntOrSeq, padding: Padding, dilation: IntOrSeq, op: str
):
    """Normalised strides and dilations, the padded input and the output spatial shape."""
    nd = len(ks)
    strides = positive_tuple(stride, nd, op, "stride")
    dilations = positive_tuple(dilation, nd, op, "dilation")
    before, after = pad_tuple(padding, ks, dilations, op)
    out = []
    for d in range(nd):
        n = window_count(data.shape[1 + d], ks[d], strides[d], dilations[d], before[d], after[d])
        if n is None:
            raise ValueError(
                f"{op}: the dilated kernel {tuple(ks)} (dilation {dilations}) does not fit in "
                f"the padded input {data.shape} (padding {before}, {after})"
            )
        out.append(n)
    padded = data
    if any(before) or any(after):
        padded = pad(data, (0, *before, 0), (0, *after, 0), name="PaddedInput")
    return strides, dilations, padded, tuple(out)


def _conv(
    data: Tensor,
    kernel: Tensor,
    nd: int,
    stride: IntOrSeq,
    padding: Padding,
    dilation: IntOrSeq,
    groups: int,
    out_dtype: str | None,
    name: str,
) -> Tensor:
    check_tensor(data, name, "data", ndim=nd + 2)
    check_tensor(kernel, name, "kernel", ndim=nd + 2)
    ks = kernel.shape[:nd]
    cin_g, F = kernel.shape[nd:]
    C = data.shape[-1]
    if groups <= 0 or C % groups or F % groups:
        raise ValueError(f"{name}: {groups} groups do not divide {C} input and {F} output channels")
    if cin_g * groups != C:
        raise ValueError(
            f"{name}: kernel {kernel.shape} expects {cin_g * groups} input channels "
            f"({cin_g} per group, {groups} groups) but data {data.shape} has {C}"
        )
    strides, dilations, padded, out_sp = _prepare(data, ks, stride, padding, dilation, name)
    raxes = [reduce_axis((0, k), name=n) for k, n in zip(ks, _REDUCE[nd])]
    rc = reduce_axis((0, cin_g), name="rc")
    f_per_group = F // groups

    # one input channel per group (depthwise): no channel reduction
    per_channel = groups > 1 and cin_g == 1

    def body(n, *rest):
        sp, f = rest[:nd], rest[nd]
        g = f if f_per_group == 1 else f // f_per_group
        if groups == 1:
            c = rc.var
        else:
            c = g if per_channel else g * cin_g + rc.var
        src = tuple(
            window_index(o, r.var, s, d) for o, r, s, d in zip(sp, raxes, strides, dilations)
        )
        a = to_dtype(padded[(n, *src, c)], out_dtype)
        w_c = 0 if per_channel else rc.var
        w = to_dtype(kernel[(*[r.var for r in raxes], w_c, f)], out_dtype)
        return te_sum(a * w, axis=raxes if per_channel else [*raxes, rc])

    shape = (data.shape[0], *out_sp, F)
    return compute(
        shape,
        named(("nn", *_SPATIAL[nd], "ff"), body),
        name=name,
        tag=name,
        attrs=layout_free(kernel),
    )


def conv1d_nwc(
    data: Tensor,
    kernel: Tensor,
    stride: IntOrSeq = 1,
    padding: Padding = 0,
    dilation: IntOrSeq = 1,
    out_dtype: str | None = None,
    name: str = "conv1d_nwc",
) -> Tensor:
    """1-D convolution: data ``[N, W, C]``, kernel ``[KW, C, F]`` -> ``[N, OW, F]``."""
    return _conv(data, kernel, 1, stride, padding, dilation, 1, out_dtype, name)


def conv2d_nhwc(
    data: Tensor,
    kernel: Tensor,
    stride: IntOrSeq = 1,
    padding: Padding = 0,
    dilation: IntOrSeq = 1,
    out_dtype: str | None = None,
    name: str = "conv2d_nhwc",
) -> Tensor:
    """2-D convolution: data ``[N, H, W, C]``, kernel ``[KH, KW, C, F]`` -> ``[N, OH, OW, F]``."""
    return _conv(data, kernel, 2, stride, padding, dilation, 1, out_dtype, name)


def conv3d_ndhwc(
    data: Tensor,
    kernel: Tensor,
    stride: IntOrSeq = 1,
    padding: Padding = 0,
    dilation: IntOrSeq = 1,
    out_dtype: str | None = None,
    name: str = "conv3d_ndhwc",
) -> Tensor:
    """3-D convolution: data ``[N, D, H, W, C]``, kernel ``[KD, KH, KW, C, F]``."""
    return _conv(data, kernel, 3, stride, padding, dilation, 1, out_dtype, name)


def group_conv2d_nhwc(
    data: Tensor,
    kernel: Tensor,
    stride: IntOrSeq = 1,
    padding: Padding = 0,
    dilation: IntOrSeq = 1,
    groups: int = 1,
    out_dtype: str | None = None,
    name: str = "group_conv2d_nhwc",
) -> Tensor:
    """Grouped 2-D convolution: kernel ``[KH, KW, C // groups, F]``; output channel ``f``
    reads the input channels of group ``f // (F // groups)``."""
    return _conv(data, kernel, 2, stride, padding, dilation, groups, out_dtype, name)


def depthwise_conv2d_nhwc(
    data: Tensor,
    kernel: Tensor,
    stride: IntOrSeq = 1,
    padding: Padding = 0,
    dilation: IntOrSeq = 1,
    out_dtype: str | None = None,
    name: str = "depthwise_conv2d_nhwc",
) -> Tensor:
    """Depthwise 2-D convolution: kernel ``[KH, KW, C, M]`` (or ``[KH, KW, C]``, M = 1);
    output channel ``c * M + m`` convolves input channel ``c`` with ``kernel[..., c, m]``."""
    check_tensor(data, name, "data", ndim=4)
    check_tensor(kernel, name, "kernel")
    if kernel.ndim not in (3, 4):
        raise ValueError(
            f"{name}: kernel must be [KH, KW, C, M] or [KH, KW, C], got {kernel.shape}"
        )
    C = data.shape[3]
    M = kernel.shape[3] if kernel.ndim == 4 else 1
    if kernel.shape[2] != C:
        raise ValueError(
            f"{name}: kernel {kernel.shape} has {kernel.shape[2]} channels but "
            f"data {data.shape} has {C}"
        )
    ks = kernel.shape[:2]
    strides, dilations, padded, out_sp = _prepare(data, ks, stride, padding, dilation, name)
    ry, rx = (reduce_axis((0, k), name=n) for k, n in zip(ks, _REDUCE[2]))

    def body(n, y, x, f):
        c = f if M == 1 else f // M
        a = to_dtype(
            padded[
                n,
                window_index(y, ry.var, strides[0], dilations[0]),
                window_index(x, rx.var, strides[1], dilations[1]),
                c,
            ],
            out_dtype,
        )
        if kernel.ndim == 3:
            w = kernel[ry, rx, c]
        else:
            w = kernel[ry, rx, c, 0 if M == 1 else f % M]
        return te_sum(a * to_dtype(w, out_dtype), axis=[ry, rx])

    shape = (data.shape[0], *out_sp, C * M)
    return compute(
        shape, named(("nn", "yy", "xx", "ff"), body), name=name, tag=name, attrs=layout_free(kernel)
    )


def conv2d_transpose_nhwc(
    data: Tensor,
    kernel: Tensor,
    stride: IntOrSeq = 1,
    padding: Padding = 0,
    output_padding: IntOrSeq = 0,
    out_dtype: str | None = None,
    name: str = "conv2d_transpose_nhwc",
) -> Tensor:
    """Transposed 2-D convolution (the gradient of conv2d_nhwc with respect to its input).

    data ``[N, H, W, C]``, kernel ``[KH, KW, C, F]`` -> ``[N, OH, OW, F]`` with
    ``OH = (H - 1) * stride - pad_top - pad_bottom + KH + output_padding``; ``padding``
    (each side at most ``K - 1``) crops the full result. Two blocks: ``data_pad`` spreads
    the input ``stride`` apart inside a border of ``K - 1 - pad`` zeros, then a stride-1
    convolution with the spatially flipped kernel.
    """
    check_tensor(data, name, "data", ndim=4)
    check_tensor(kernel, name, "kernel", ndim=4)
    KH, KW, C, F = kernel.shape
    if C != data.shape[3]:
        raise ValueError(
            f"{name}: kernel {kernel.shape} expects {C} input channels but data "
            f"{data.shape} has {data.shape[3]}"
        )
    strides = positive_tuple(stride, 2, name, "stride")
    out_pad = tuple(
        int(v)
        for v in ((output_padding,) * 2 if isinstance(output_padding, int) else output_padding)
    )
    if len(out_pad) != 2 or any(not 0 <= p < s for p, s in zip(out_pad, strides)):
        raise ValueError(
            f"{name}: output_padding {output_padding} must be two values in "
            f"[0, stride) with stride {strides}"
        )
    before, after = pad_tuple(padding, (KH, KW), (1, 1), name)
    ks = (KH, KW)
    if any(p > k - 1 for p, k in zip(before + after, ks + ks)):
        raise ValueError(
            f"{name}: padding {before + after} must be at most kernel - 1 = "
            f"{(KH - 1, KW - 1)} on each side"
        )
    lo = tuple(k - 1 - b for k, b in zip(ks, before))
    hi = tuple(k - 1 - a + p for k, a, p in zip(ks, after, out_pad))
    spread = tuple((s - 1) * st + 1 for s, st in zip(data.shape[1:3], strides))
    padded_shape = (data.shape[0], *(sp + l + h for sp, l, h in zip(spread, lo, hi)), data.shape[3])

    def pad_body(n, y, x, c):
        conds, src = spread_source((y, x), lo, spread, strides)
        return _op.if_then_else(
            _op.all(*conds), data[n, src[0], src[1], c], _op.cast(data.dtype, 0)
        )

    padded = compute(
        padded_shape,
        named(("i0", "i1", "i2", "i3"), pad_body),
        name="data_pad",
        tag="injective,pad",
    )
    ry, rx = (reduce_axis((0, k), name=n) for k, n in zip(ks, _REDUCE[2]))
    rc = reduce_axis((0, C), name="rc")

    def body(n, y, x, f):
        a = to_dtype(padded[n, y + ry.var, x + rx.var, rc], out_dtype)
        w = to_dtype(kernel[KH - 1 - ry.var, KW - 1 - rx.var, rc, f], out_dtype)
        return te_sum(a * w, axis=[ry, rx, rc])

    out_sp = tuple(p - k + 1 for p, k in zip(padded_shape[1:3], ks))
    shape = (data.shape[0], *out_sp, F)
    return compute(shape, named(("nn", "yy", "xx", "ff"), body), name=name, tag=name)
