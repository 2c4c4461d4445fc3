"""The operator suite of ``tune_ops.py`` (issue 10): one definition per operator, shared by
metaschedule, TVM (``tvm.te``, the same blocks), numpy, PyTorch and onnxruntime.

=======  ============================================================================
name     computation (float32, batch 1)
=======  ============================================================================
``gmm``  matmul ``A[1024,1024] @ B[1024,1024]``
``c2d``  conv2d NHWC 1x56x56x64 -> 64, 3x3, pad 1 (HWIO kernel)
``dep``  depthwise conv2d NHWC 1x112x112x32, 3x3, pad 1 (kernel ``[3,3,32]``)
``cbr``  conv2d 1x28x28x128 -> 128, 3x3, pad 1, + bias + relu in one function
``tbg``  batch matmul ``Q[12,128,64] @ K[12,128,64]^T``
``sfm``  softmax of ``[128,1024]`` over the last axis
``dns``  dense ``X[128,768] @ W[3072,768]^T + bias``, then GELU (tanh form)
``pool`` max pool 3x3, stride 2, no padding, on 1x112x112x64
=======  ============================================================================

Each :class:`SuiteOp` gives its input shapes, the reduction length (for the numeric
tolerance), the tensors in ``ms.te`` and in ``tvm.te``, a numpy reference, and callables
for the baselines that have the operator (None where a library lacks it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_GELU_C = math.sqrt(2.0 / math.pi)


@dataclass(frozen=True)
class SuiteOp:
    name: str
    shapes: tuple[tuple[int, ...], ...]
    reduction: int  # terms summed per output (tolerance of the numeric check)
    what: str


SUITE: dict[str, SuiteOp] = {
    op.name: op
    for op in (
        SuiteOp("gmm", ((1024, 1024), (1024, 1024)), 1024, "matmul 1024^3"),
        SuiteOp("c2d", ((1, 56, 56, 64), (3, 3, 64, 64)), 576, "conv2d 1x56x56x64->64 3x3 p1"),
        SuiteOp("dep", ((1, 112, 112, 32), (3, 3, 32)), 9, "depthwise 1x112x112x32 3x3 p1"),
        SuiteOp(
            "cbr",
            ((1, 28, 28, 128), (3, 3, 128, 128), (128,)),
            1152,
            "conv2d 1x28x28x128->128 3x3 p1 + bias + relu",
        ),
        SuiteOp("tbg", ((12, 128, 64), (12, 128, 64)), 64, "batch matmul Q @ K^T, 12x128x64"),
        SuiteOp("sfm", ((128, 1024),), 1024, "softmax [128,1024] last axis"),
        SuiteOp(
            "dns",
            ((128, 768), (3072, 768), (3072,)),
            768,
            "dense 128x768 @ (3072x768)^T + bias + GELU",
        ),
        SuiteOp("pool", ((1, 112, 112, 64),), 9, "max pool 3x3 s2 on 1x112x112x64"),
    )
}


# ----------------------------------------------------------------------------- numpy
def _pad_hw(x, p: int):
    import numpy as np

    return np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))


def _conv_np(x, w, pad: int):
    from numpy.lib.stride_tricks import sliding_window_view

    win = sliding_window_view(_pad_hw(x, pad), (w.shape[0], w.shape[1]), axis=(1, 2))
    return __import__("numpy").tensordot(win, w.transpose(2, 0, 1, 3), axes=([3, 4, 5], [0, 1, 2]))


def _depthwise_np(x, w):
    import numpy as np

    xp = _pad_hw(x, 1)
    h, wd = x.shape[1], x.shape[2]
    out = np.zeros_like(x)
    for ry in range(3):
        for rx in range(3):
            out += xp[:, ry : ry + h, rx : rx + wd, :] * w[ry, rx]
    return out


def _gelu_np(y):
    import numpy as np

    return y * 0.5 * (np.tanh((y + y * y * y * 0.044715) * _GELU_C) + 1.0)


def _softmax_np(x):
    import numpy as np

    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _pool_np(x):
    from numpy.lib.stride_tricks import sliding_window_view

    return sliding_window_view(x, (3, 3), axis=(1, 2))[:, ::2, ::2].max(axis=(4, 5))


def reference(name: str, args: list[Any]) -> Any:
    """The result computed with numpy; the numpy baseline times this same function."""
    import numpy as np

    if name == "gmm":
        return np.matmul(args[0], args[1])
    if name == "c2d":
        return _conv_np(args[0], args[1], 1)
    if name == "dep":
        return _depthwise_np(args[0], args[1])
    if name == "cbr":
        return np.maximum(_conv_np(args[0], args[1], 1) + args[2], 0.0).astype(np.float32)
    if name == "tbg":
        return np.matmul(args[0], args[1].transpose(0, 2, 1))
    if name == "sfm":
        return _softmax_np(args[0])
    if name == "dns":
        return _gelu_np(args[0] @ args[1].T + args[2]).astype(np.float32)
    if name == "pool":
        return _pool_np(args[0])
    raise KeyError(name)


NUMPY_WHAT = {
    "gmm": "np.matmul",
    "c2d": "im2col view + np.tensordot",
    "dep": "9 shifted multiply-adds",
    "cbr": "im2col + tensordot + bias + relu",
    "tbg": "np.matmul(Q, K^T)",
    "sfm": "exp / sum",
    "dns": "X @ W.T + b, gelu",
    "pool": "window view + max",
}


# ----------------------------------------------------------------------------- metaschedule
def ms_tensors(name: str) -> list[Any]:
    """Inputs then output, as ``ms.te`` tensors (``te.create_prim_func`` of them is the
    workload). The operators mark the weights of c2d, dep, cbr and dns layout-free (TVM's
    ``layout_free_placeholders``), so RewriteLayout may have the tuned kernel take them
    pre-packed: pack them with ``lib.pack_weights`` before timing."""
    from metaschedule import te
    from metaschedule.te import ops

    op = SUITE[name]
    ins = [te.placeholder(s, "float32", n) for s, n in zip(op.shapes, ("A", "B", "C"))]
    if name == "gmm":
        out = ops.matmul(ins[0], ins[1])
    elif name == "c2d":
        out = ops.conv2d_nhwc(ins[0], ins[1], stride=1, padding=1)
    elif name == "dep":
        out = ops.depthwise_conv2d_nhwc(ins[0], ins[1], stride=1, padding=1)
    elif name == "cbr":
        out = ops.relu(
            ops.bias_add(ops.conv2d_nhwc(ins[0], ins[1], stride=1, padding=1), ins[2], axis=-1)
        )
    elif name == "tbg":
        out = ops.batch_matmul(ins[0], ins[1], transpose_b=True)
    elif name == "sfm":
        out = ops.softmax(ins[0], axis=-1)
    elif name == "dns":
        out = ops.gelu(ops.dense(ins[0], ins[1], ins[2]))
    elif name == "pool":
        out = ops.max_pool2d(ins[0], 3, 2)
    else:
        raise KeyError(name)
    return [*ins, out]


# ----------------------------------------------------------------------------- TVM
def tvm_tensors(name: str) -> list[Any]:
    """The same blocks in ``tvm.te`` (padding as its own block, like ``ms.te.ops``; the
    weights of c2d, dep, cbr and dns layout-free, as ``ms.te.ops`` marks them)."""
    import tvm
    from tvm import te

    op = SUITE[name]
    ins = [te.placeholder(s, "float32", name=n) for s, n in zip(op.shapes, ("A", "B", "C"))]
    zero = tvm.tirx.const(0.0, "float32")

    def free(w):  # the weight may be re-laid out ahead of time: TVM's RewriteLayout acts
        return {"layout_free_placeholders": [w]}

    def pad(x, p):
        n, h, w, c = (int(v) for v in x.shape)
        return te.compute(
            (n, h + 2 * p, w + 2 * p, c),
            lambda i, y, z, ch: te.if_then_else(
                te.all(y >= p, y < h + p, z >= p, z < w + p), x[i, y - p, z - p, ch], zero
            ),
            name="pad_temp",
        )

    def conv(x, w):
        xp = pad(x, 1)
        n, h, wd, c = (int(v) for v in x.shape)
        f = int(w.shape[3])
        ry, rx, rc = (te.reduce_axis((0, e), nm) for e, nm in ((3, "ry"), (3, "rx"), (c, "rc")))
        return te.compute(
            (n, h, wd, f),
            lambda i, y, z, ff: te.sum(
                xp[i, y + ry, z + rx, rc] * w[ry, rx, rc, ff], axis=[ry, rx, rc]
            ),
            name="conv2d_nhwc",
            attrs=free(w),
        )

    if name == "gmm":
        k = te.reduce_axis((0, 1024), "k")
        out = te.compute(
            (1024, 1024), lambda i, j: te.sum(ins[0][i, k] * ins[1][k, j], axis=k), name="T_matmul"
        )
    elif name == "c2d":
        out = conv(ins[0], ins[1])
    elif name == "dep":
        xp = pad(ins[0], 1)
        ry, rx = te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
        out = te.compute(
            (1, 112, 112, 32),
            lambda i, y, z, c: te.sum(xp[i, y + ry, z + rx, c] * ins[1][ry, rx, c], axis=[ry, rx]),
            name="depthwise_conv2d_nhwc",
            attrs=free(ins[1]),
        )
    elif name == "cbr":
        c = conv(ins[0], ins[1])
        b = te.compute(c.shape, lambda i, y, z, f: c[i, y, z, f] + ins[2][f], name="T_add")
        out = te.compute(c.shape, lambda *i: te.max(b(*i), zero), name="T_relu")
    elif name == "tbg":
        k = te.reduce_axis((0, 64), "k")
        out = te.compute(
            (12, 128, 128),
            lambda b, i, j: te.sum(ins[0][b, i, k] * ins[1][b, j, k], axis=k),
            name="T_batch_matmul_NT",
        )
    elif name == "sfm":
        x = ins[0]
        k1, k2 = te.reduce_axis((0, 1024), "k"), te.reduce_axis((0, 1024), "k")
        mx = te.compute((128,), lambda i: te.max(x[i, k1], axis=k1), name="T_softmax_maxelem")
        ex = te.compute((128, 1024), lambda i, j: te.exp(x[i, j] - mx[i]), name="T_softmax_exp")
        sm = te.compute((128,), lambda i: te.sum(ex[i, k2], axis=k2), name="T_softmax_expsum")
        out = te.compute((128, 1024), lambda i, j: ex[i, j] / sm[i], name="T_softmax_norm")
    elif name == "dns":
        k = te.reduce_axis((0, 768), "k")
        d = te.compute(
            (128, 3072),
            lambda i, j: te.sum(ins[0][i, k] * ins[1][j, k], axis=k),
            name="T_dense",
            attrs=free(ins[1]),
        )
        b = te.compute(d.shape, lambda i, j: d[i, j] + ins[2][j], name="T_add")

        def gelu(i, j):
            v = b[i, j]
            return v * 0.5 * (te.tanh((v + v * v * v * 0.044715) * _GELU_C) + 1.0)

        out = te.compute(d.shape, gelu, name="T_gelu")
    elif name == "pool":
        x = ins[0]
        ry, rx = te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
        out = te.compute(
            (1, 55, 55, 64),
            lambda i, y, z, c: te.max(x[i, y * 2 + ry, z * 2 + rx, c], axis=[ry, rx]),
            name="pool_max",
        )
    else:
        raise KeyError(name)
    return [*ins, out]


# ----------------------------------------------------------------------------- PyTorch
def torch_call(
    name: str, args: list[Any], torch: Any
) -> tuple[Callable[[], Any], str, Callable[[Any], Any]]:
    """``(fn, what, to_numpy)``: ``fn()`` computes the operator with PyTorch on tensors made
    once from ``args``; ``to_numpy(fn())`` is comparable with :func:`reference`."""
    import numpy as np
    import torch.nn.functional as F

    t = [torch.from_numpy(np.ascontiguousarray(a)) for a in args]

    def nhwc(x):  # NHWC numpy -> NCHW tensor stored channels-last
        return torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2))).contiguous(
            memory_format=torch.channels_last
        )

    def back(y):
        return y.permute(0, 2, 3, 1).numpy()

    plain = lambda y: y.numpy()
    if name == "gmm":
        return (lambda: torch.matmul(t[0], t[1])), "torch.matmul", plain
    if name in ("c2d", "cbr"):
        x = nhwc(args[0])
        w = torch.from_numpy(np.ascontiguousarray(args[1].transpose(3, 2, 0, 1)))
        if name == "c2d":
            return (lambda: F.conv2d(x, w, padding=1)), "F.conv2d (channels_last)", back
        return (
            (lambda: F.relu(F.conv2d(x, w, t[2], padding=1))),
            "relu(F.conv2d + bias) (channels_last)",
            back,
        )
    if name == "dep":
        x = nhwc(args[0])
        w = torch.from_numpy(np.ascontiguousarray(args[1].transpose(2, 0, 1)[:, None]))
        return (lambda: F.conv2d(x, w, padding=1, groups=32)), "F.conv2d groups=32", back
    if name == "tbg":
        return (lambda: torch.matmul(t[0], t[1].transpose(1, 2))), "torch.matmul(Q, K^T)", plain
    if name == "sfm":
        return (lambda: F.softmax(t[0], dim=-1)), "F.softmax", plain
    if name == "dns":
        return (
            (lambda: F.gelu(F.linear(t[0], t[1], t[2]), approximate="tanh")),
            "gelu(F.linear)",
            plain,
        )
    if name == "pool":
        x = nhwc(args[0])
        return (lambda: F.max_pool2d(x, 3, 2)), "F.max_pool2d", back
    raise KeyError(name)


# ----------------------------------------------------------------------------- onnxruntime
def onnx_model(name: str, args: list[Any]) -> tuple[Any, dict[str, Any], str, Callable[[Any], Any]]:
    """``(model, feed, what, to_numpy)``: an ONNX model of the operator (weights as
    initializers, activations as inputs), its feed, and the conversion of its output."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, extra = [], [], []
    feed: dict[str, Any] = {}
    plain = lambda y: y

    def const(nm, value):
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), nm))
        return nm

    to = plain
    if name == "gmm":
        feed["A"] = args[0]
        const("B", args[1])
        nodes.append(helper.make_node("MatMul", ["A", "B"], ["Y"]))
        what = "MatMul"
    elif name in ("c2d", "cbr", "dep"):
        feed["A"] = np.ascontiguousarray(args[0].transpose(0, 3, 1, 2))
        if name == "dep":
            const("B", args[1].transpose(2, 0, 1)[:, None])
            nodes.append(
                helper.make_node(
                    "Conv", ["A", "B"], ["Y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=32
                )
            )
            what = "Conv group=32 (NCHW)"
        else:
            const("B", args[1].transpose(3, 2, 0, 1))
            ins = ["A", "B"] + ([const("bias", args[2])] if name == "cbr" else [])
            out = "Z" if name == "cbr" else "Y"
            nodes.append(
                helper.make_node("Conv", ins, [out], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
            )
            if name == "cbr":
                nodes.append(helper.make_node("Relu", ["Z"], ["Y"]))
            what = "Conv (NCHW)" + (" + Relu" if name == "cbr" else "")
        to = lambda y: y.transpose(0, 2, 3, 1)
    elif name == "tbg":
        feed["A"], feed["B"] = args[0], args[1]
        nodes += [
            helper.make_node("Transpose", ["B"], ["BT"], perm=[0, 2, 1]),
            helper.make_node("MatMul", ["A", "BT"], ["Y"]),
        ]
        what = "Transpose + MatMul"
    elif name == "sfm":
        feed["A"] = args[0]
        nodes.append(helper.make_node("Softmax", ["A"], ["Y"], axis=-1))
        what = "Softmax"
    elif name == "dns":
        feed["A"] = args[0]
        const("B", args[1])
        const("bias", args[2])
        const("c044", 0.044715)
        const("cs", _GELU_C)
        const("half", 0.5)
        const("one", 1.0)
        nodes += [
            helper.make_node("Gemm", ["A", "B", "bias"], ["G"], transB=1),
            helper.make_node("Mul", ["G", "G"], ["G2"]),
            helper.make_node("Mul", ["G2", "G"], ["G3"]),
            helper.make_node("Mul", ["G3", "c044"], ["G3c"]),
            helper.make_node("Add", ["G", "G3c"], ["In0"]),
            helper.make_node("Mul", ["In0", "cs"], ["In"]),
            helper.make_node("Tanh", ["In"], ["T"]),
            helper.make_node("Add", ["T", "one"], ["T1"]),
            helper.make_node("Mul", ["G", "half"], ["Gh"]),
            helper.make_node("Mul", ["Gh", "T1"], ["Y"]),
        ]
        what = "Gemm(transB) + tanh-GELU ops"
    elif name == "pool":
        feed["A"] = np.ascontiguousarray(args[0].transpose(0, 3, 1, 2))
        nodes.append(helper.make_node("MaxPool", ["A"], ["Y"], kernel_shape=[3, 3], strides=[2, 2]))
        what = "MaxPool (NCHW)"
        to = lambda y: y.transpose(0, 2, 3, 1)
    else:
        raise KeyError(name)
    expected = reference(name, args)
    out_shape = list(expected.shape)
    if to is not plain:
        out_shape = [out_shape[0], out_shape[3], out_shape[1], out_shape[2]]
    inputs = [
        helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in feed.items()
    ]
    graph = helper.make_graph(
        nodes,
        name,
        inputs,
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, out_shape)],
        initializer=inits + extra,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 9)
    return model, feed, what, to
