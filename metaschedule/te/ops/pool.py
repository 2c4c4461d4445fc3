"""Pooling in NHWC: max_pool2d, avg_pool2d, global_avg_pool2d."""

from __future__ import annotations

from collections.abc import Sequence

from ...tir import op as _op
from ...tir.dtype import is_float
from ...tir.expr import PrimExpr, cast, const
from ..tensor import Tensor, compute, reduce_axis
from ..tensor import max as te_max
from ..tensor import sum as te_sum
from ._util import check_tensor, named, pad_tuple, positive_tuple, window_count, window_index
from .transform import pad

IntOrSeq = int | Sequence[int]


def _geometry(
    data: Tensor,
    kernel: IntOrSeq,
    stride: IntOrSeq,
    padding,
    dilation: IntOrSeq,
    ceil_mode: bool,
    op: str,
):
    """Kernel, strides, dilations, pads before, explicit pads after, total pads after, output."""
    check_tensor(data, op, "data", ndim=4)
    ks = positive_tuple(kernel, 2, op, "kernel")
    strides = positive_tuple(stride, 2, op, "stride")
    dilations = positive_tuple(dilation, 2, op, "dilation")
    before, after = pad_tuple(padding, ks, dilations, op)
    out, total_after = [], []
    for d in range(2):
        size, window = data.shape[1 + d], dilations[d] * (ks[d] - 1) + 1
        n = window_count(size, ks[d], strides[d], dilations[d], before[d], after[d], ceil_mode)
        if n is None:
            raise ValueError(
                f"{op}: window {ks} (dilation {dilations}) is larger than the "
                f"padded input {data.shape}"
            )
        out.append(n)
        total_after.append(max(after[d], (n - 1) * strides[d] + window - size - before[d]))
    return ks, strides, dilations, before, after, tuple(total_after), tuple(out)


def _pooled(data, ks, strides, dilations, before, total_after, fill, reducer):
    """The body of the window reduction (after a ``pad_temp`` block when padded)."""
    padded = data
    if any(before) or any(total_after):
        padded = pad(data, (0, *before, 0), (0, *total_after, 0), pad_value=fill, name="pad_temp")
    ry, rx = reduce_axis((0, ks[0]), name="rv0"), reduce_axis((0, ks[1]), name="rv1")

    def body(n, y, x, c):
        src = padded[
            n,
            window_index(y, ry.var, strides[0], dilations[0]),
            window_index(x, rx.var, strides[1], dilations[1]),
            c,
        ]
        return reducer(src, axis=[ry, rx])

    return body


def max_pool2d(
    data: Tensor,
    kernel: IntOrSeq,
    stride: IntOrSeq,
    padding=0,
    dilation: IntOrSeq = 1,
    ceil_mode: bool = False,
    name: str = "pool_max",
) -> Tensor:
    """Max pooling of NHWC ``data``; padding is filled with the dtype's lowest value."""
    ks, st, dl, before, _, total_after, out = _geometry(
        data, kernel, stride, padding, dilation, ceil_mode, "max_pool2d"
    )
    fill = float("-inf")
    body = _pooled(data, ks, st, dl, before, total_after, fill, te_max)
    shape = (data.shape[0], *out, data.shape[3])
    return compute(shape, named(("ax0", "ax1", "ax2", "ax3"), body), name=name, tag="pool_max")


def _count(o: PrimExpr, k: int, s: int, d: int, lo: int, hi: int) -> PrimExpr | int:
    """How many of the window positions ``o*s - pad + r*d`` (r < k) lie in ``[lo, hi)``.

    Positions are relative to the unpadded input; ``lo``/``hi`` are its valid bounds.
    """
    start = o * s - lo if s != 1 else o - lo  # first position, relative to lo
    span = hi - lo

    def ceildiv(e, n):
        return e if n == 1 else _op.floordiv(e + (n - 1), n)

    first = _op.max(ceildiv(-start, d), 0)
    last = _op.min(ceildiv(span - start, d), k)
    return _op.max(last - first, 0)


def avg_pool2d(
    data: Tensor,
    kernel: IntOrSeq,
    stride: IntOrSeq,
    padding=0,
    dilation: IntOrSeq = 1,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    name: str = "pool_avg",
) -> Tensor:
    """Average pooling of NHWC ``data``: a ``pool_sum`` block, then a ``pool_avg`` division.

    With ``count_include_pad`` the divisor counts the window positions inside the
    explicitly padded input (the extra ``ceil_mode`` border never counts), else only
    those inside the data, as in PyTorch and TVM.
    """
    check_tensor(data, "avg_pool2d", "data", ndim=4)
    if not is_float(data.dtype):
        raise TypeError(f"avg_pool2d needs a float tensor, got {data.name} of dtype {data.dtype}")
    ks, st, dl, before, after, total_after, out = _geometry(
        data, kernel, stride, padding, dilation, ceil_mode, "avg_pool2d"
    )
    body = _pooled(data, ks, st, dl, before, total_after, 0.0, te_sum)
    shape = (data.shape[0], *out, data.shape[3])
    pooled = compute(
        shape, named(("ax0", "ax1", "ax2", "ax3"), body), name="pool_sum", tag="pool_sum"
    )
    H, W = data.shape[1:3]
    constant = count_include_pad and total_after == after
    dtype = data.dtype

    def divide(n, y, x, c):
        if constant:
            return pooled[n, y, x, c] / const(ks[0] * ks[1], dtype)
        if count_include_pad:
            bounds = [(-before[0], H + after[0]), (-before[1], W + after[1])]
        else:
            bounds = [(0, H), (0, W)]
        counts = [
            _count(o, k, s, d, lo + b, hi + b)
            for o, k, s, d, (lo, hi), b in zip((y, x), ks, st, dl, bounds, before)
        ]
        count = counts[0] * counts[1]
        return pooled[n, y, x, c] / cast(dtype, _op.max(count, 1))

    return compute(shape, named(("ax0", "ax1", "ax2", "ax3"), divide), name=name, tag="elemwise")


def global_avg_pool2d(data: Tensor, name: str = "adaptive_pool_avg") -> Tensor:
    """Mean over H and W of NHWC ``data``, keeping them as size-1 dimensions."""
    check_tensor(data, "global_avg_pool2d", "data", ndim=4)
    N, H, W, C = data.shape
    ry, rx = reduce_axis((0, H), name="rv0"), reduce_axis((0, W), name="rv1")
    summed = compute(
        (N, 1, 1, C),
        named(
            ("ax0", "ax1", "ax2", "ax3"),
            lambda n, y, x, c: te_sum(data[n, y + ry.var, x + rx.var, c], axis=[ry, rx]),
        ),
        name="adaptive_pool_sum",
        tag="adaptive_pool_sum",
    )
    return compute(
        (N, 1, 1, C),
        named(
            ("ax0", "ax1", "ax2", "ax3"),
            lambda n, y, x, c: summed[n, y, x, c] / const(H * W, data.dtype),
        ),
        name=name,
        tag="elemwise",
    )
