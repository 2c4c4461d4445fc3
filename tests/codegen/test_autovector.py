"""A loop nest the schedule left without a vector loop gets one in the C back end
(``codegen/c_autovector.py``): the deepest loop whose iterations write distinct, adjacent
elements moves innermost and is vectorized, only where that changes no result."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metaschedule import te, tir
from metaschedule.codegen import c_codegen
from metaschedule.codegen.c_autovector import vectorize_scalar_nests, widen_vector_loops
from metaschedule.target import Target
from metaschedule.te import ops
from metaschedule.testing import RandomArrays, build_and_run
from metaschedule.tir.stmt import For, ForKind
from metaschedule.tir.transform import lower

CPU = Target("llvm -mcpu=x86-64-v4 -num-cores=1")  # AVX-512 (testing.isas)
rand = RandomArrays(5)

pytestmark = pytest.mark.usefixtures("session_kernel_cache")


def _depthwise(h: int, w: int, c: int, stride: int = 1):
    x = te.placeholder((1, h, w, c), "float32", "X")
    k = te.placeholder((3, 3, c), "float32", "K")
    out = ops.depthwise_conv2d_nhwc(x, k, stride=stride, padding=1)
    return te.create_prim_func([x, k, out])


def _depthwise_np(x, k, stride: int = 1):
    n, h, w, c = x.shape
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    ho, wo = (h - 1) // stride + 1, (w - 1) // stride + 1
    out = np.zeros((n, ho, wo, c), "float32")
    for ry in range(3):
        for rx in range(3):
            out += xp[:, ry : ry + stride * ho : stride, rx : rx + stride * wo : stride] * k[ry, rx]
    return out


def _channels_outside(factors: tuple[int, int], rows: int = 2, stride: int = 1) -> tir.Schedule:
    """A depthwise tile with no channel loop innermost: channels split by ``factors``
    (the inner one over the window), ``rows`` output rows innermost, padding inlined."""
    sch = tir.Schedule(_depthwise(8, 8, 32, stride))
    block = sch.get_block("depthwise_conv2d_nhwc")
    sch.compute_inline(sch.get_block("PaddedInput"))
    n, y, x, c, ry, rx = sch.get_loops(block)
    y0, y1 = sch.split(y, [None, rows])
    c0, c1 = sch.split(c, list(factors))
    sch.reorder(n, y0, x, c0, c1, ry, rx, y1)  # the channels above the window and rows
    sch.decompose_reduction(block, ry)
    return sch


@pytest.mark.compiler
def test_a_channel_loop_above_the_window_becomes_the_vector_loop():
    sch = _channels_outside((2, 16))
    x, k = rand(1, 8, 8, 32), rand(3, 3, 32)
    src, (*_, out) = build_and_run(sch.mod, x, k, np.zeros((1, 8, 8, 32), "float32"), target=CPU)
    np.testing.assert_allclose(out, _depthwise_np(x, k), rtol=1e-4, atol=1e-4)
    # the 16 channels are the lanes, the window and the 2 rows around them: a register
    # tile of 2 accumulators of 16 lanes, no scalar loop over the channels left
    assert "kept in 2 accumulators of 16 lanes" in src
    assert not re.search(r"for \(int32_t ff_1 = 0; ff_1 < 16;", src)


@pytest.mark.compiler
def test_the_switch_off_leaves_scalar_code_with_the_same_numbers():
    sch = _channels_outside((2, 16))
    x, k = rand(1, 8, 8, 32), rand(3, 3, 32)
    src_on, (*_, on) = build_and_run(sch.mod, x, k, np.zeros((1, 8, 8, 32), "float32"), target=CPU)
    try:
        c_codegen.AUTO_VECTORIZE = False
        src_off, (*_, off) = build_and_run(
            sch.mod, x, k, np.zeros((1, 8, 8, 32), "float32"), target=CPU
        )
    finally:
        c_codegen.AUTO_VECTORIZE = True
    assert "ms_f32x16" in src_on
    assert "ms_f32x16" not in src_off
    # each element gets the same updates in the same order: the same bits
    np.testing.assert_array_equal(on, off)


def _chain_kinds(body) -> list[tuple[str, ForKind]]:
    out = []
    while isinstance(body, For) or hasattr(body, "body") or hasattr(body, "seq"):
        if isinstance(body, For):
            out.append((body.loop_var.name, body.kind))
        body = body.seq[-1] if hasattr(body, "seq") else body.body
    return out


def test_the_moved_loop_is_innermost_and_vectorized():
    sch = _channels_outside((2, 16))
    body = vectorize_scalar_nests(lower(sch.mod["main"]).body)
    kinds = _chain_kinds(body)  # the update nest (the last one)
    assert kinds[-1] == ("ff_1", ForKind.VECTORIZED)
    assert [k for _, k in kinds].count(ForKind.VECTORIZED) == 1


def _shifted_sum(n: int, taps: int):
    """``out[i + r] += x[i] * w[r]``: a loop over ``i`` with unit stride whose iterations
    write overlapping elements through ``r``."""
    x = tir.decl_buffer((n,), "float32", "X")
    w = tir.decl_buffer((taps,), "float32", "W")
    out = tir.decl_buffer((n + taps - 1,), "float32", "Out")
    i, r = tir.Var("i", "int32"), tir.Var("r", "int32")
    store = tir.BufferStore(
        out,
        out[i + r] + x[i] * w[r],
        (i + r,),
    )
    body = For(i, 0, n, ForKind.SERIAL, For(r, 0, taps, ForKind.SERIAL, store))
    return body


def test_a_loop_whose_iterations_write_the_same_elements_stays():
    body = _shifted_sum(16, 3)
    assert vectorize_scalar_nests(body) is body


def test_an_innermost_unit_stride_loop_is_left_to_the_schedule():
    x = tir.decl_buffer((4, 16), "float32", "X")
    out = tir.decl_buffer((4, 16), "float32", "Out")
    i, j = tir.Var("i", "int32"), tir.Var("j", "int32")
    body = For(
        i, 0, 4, ForKind.SERIAL,
        For(j, 0, 16, ForKind.SERIAL, tir.BufferStore(out, x[i, j] * 2.0, (i, j))),
    )  # fmt: skip
    assert vectorize_scalar_nests(body) is body


@pytest.mark.compiler
@settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    outer=st.sampled_from([1, 2, 4, 8]),
    rows=st.sampled_from([1, 2, 4]),
    stride=st.sampled_from([1, 2]),
)
def test_channel_tiles_without_a_vector_loop_compute_the_numpy_result(outer, rows, stride):
    sch = _channels_outside((outer, 32 // outer), rows=rows if stride == 1 else 1, stride=stride)
    x, k = rand(1, 8, 8, 32), rand(3, 3, 32)
    want = _depthwise_np(x, k, stride)
    _, (*_, out) = build_and_run(sch.mod, x, k, np.zeros(want.shape, "float32"), target=CPU)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=str(sch.trace))


def _narrow_vector(outer: int, inner: int) -> tir.Schedule:
    """A depthwise tile whose vector loop is the ``inner`` channels under the window,
    ``outer`` channel groups above the window (TVM's second-best ``dw2`` record)."""
    sch = tir.Schedule(_depthwise(8, 8, 64))
    block = sch.get_block("depthwise_conv2d_nhwc")
    sch.compute_inline(sch.get_block("PaddedInput"))
    n, y, x, c, ry, rx = sch.get_loops(block)
    c0, c1, c2 = sch.split(c, [None, outer, inner])
    sch.reorder(n, y, x, c0, ry, rx, c1, c2)
    sch.decompose_reduction(block, ry)
    sch.vectorize(c2)
    return sch


@pytest.mark.compiler
def test_a_narrow_vector_loop_is_widened_by_the_loop_above_it():
    sch = _narrow_vector(16, 4)
    x, k = rand(1, 8, 8, 64), rand(3, 3, 64)
    src, (*_, out) = build_and_run(sch.mod, x, k, np.zeros((1, 8, 8, 64), "float32"), target=CPU)
    np.testing.assert_allclose(out, _depthwise_np(x, k), rtol=1e-4, atol=1e-4)
    # 16 groups of 4 channels: one run of 64 lanes, four full vectors, no 4-lane vector
    assert "kept in 4 accumulators of 16 lanes" in src
    assert "ms_f32x4" not in src
    try:
        c_codegen.AUTO_VECTORIZE = False
        _, (*_, off) = build_and_run(sch.mod, x, k, np.zeros((1, 8, 8, 64), "float32"), target=CPU)
    finally:
        c_codegen.AUTO_VECTORIZE = True
    np.testing.assert_array_equal(out, off)


def test_a_wide_enough_vector_loop_or_a_strided_one_stays():
    body = lower(_narrow_vector(4, 16).mod["main"]).body  # 16 lanes: native already
    assert widen_vector_loops(body, 64) is body
    # the loop above moves an access by other than the vector loop's extent
    x = tir.decl_buffer((8, 8), "float32", "X")
    out = tir.decl_buffer((8, 8), "float32", "Out")
    i, j = tir.Var("i", "int32"), tir.Var("j", "int32")
    nest = For(
        i, 0, 8, ForKind.SERIAL,
        For(j, 0, 4, ForKind.VECTORIZED, tir.BufferStore(out, x[j, i] + 1.0, (i, j))),
    )  # fmt: skip
    assert widen_vector_loops(nest, 64) is nest


@pytest.mark.compiler
@settings(max_examples=8, deadline=None, derandomize=True)
@given(outer=st.sampled_from([2, 4, 8, 16]), inner=st.sampled_from([1, 2, 4, 8]))
def test_widened_channel_tiles_compute_the_numpy_result(outer, inner):
    sch = _narrow_vector(outer, inner)
    x, k = rand(1, 8, 8, 64), rand(3, 3, 64)
    _, (*_, out) = build_and_run(sch.mod, x, k, np.zeros((1, 8, 8, 64), "float32"), target=CPU)
    np.testing.assert_allclose(out, _depthwise_np(x, k), rtol=1e-4, atol=1e-4)
