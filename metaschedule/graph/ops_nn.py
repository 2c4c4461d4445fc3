"""Neural-network operators of the graph IR: convolutions, pooling, matmul, softmax,
layer norm and reductions, with their numpy references.

Convolutions and pooling are NCHW (OIHW kernels), as imported; with the attribute
``data_layout="NHWC"`` (and ``kernel_layout="HWIO"`` for conv2d) they are channels
last, as :func:`metaschedule.graph.layout.convert_layout` makes them. ``pads`` is
``(top, left, bottom, right)`` in both."""

from __future__ import annotations

import numpy as np

from ..te import ops as T
from ..te.ops import conv as conv_nhwc
from ..te.ops import linalg, nchw
from ..te.ops import pool as pool_nhwc
from ..te.ops import reduce as R
from .op import Pattern, register


def _windows(x: np.ndarray, kernel, strides, dilations) -> np.ndarray:
    """``[N, C, OH, OW, KH, KW]`` view of the windows of a (padded) NCHW array."""
    N, C, H, W = x.shape
    (KH, KW), (sh, sw), (dh, dw) = kernel, strides, dilations
    OH = (H - dh * (KH - 1) - 1) // sh + 1
    OW = (W - dw * (KW - 1) - 1) // sw + 1
    s = x.strides
    return np.lib.stride_tricks.as_strided(
        x,
        (N, C, OH, OW, KH, KW),
        (s[0], s[1], s[2] * sh, s[3] * sw, s[2] * dh, s[3] * dw),
        writeable=False,
    )


def _pad(x, pads, value=0.0, extra=(0, 0)):
    t, l, b, r = pads
    return np.pad(x, ((0, 0), (0, 0), (t, b + extra[0]), (l, r + extra[1])), constant_values=value)


def _conv_ref(a, at):
    x, w = a
    g = at["groups"]
    win = _windows(_pad(x, at["pads"]), w.shape[2:], at["strides"], at["dilations"])
    N, C, OH, OW = win.shape[:4]
    F = w.shape[0]
    win = win.reshape(N, g, C // g, OH, OW, *w.shape[2:])
    wg = w.reshape(g, F // g, C // g, *w.shape[2:])
    out = np.einsum("ngchwyx,gfcyx->ngfhw", win, wg, optimize=True)
    return np.ascontiguousarray(out.reshape(N, F, OH, OW)).astype(x.dtype)


def _conv_t_ref(a, at):
    x, w = a
    N, _C, H, W = x.shape
    _, F, KH, KW = w.shape
    (sh, sw), (dh, dw) = at["strides"], at["dilations"]
    full = np.zeros(
        (
            N,
            F,
            (H - 1) * sh + dh * (KH - 1) + 1 + at["output_padding"][0],
            (W - 1) * sw + dw * (KW - 1) + 1 + at["output_padding"][1],
        ),
        np.float64,
    )
    for ky in range(KH):
        for kx in range(KW):
            contrib = np.einsum("nchw,cf->nfhw", x, w[:, :, ky, kx])
            full[
                :,
                :,
                ky * dh : ky * dh + (H - 1) * sh + 1 : sh,
                kx * dw : kx * dw + (W - 1) * sw + 1 : sw,
            ] += contrib
    t, l, b, r = at["pads"]
    return np.ascontiguousarray(full[:, :, t : full.shape[2] - b, l : full.shape[3] - r]).astype(
        x.dtype
    )


def _nhwc(at) -> bool:
    layout = at.get("data_layout", "NCHW")
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"data_layout must be NCHW or NHWC, got {layout!r}")
    return layout == "NHWC"


def _to_nchw(x: np.ndarray) -> np.ndarray:
    return np.transpose(x, (0, 3, 1, 2))


def _to_nhwc(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(x, (0, 2, 3, 1)))


def _conv_lower(a, at):
    if not _nhwc(at):
        return nchw.conv2d_nchw(
            a[0], a[1], at["strides"], at["pads"], at["dilations"], at["groups"]
        )
    if at.get("kernel_layout", "HWIO") != "HWIO":
        raise ValueError(f"NHWC conv2d needs an HWIO kernel, got {at['kernel_layout']!r}")
    args = (a[0], a[1], at["strides"], at["pads"], at["dilations"])
    if at["groups"] == 1:
        return conv_nhwc.conv2d_nhwc(*args)
    return conv_nhwc.group_conv2d_nhwc(*args, groups=at["groups"])


def _conv_any_ref(a, at):
    if not _nhwc(at):
        return _conv_ref(a, at)
    x, w = a
    return _to_nhwc(_conv_ref([_to_nchw(x), np.transpose(w, (3, 2, 0, 1))], at))


register("conv2d", Pattern.OUT_EWISE_FUSABLE, _conv_lower, _conv_any_ref)
register(
    "conv2d_transpose",
    Pattern.OUT_EWISE_FUSABLE,
    lambda a, at: nchw.conv2d_transpose_nchw(
        a[0], a[1], at["strides"], at["pads"], at["output_padding"], at["dilations"]
    ),
    _conv_t_ref,
)


def _pool_out(size, k, s, d, lo, hi, ceil):
    span = size + lo + hi - d * (k - 1) - 1
    n = (-(-span // s) if ceil else span // s) + 1
    if ceil and (n - 1) * s >= size + lo:
        n -= 1
    return n


def _pool_ref(a, at, kind):
    x = a[0]
    k, st, pads = at["kernel"], at["strides"], at["pads"]
    dl = at.get("dilations", (1, 1))
    outs = [
        _pool_out(x.shape[2 + i], k[i], st[i], dl[i], pads[i], pads[i + 2], at["ceil_mode"])
        for i in range(2)
    ]
    extra = [
        max(0, (o - 1) * s + d * (kk - 1) + 1 - size - p0 - p1)
        for o, s, d, kk, size, p0, p1 in zip(outs, st, dl, k, x.shape[2:], pads[:2], pads[2:])
    ]
    if kind == "max":
        lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min  # 8-bit too
        win = _windows(_pad(x, pads, lowest, extra), k, st, dl)
        return np.ascontiguousarray(win.max(axis=(4, 5))).astype(x.dtype)
    win = _windows(_pad(x, pads, 0.0, extra), k, st, dl)
    total = win.sum(axis=(4, 5), dtype=np.float64)
    H, W = x.shape[2:]
    if at["count_include_pad"]:
        mask = np.pad(
            np.ones((1, 1, H + pads[0] + pads[2], W + pads[1] + pads[3])),
            ((0, 0), (0, 0), (0, extra[0]), (0, extra[1])),
        )
    else:
        mask = _pad(np.ones((1, 1, H, W)), pads, 0.0, extra)
    count = _windows(mask, k, st, dl).sum(axis=(4, 5))
    return (total / np.maximum(count, 1)).astype(x.dtype)


def _pool_lower(a, at, kind):
    nhwc = _nhwc(at)
    window = (a[0], at["kernel"], at["strides"], at["pads"])
    if kind == "max":
        pool = pool_nhwc.max_pool2d if nhwc else nchw.max_pool2d_nchw
        return pool(*window, at.get("dilations", (1, 1)), at["ceil_mode"])
    if nhwc:  # NHWC average pooling takes a dilation too (1: ONNX's has none)
        return pool_nhwc.avg_pool2d(*window, 1, at["ceil_mode"], at["count_include_pad"])
    return nchw.avg_pool2d_nchw(*window, at["ceil_mode"], at["count_include_pad"])


def _pool_any_ref(a, at, kind):
    if not _nhwc(at):
        return _pool_ref(a, at, kind)
    return _to_nhwc(_pool_ref([_to_nchw(a[0])], at, kind))


def _gap_ref(a, at):
    axes = (1, 2) if _nhwc(at) else (2, 3)
    return a[0].mean(axis=axes, keepdims=True, dtype=np.float64).astype(a[0].dtype)


register(
    "max_pool2d",
    Pattern.OUT_EWISE_FUSABLE,
    lambda a, at: _pool_lower(a, at, "max"),
    lambda a, at: _pool_any_ref(a, at, "max"),
)
register(
    "avg_pool2d",
    Pattern.OUT_EWISE_FUSABLE,
    lambda a, at: _pool_lower(a, at, "avg"),
    lambda a, at: _pool_any_ref(a, at, "avg"),
)
register(
    "global_avg_pool2d",
    Pattern.COMM_REDUCE,
    lambda a, at: (
        pool_nhwc.global_avg_pool2d(a[0]) if _nhwc(at) else nchw.global_avg_pool2d_nchw(a[0])
    ),
    _gap_ref,
)


def _matmul_lower(a, at):
    x, w = a
    tb = at.get("transpose_b", False)
    if x.ndim == 2 and w.ndim == 2:
        return T.matmul(x, w, transpose_b=tb, name="T_matmul")
    return linalg.matmul_nd(x, w, transpose_b=tb)


def _matmul_ref(a, at):
    x, w = a
    if at.get("transpose_b", False):
        w = np.swapaxes(w, -1, -2)
    return np.matmul(x, w).astype(np.result_type(x, w))


register("matmul", Pattern.OUT_EWISE_FUSABLE, _matmul_lower, _matmul_ref)


def _softmax_ref(a, at):
    x = a[0].astype(np.float64)
    e = np.exp(x - x.max(axis=at["axis"], keepdims=True))
    return (e / e.sum(axis=at["axis"], keepdims=True)).astype(a[0].dtype)


register("softmax", Pattern.COMM_REDUCE, lambda a, at: T.softmax(a[0], at["axis"]), _softmax_ref)


def _ln_ref(a, at):
    x = a[0].astype(np.float64)
    axes = tuple(range(x.ndim - len(a[1].shape), x.ndim)) if len(a) > 1 else (-1,)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + at["epsilon"])
    if len(a) > 1:
        y = y * a[1]
    if len(a) > 2:
        y = y + a[2]
    return y.astype(a[0].dtype)


def _ln_lower(a, at):
    x = a[0]
    gamma = a[1] if len(a) > 1 else None
    beta = a[2] if len(a) > 2 else None
    nd = gamma.ndim if gamma is not None else 1
    return T.layer_norm(
        x, gamma, beta, axis=list(range(x.ndim - nd, x.ndim)), epsilon=at["epsilon"]
    )


register("layer_norm", Pattern.COMM_REDUCE, _ln_lower, _ln_ref)

_NP_REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}


def _reduce_ref(a, at):
    axes = None if at["axes"] is None else tuple(at["axes"])
    out = _NP_REDUCE[at["kind"]](a[0], axis=axes, keepdims=at["keepdims"])
    return np.asarray(out).astype(a[0].dtype)


register(
    "reduce",
    Pattern.COMM_REDUCE,
    lambda a, at: R.reduce(a[0], at["kind"], at["axes"], at["keepdims"]),
    _reduce_ref,
)


# ----------------------------------------------------------------------------- more
# (log_softmax, instance_norm, more reductions, arg max/min; appended: te.ops.reduce_ext)
from ..te.ops import reduce_ext as _RX  # noqa: E402


def _log_softmax_ref(a, at):
    x = a[0].astype(np.float64)
    m = x.max(axis=at["axis"], keepdims=True)
    return (x - m - np.log(np.exp(x - m).sum(axis=at["axis"], keepdims=True))).astype(a[0].dtype)


register(
    "log_softmax",
    Pattern.COMM_REDUCE,
    lambda a, at: _RX.log_softmax(a[0], at["axis"]),
    _log_softmax_ref,
)


def _instance_norm_ref(a, at):
    x = a[0].astype(np.float64)
    ax = at.get("axis", 1)
    axes = tuple(d for d in range(1, x.ndim) if d != ax)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + at["epsilon"])
    shape = [1] * x.ndim
    shape[ax] = x.shape[ax]
    if len(a) > 1:
        y = y * a[1].reshape(shape)
    if len(a) > 2:
        y = y + a[2].reshape(shape)
    return y.astype(a[0].dtype)


register(
    "instance_norm",
    Pattern.COMM_REDUCE,
    lambda a, at: _RX.instance_norm(
        a[0],
        a[1] if len(a) > 1 else None,
        a[2] if len(a) > 2 else None,
        at.get("axis", 1),
        at["epsilon"],
    ),
    _instance_norm_ref,
)


def _reduce_ext_ref(kind):
    def ref(a, at):
        x = a[0]
        axes = None if at["axes"] is None else tuple(at["axes"])
        kd = at["keepdims"]
        v = x.astype(np.float64) if x.dtype.kind == "f" else x
        if kind == "prod":
            out = np.prod(v, axis=axes, keepdims=kd)
        elif kind == "l1":
            out = np.abs(v).sum(axis=axes, keepdims=kd)
        elif kind == "l2":
            out = np.sqrt((v * v).sum(axis=axes, keepdims=kd))
        elif kind == "sum_square":
            out = (v * v).sum(axis=axes, keepdims=kd)
        elif kind == "log_sum":
            out = np.log(v.sum(axis=axes, keepdims=kd))
        else:
            m = v.max(axis=axes, keepdims=True)
            out = np.log(np.exp(v - m).sum(axis=axes, keepdims=True)) + m
            if not kd:
                out = out.reshape(np.sum(v, axis=axes, keepdims=False).shape)
        return np.asarray(out).astype(x.dtype)

    return ref


for _kind in _RX.KINDS:
    register(
        f"reduce_{_kind}",
        Pattern.COMM_REDUCE,
        lambda a, at, k=_kind: _RX.reduce_ext(a[0], k, at["axes"], at["keepdims"]),
        _reduce_ext_ref(_kind),
    )


def _arg_ref(kind):
    def ref(a, at):
        x, ax = a[0], at["axis"]
        if at.get("select_last_index", False):
            n = x.shape[ax]
            flipped = np.flip(x, axis=ax)
            out = n - 1 - (np.argmax(flipped, axis=ax) if kind == "max" else np.argmin(flipped, ax))
        else:
            out = np.argmax(x, axis=ax) if kind == "max" else np.argmin(x, axis=ax)
        out = np.asarray(out, np.int64)
        return np.expand_dims(out, ax) if at["keepdims"] else out

    return ref


for _kind in ("max", "min"):
    register(
        f"arg{_kind}",
        Pattern.COMM_REDUCE,
        lambda a, at, k=_kind: _RX.arg_reduce(
            a[0], k, at["axis"], at["keepdims"], at.get("select_last_index", False)
        ),
        _arg_ref(_kind),
    )


def _cumsum_ref(a, at):
    x, ax = a[0], at["axis"]
    y = np.flip(x, ax) if at.get("reverse", False) else x
    out = np.cumsum(y, axis=ax, dtype=x.dtype)
    if at.get("exclusive", False):
        out = out - y
    return np.ascontiguousarray(np.flip(out, ax) if at.get("reverse", False) else out)


register(
    "cumsum",
    Pattern.COMM_REDUCE,
    lambda a, at: _RX.cumsum(
        a[0], at["axis"], at.get("exclusive", False), at.get("reverse", False)
    ),
    _cumsum_ref,
)
