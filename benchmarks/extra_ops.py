"""Operators beyond the suite (``tune_ops.py --workloads extra``): the kind an outside check
tries. Each is written once against a ``te`` module, so metaschedule (``ms.te``) and TVM
(``tvm.te``) tune exactly the same blocks; weights are marked layout-free on both sides.

=========  =======================================================================
name       computation (float32, batch 1)
=========  =======================================================================
``c2s2``   conv2d NHWC 1x56x56x64 -> 128, 3x3, stride 2, pad 1
``c1x1``   conv2d NHWC 1x56x56x64 -> 256, 1x1
``stem``   conv2d NHWC 1x224x224x3 -> 64, 7x7, stride 2, pad 3
``gconv``  grouped conv2d NHWC 1x28x28x128 -> 128, 3x3, pad 1, 4 groups
``cnchw``  conv2d NCHW 1x64x56x56 -> 64, 3x3, pad 1 (OIHW kernel)
``convt``  conv2d_transpose NHWC 1x14x14x64 -> 32, 4x4, stride 2, pad 1 (-> 28x28)
``mmodd``  matmul ``A[127,511] @ B[511,255]``
``mm1k``   matmul 1000^3
``bmm``    batch matmul ``A[12,128,64] @ B[12,64,128]`` (no transpose)
``lnorm``  layer norm of ``[128,768]`` over the last axis, with gamma and beta
``rsum``   row sum of ``[512,1024]`` over the last axis
``ewc``    element-wise chain ``relu(x * y + z) * 0.5`` on ``[1024,1024]``
``apool``  average pool 3x3, stride 2, pad 1 (padding counted) on 1x56x56x64
``gemv``   dense of batch 1: ``x[1,768] @ W[3072,768]^T`` (W a weight)
``dw2``    depthwise conv2d NHWC 1x112x112x64, 3x3, stride 2, pad 1 (MobileNet)
``gap``    global average pool of 1x7x7x2048 to 1x1x1x2048 (ResNet-50's head)
=========  =======================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ExtraOp:
    name: str
    shapes: tuple[tuple[int, ...], ...]
    reduction: int  # terms summed per output (tolerance of the numeric check)
    what: str
    build: Callable[[Any, list[Any]], Any]  # (te module, inputs) -> output tensor
    reference: Callable[[list[Any]], Any]  # numpy
    layout_free: tuple[int, ...] = ()  # inputs that are weights


def _free(ins: list[Any], idx: tuple[int, ...]) -> dict[str, Any]:
    return {"layout_free_placeholders": [ins[i] for i in idx]} if idx else {}


def _pad_nhwc(te, x, p: int, name: str = "pad_temp"):
    n, h, w, c = (int(v) for v in x.shape)
    zero = te.const(0.0, "float32")
    return te.compute(
        (n, h + 2 * p, w + 2 * p, c),
        lambda i, y, z, ch: te.if_then_else(
            te.all(y >= p, y < h + p, z >= p, z < w + p), x[i, y - p, z - p, ch], zero
        ),
        name=name,
    )


def _conv_nhwc(stride: int, pad: int, groups: int = 1):
    def build(te, ins):
        x, w = ins
        n, h, wd, c = (int(v) for v in x.shape)
        kh, kw, cg, f = (int(v) for v in w.shape)
        xp = _pad_nhwc(te, x, pad) if pad else x
        oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
        fg = f // groups
        ry, rx, rc = (te.reduce_axis((0, e), nm) for e, nm in ((kh, "ry"), (kw, "rx"), (cg, "rc")))

        def chan(ff, rc):  # the input channel: within the group of output channel ff
            return ff // fg * cg + rc if groups > 1 else rc

        return te.compute(
            (n, oh, ow, f),
            lambda i, y, z, ff: te.sum(
                xp[i, y * stride + ry, z * stride + rx, chan(ff, rc)] * w[ry, rx, rc, ff],
                axis=[ry, rx, rc],
            ),
            name="conv2d_nhwc",
            attrs=_free(ins, (1,)),
        )

    return build


def _conv_nhwc_np(stride: int, pad: int, groups: int = 1):
    def ref(args):
        import numpy as np
        from numpy.lib.stride_tricks import sliding_window_view

        x, w = args
        kh, kw, cg, f = w.shape
        xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0))) if pad else x
        win = sliding_window_view(xp, (kh, kw), axis=(1, 2))[:, ::stride, ::stride]
        fg = f // groups
        outs = [
            np.tensordot(
                win[:, :, :, g * cg : (g + 1) * cg],
                w[:, :, :, g * fg : (g + 1) * fg].transpose(2, 0, 1, 3),
                axes=([3, 4, 5], [0, 1, 2]),
            )
            for g in range(groups)
        ]
        return np.concatenate(outs, axis=-1).astype(np.float32)

    return ref


def _conv_nchw(te, ins):
    x, w = ins
    zero = te.const(0.0, "float32")
    xp = te.compute(
        (1, 64, 58, 58),
        lambda i, c, y, z: te.if_then_else(
            te.all(y >= 1, y < 57, z >= 1, z < 57), x[i, c, y - 1, z - 1], zero
        ),
        name="pad_temp",
    )
    rc, ry, rx = (
        te.reduce_axis((0, 64), "rc"),
        te.reduce_axis((0, 3), "ry"),
        te.reduce_axis((0, 3), "rx"),
    )
    return te.compute(
        (1, 64, 56, 56),
        lambda i, f, y, z: te.sum(xp[i, rc, y + ry, z + rx] * w[f, rc, ry, rx], axis=[rc, ry, rx]),
        name="conv2d_nchw",
        attrs=_free(ins, (1,)),
    )


def _conv_nchw_np(args):
    x, w = args
    ref = _conv_nhwc_np(1, 1)([x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0)])
    return ref.transpose(0, 3, 1, 2).copy()


def _convt(te, ins):
    """conv2d_transpose as a gather: out[y] sums x[(y + p - ry) / s] * w[ry] where the
    division is exact (stride 2, 4x4 kernel, pad 1: 14x14 -> 28x28)."""
    x, w = ins  # x [1,14,14,64], w [4,4,64,32] (KH, KW, C, F)
    s, p, k = 2, 1, 4
    zero = te.const(0.0, "float32")
    # dilate + pad once (a block of its own, as topi does): index u of the padded,
    # dilated input holds x[(u - (k - 1 - p)) / s] when that is an integer in range
    lo = k - 1 - p
    size = 14 * s - 1 + 2 * lo  # 27 + 4 = 31
    xd = te.compute(
        (1, size, size, 64),
        lambda i, u, v, c: te.if_then_else(
            te.all(
                u >= lo,
                u < lo + 27,
                v >= lo,
                v < lo + 27,
                te.floormod(u - lo, s) == 0,
                te.floormod(v - lo, s) == 0,
            ),
            x[i, te.floordiv(u - lo, s), te.floordiv(v - lo, s), c],
            zero,
        ),
        name="data_dilate_pad",
    )
    ry, rx, rc = (
        te.reduce_axis((0, k), "ry"),
        te.reduce_axis((0, k), "rx"),
        te.reduce_axis((0, 64), "rc"),
    )
    return te.compute(
        (1, 28, 28, 32),
        lambda i, y, z, f: te.sum(
            xd[i, y + ry, z + rx, rc] * w[k - 1 - ry, k - 1 - rx, rc, f], axis=[ry, rx, rc]
        ),
        name="conv2d_transpose_nhwc",
        attrs=_free(ins, (1,)),
    )


def _convt_np(args):
    import numpy as np

    x, w = args
    out = np.zeros((1, 2 * 14 + 2, 2 * 14 + 2, 32), np.float32)  # before cropping the pad
    for ry in range(4):
        for rx in range(4):
            out[:, ry : ry + 28 : 2, rx : rx + 28 : 2, :] += np.tensordot(
                x, w[ry, rx], axes=([3], [0])
            )
    return out[:, 1:29, 1:29, :].copy()


def _matmul(te, ins):
    a, b = ins
    m, kk = (int(v) for v in a.shape)
    n = int(b.shape[1])
    k = te.reduce_axis((0, kk), "k")
    return te.compute((m, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="T_matmul")


def _bmm(te, ins):
    a, b = ins
    k = te.reduce_axis((0, 64), "k")
    return te.compute(
        (12, 128, 128),
        lambda q, i, j: te.sum(a[q, i, k] * b[q, k, j], axis=k),
        name="T_batch_matmul_NN",
    )


def _lnorm(te, ins):
    x, g, bt = ins
    inv = te.const(1.0 / 768, "float32")
    k1, k2 = te.reduce_axis((0, 768), "k1"), te.reduce_axis((0, 768), "k2")
    tot = te.compute((128,), lambda i: te.sum(x[i, k1], axis=k1), name="T_layer_norm_sum")
    var = te.compute(
        (128,),
        lambda i: te.sum((x[i, k2] - tot[i] * inv) * (x[i, k2] - tot[i] * inv), axis=k2),
        name="T_layer_norm_var",
    )
    return te.compute(
        (128, 768),
        lambda i, j: (
            (x[i, j] - tot[i] * inv) * te.rsqrt(var[i] * inv + te.const(1e-5, "float32")) * g[j]
            + bt[j]
        ),
        name="T_layer_norm",
    )


def _lnorm_np(args):
    import numpy as np

    x, g, b = args
    mu = x.mean(-1, keepdims=True)
    return ((x - mu) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b).astype(np.float32)


def _rsum(te, ins):
    (x,) = ins
    k = te.reduce_axis((0, 1024), "k")
    return te.compute((512,), lambda i: te.sum(x[i, k], axis=k), name="T_sum")


def _ewc(te, ins):
    x, y, z = ins
    zero, half = te.const(0.0, "float32"), te.const(0.5, "float32")
    t = te.compute((1024, 1024), lambda i, j: x[i, j] * y[i, j], name="T_multiply")
    u = te.compute((1024, 1024), lambda i, j: t[i, j] + z[i, j], name="T_add")
    v = te.compute((1024, 1024), lambda i, j: te.max(u[i, j], zero), name="T_relu")
    return te.compute((1024, 1024), lambda i, j: v[i, j] * half, name="T_multiply_1")


def _avg_pool(k: int, stride: int, pad: int):
    """An average pool ``k`` x ``k`` (padding counted), as topi writes it: a sum, then
    the division."""

    def build(te, ins):
        (x,) = ins
        n, h, w, c = (int(v) for v in x.shape)
        xp = _pad_nhwc(te, x, pad) if pad else x
        oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
        ry, rx = te.reduce_axis((0, k), "ry"), te.reduce_axis((0, k), "rx")
        s = te.compute(
            (n, oh, ow, c),
            lambda i, y, z, ch: te.sum(xp[i, y * stride + ry, z * stride + rx, ch], axis=[ry, rx]),
            name="pool_sum",
        )
        return te.compute(
            (n, oh, ow, c),
            lambda i, y, z, ch: s[i, y, z, ch] * te.const(1.0 / (k * k), "float32"),
            name="pool_avg",
        )

    return build


def _apool_np(args):
    import numpy as np
    from numpy.lib.stride_tricks import sliding_window_view

    xp = np.pad(args[0], ((0, 0), (1, 1), (1, 1), (0, 0)))
    return (sliding_window_view(xp, (3, 3), axis=(1, 2))[:, ::2, ::2].sum(axis=(4, 5)) / 9).astype(
        np.float32
    )


def _gemv(te, ins):
    x, w = ins
    k = te.reduce_axis((0, 768), "k")
    return te.compute(
        (1, 3072),
        lambda i, j: te.sum(x[i, k] * w[j, k], axis=k),
        name="T_dense",
        attrs=_free(ins, (1,)),
    )


def _dw2(te, ins):
    x, w = ins
    xp = _pad_nhwc(te, x, 1)
    ry, rx = te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    return te.compute(
        (1, 56, 56, 64),
        lambda i, y, z, c: te.sum(xp[i, y * 2 + ry, z * 2 + rx, c] * w[ry, rx, c], axis=[ry, rx]),
        name="depthwise_conv2d_nhwc",
        attrs=_free(ins, (1,)),
    )


def _dw2_np(args):
    import numpy as np
    from numpy.lib.stride_tricks import sliding_window_view

    x, w = args
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    win = sliding_window_view(xp, (3, 3), axis=(1, 2))[:, ::2, ::2]  # [1,56,56,64,3,3]
    return np.einsum("nhwcyx,yxc->nhwc", win, w).astype(np.float32)


def _np(fn: Callable[..., Any]) -> Callable[[list[Any]], Any]:
    def ref(args):
        import numpy as np

        return np.asarray(fn(np, *args), np.float32)

    return ref


EXTRA: dict[str, ExtraOp] = {
    op.name: op
    for op in (
        ExtraOp(
            "c2s2",
            ((1, 56, 56, 64), (3, 3, 64, 128)),
            576,
            "conv2d 1x56x56x64->128 3x3 s2 p1",
            _conv_nhwc(2, 1),
            _conv_nhwc_np(2, 1),
            (1,),
        ),
        ExtraOp(
            "c1x1",
            ((1, 56, 56, 64), (1, 1, 64, 256)),
            64,
            "conv2d 1x56x56x64->256 1x1",
            _conv_nhwc(1, 0),
            _conv_nhwc_np(1, 0),
            (1,),
        ),
        ExtraOp(
            "stem",
            ((1, 224, 224, 3), (7, 7, 3, 64)),
            147,
            "conv2d 1x224x224x3->64 7x7 s2 p3",
            _conv_nhwc(2, 3),
            _conv_nhwc_np(2, 3),
            (1,),
        ),
        ExtraOp(
            "gconv",
            ((1, 28, 28, 128), (3, 3, 32, 128)),
            288,
            "grouped conv2d 1x28x28x128->128 3x3 p1 g4",
            _conv_nhwc(1, 1, groups=4),
            _conv_nhwc_np(1, 1, groups=4),
            (1,),
        ),
        ExtraOp(
            "cnchw",
            ((1, 64, 56, 56), (64, 64, 3, 3)),
            576,
            "conv2d NCHW 1x64x56x56->64 3x3 p1",
            _conv_nchw,
            _conv_nchw_np,
            (1,),
        ),
        ExtraOp(
            "convt",
            ((1, 14, 14, 64), (4, 4, 64, 32)),
            1024,
            "conv2d_transpose 1x14x14x64->32 4x4 s2 p1",
            _convt,
            _convt_np,
            (1,),
        ),
        ExtraOp(
            "mmodd",
            ((127, 511), (511, 255)),
            511,
            "matmul 127x255x511",
            _matmul,
            _np(lambda np, a, b: a @ b),
        ),
        ExtraOp(
            "mm1k",
            ((1000, 1000), (1000, 1000)),
            1000,
            "matmul 1000^3",
            _matmul,
            _np(lambda np, a, b: a @ b),
        ),
        ExtraOp(
            "bmm",
            ((12, 128, 64), (12, 64, 128)),
            64,
            "batch matmul 12x128x64 @ 12x64x128",
            _bmm,
            _np(lambda np, a, b: a @ b),
        ),
        ExtraOp(
            "lnorm",
            ((128, 768), (768,), (768,)),
            768,
            "layer norm [128,768] last axis",
            _lnorm,
            _lnorm_np,
        ),
        ExtraOp(
            "rsum", ((512, 1024),), 1024, "row sum [512,1024]", _rsum, _np(lambda np, x: x.sum(-1))
        ),
        ExtraOp(
            "ewc",
            ((1024, 1024),) * 3,
            1,
            "relu(x*y+z)*0.5 on [1024,1024]",
            _ewc,
            _np(lambda np, x, y, z: np.maximum(x * y + z, 0) * 0.5),
        ),
        ExtraOp(
            "apool",
            ((1, 56, 56, 64),),
            9,
            "avg pool 3x3 s2 p1 on 1x56x56x64",
            _avg_pool(3, 2, 1),
            _apool_np,
        ),
        ExtraOp(
            "gemv",
            ((1, 768), (3072, 768)),
            768,
            "dense 1x768 by 3072x768^T",
            _gemv,
            _np(lambda np, x, w: x @ w.T),
            (1,),
        ),
        ExtraOp(
            "dw2",
            ((1, 112, 112, 64), (3, 3, 64)),
            9,
            "depthwise 1x112x112x64 3x3 s2 p1",
            _dw2,
            _dw2_np,
            (1,),
        ),
        ExtraOp(
            "gap",
            ((1, 7, 7, 2048),),
            49,
            "global avg pool 1x7x7x2048",
            _avg_pool(7, 1, 0),
            _np(lambda np, x: x.mean(axis=(1, 2), keepdims=True)),
        ),
    )
}


def tensors(name: str, te: Any) -> list[Any]:
    """Inputs then output of operator ``name`` built with ``te`` (``metaschedule.te`` or
    ``tvm.te``); ``te.create_prim_func`` of them is the workload."""
    op = EXTRA[name]
    ins = [te.placeholder(s, "float32", name=n) for s, n in zip(op.shapes, "ABCDEF")]
    return [*ins, op.build(te, ins)]
