"""Operators beyond the issue-10 suite (``benchmarks/extra_ops.py`` at small shapes): every
design space of the default llvm rules, sampled and postprocessed, compiles to C that
computes the result of the unscheduled function (the interpreter, numpy-based)."""

import numpy as np
import pytest

from metaschedule import te
from metaschedule.codegen import build
from metaschedule.postproc import Postproc
from metaschedule.search_strategy.base import TraceReplayer
from metaschedule.space_generator import PostOrderApply
from metaschedule.te import ops
from metaschedule.te.ops.nchw import conv2d_nchw
from metaschedule.tir.interpreter import interpret
from metaschedule.tune_context import TuneContext


def _ph(*shapes):
    return [te.placeholder(s, "float32", f"x{i}") for i, s in enumerate(shapes)]


def _conv_s2():
    x, w = _ph((1, 8, 8, 4), (3, 3, 4, 8))
    return [x, w, ops.conv2d_nhwc(x, w, stride=2, padding=1)]


def _conv_1x1():
    x, w = _ph((1, 6, 6, 8), (1, 1, 8, 16))
    return [x, w, ops.conv2d_nhwc(x, w)]


def _group_conv():
    x, w = _ph((1, 6, 6, 8), (3, 3, 4, 8))
    return [x, w, ops.group_conv2d_nhwc(x, w, padding=1, groups=2)]


def _conv_nchw():
    x, w = _ph((1, 4, 6, 6), (4, 4, 3, 3))
    return [x, w, conv2d_nchw(x, w, pads=(1, 1, 1, 1))]


def _conv_transpose():
    x, w = _ph((1, 4, 4, 4), (4, 4, 4, 4))
    return [x, w, ops.conv2d_transpose_nhwc(x, w, stride=2, padding=1)]


def _odd_matmul():
    a, b = _ph((7, 9), (9, 5))
    return [a, b, ops.matmul(a, b)]


def _batch_matmul_nn():
    a, b = _ph((2, 8, 4), (2, 4, 8))
    return [a, b, ops.batch_matmul(a, b)]


def _layer_norm():
    x, g, b = _ph((4, 24), (24,), (24,))
    return [x, g, b, ops.layer_norm(x, g, b)]


def _avg_pool():
    (x,) = _ph((1, 8, 8, 4))
    return [x, ops.avg_pool2d(x, 3, 2, padding=1)]


def _depthwise_s2():
    x, w = _ph((1, 10, 10, 16), (3, 3, 16))
    return [x, w, ops.depthwise_conv2d_nhwc(x, w, stride=2, padding=1)]


def _dense_batch1():
    x, w = _ph((1, 24), (40, 24))
    return [x, w, ops.dense(x, w)]


def _global_avg_pool():
    (x,) = _ph((1, 3, 3, 32))
    return [x, ops.global_avg_pool2d(x)]


def _row_sum():
    (x,) = _ph((8, 48))
    k = te.reduce_axis((0, 48), "k")
    return [x, te.compute((8,), lambda i: te.sum(x[i, k], axis=k), name="T_sum")]


OPERATORS = {
    "conv2d_stride2": _conv_s2,
    "conv2d_1x1": _conv_1x1,
    "group_conv2d": _group_conv,
    "conv2d_nchw": _conv_nchw,
    "conv2d_transpose": _conv_transpose,
    "odd_matmul": _odd_matmul,
    "batch_matmul_nn": _batch_matmul_nn,
    "layer_norm": _layer_norm,
    "avg_pool": _avg_pool,
    "row_sum": _row_sum,
    "depthwise_stride2": _depthwise_s2,
    "dense_batch1": _dense_batch1,
    "global_avg_pool": _global_avg_pool,
}


@pytest.mark.compiler
@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_every_sampled_schedule_computes_the_reference(name):
    func = te.create_prim_func(OPERATORS[name]())
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(p.static_shape()).astype("float32") for p in func.params]
    want = [a.copy() for a in args]
    interpret(func, *want)
    ctx = TuneContext(
        func, target="llvm -num-cores 2", space_generator=PostOrderApply(), rand_state=0
    )
    spaces = ctx.generate_design_space()
    replay = TraceReplayer(ctx.mod, Postproc.create("llvm"))
    checked = 0
    step = max(1, len(spaces) // 3)  # layer_norm has 9 spaces: a third of them
    for i, space in list(enumerate(spaces))[::step]:
        sch = replay(space.trace, 7 * i + 1)
        if sch is None:  # a postprocessor rejected the sample (e.g. too much parallelism)
            continue
        lib = build(sch.mod, "llvm -num-cores 2")
        got = lib.pack_weights(*[a.copy() for a in args])  # RewriteLayout's pre-packed weights
        lib(*got)
        np.testing.assert_allclose(got[-1], want[-1], rtol=1e-4, atol=1e-4, err_msg=f"space {i}")
        checked += 1
    assert checked >= 1, f"{name}: no sampled schedule passed the postprocessors"
