"""Sliding-window operators in the C back end: a depthwise convolution's tile writes its
window out as straight-line code that loads each input vector once
(``c_accumulate.straight_line``), max pooling vectorizes over channels, and every
sampled schedule of the default space computes the numpy result (small shapes)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from metaschedule import te, tir
from metaschedule.codegen import build
from metaschedule.space_generator import PostOrderApply
from metaschedule.target import Target
from metaschedule.te import ops
from metaschedule.tune_context import TuneContext

CPU = Target({"kind": "cpu", "num_cores": 2, "vector_width": 64})
RNG = np.random.default_rng(11)


pytestmark = pytest.mark.usefixtures("session_kernel_cache")


def rand(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def _depthwise(h: int, w: int, c: int):
    x = te.placeholder((1, h, w, c), "float32", "X")
    k = te.placeholder((3, 3, c), "float32", "K")
    return te.create_prim_func([x, k, ops.depthwise_conv2d_nhwc(x, k, stride=1, padding=1)])


def _depthwise_np(x, k):
    h, w = x.shape[1], x.shape[2]
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros_like(x)
    for ry in range(3):
        for rx in range(3):
            out += xp[:, ry : ry + h, rx : rx + w, :] * k[ry, rx]
    return out


def _pool(h: int, w: int, c: int):
    x = te.placeholder((1, h, w, c), "float32", "X")
    return te.create_prim_func([x, ops.max_pool2d(x, 3, 2)])


def _pool_np(x):
    from numpy.lib.stride_tricks import sliding_window_view

    return sliding_window_view(x, (3, 3), axis=(1, 2))[:, ::2, ::2].max(axis=(4, 5))


def _depthwise_row_tile(h: int = 6, w: int = 8, c: int = 32) -> tir.Schedule:
    """Output rows tiled 1 x 4 pixels x 32 channels (2 vectors), the 3x3 window inside."""
    sch = tir.Schedule(_depthwise(h, w, c))
    block = sch.get_block("depthwise_conv2d_nhwc")
    sch.compute_inline(sch.get_block("PaddedInput"))
    n, y, x, ch, ry, rx = sch.get_loops(block)
    x0, x1 = sch.split(x, [None, 4])
    sch.reorder(n, y, x0, ry, rx, x1, ch)
    sch.decompose_reduction(block, ry)
    sch.vectorize(ch)
    return sch


@pytest.mark.compiler
def test_depthwise_window_loads_each_input_vector_once():
    sch = _depthwise_row_tile()
    x, k = rand(1, 6, 8, 32), rand(3, 3, 32)
    lib = build(sch.mod, CPU)
    out = np.zeros((1, 6, 8, 32), "float32")
    lib(x, k, out)
    np.testing.assert_allclose(out, _depthwise_np(x, k), rtol=1e-4, atol=1e-4)
    src = lib.get_source()
    assert "kept in 8 accumulators of 16 lanes across loops ry, rx" in src
    # rx written out: 4 pixels x 3 taps read 6 distinct input columns of 2 vectors each,
    # plus 3 taps x 2 vectors of the kernel; each is loaded once into a pinned variable
    pinned = re.findall(r"(\w+) = ms_load_f32x16\([^;]*\); MS_IN_REG\(\1\);", src)
    assert len(pinned) == len(set(pinned)) == 6 * 2 + 3 * 2
    assert "#define MS_IN_REG" in src


@pytest.mark.compiler
def test_a_tile_without_a_sliding_window_keeps_its_loop():
    # a matmul tile: no input vector is read by two k steps, so nothing is written out
    a_t = te.placeholder((8, 16), "float32", "A")
    b_t = te.placeholder((16, 32), "float32", "B")
    sch = tir.Schedule(te.create_prim_func([a_t, b_t, ops.matmul(a_t, b_t)]))
    block = sch.get_block("T_matmul_NN")
    i, j, k = sch.get_loops(block)
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i, k0, k1, j)
    sch.decompose_reduction(block, k0)
    sch.vectorize(j)
    a, b = rand(8, 16), rand(16, 32)
    lib = build(sch.mod, CPU)
    c = np.zeros((8, 32), "float32")
    lib(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    assert "MS_IN_REG" not in lib.get_source()


@pytest.mark.compiler
def test_max_pool_over_channels_is_vector_code():
    sch = tir.Schedule(_pool(9, 9, 32))
    loops = sch.get_loops(sch.get_block("pool_max"))
    sch.reorder(*loops[:3], *loops[4:], loops[3])  # channels innermost, under the window
    sch.vectorize(loops[3])
    x = rand(1, 9, 9, 32)
    lib = build(sch.mod, CPU)
    out = np.zeros((1, 4, 4, 32), "float32")
    lib(x, out)
    np.testing.assert_array_equal(out, _pool_np(x))
    src = lib.get_source()
    assert "not vectorized" not in src
    assert "pool_max kept in 2 accumulators of 16 lanes" in src


@pytest.mark.compiler
@pytest.mark.parametrize("name", ["dep", "pool"])
def test_sampled_schedules_of_the_default_space_compute_the_numpy_result(name):
    if name == "dep":
        func, args = _depthwise(6, 6, 32), [rand(1, 6, 6, 32), rand(3, 3, 32)]
        want = _depthwise_np(*args)
    else:
        func, args = _pool(9, 9, 16), [rand(1, 9, 9, 16)]
        want = _pool_np(*args)
    ctx = TuneContext(func, target="llvm", space_generator=PostOrderApply(), rand_state=3)
    spaces, post = ctx.generate_design_space(), ctx.space_generator.postprocs
    checked = 0
    for seed in range(1, 40):
        space = spaces[seed % len(spaces)]
        sch = tir.Schedule(ctx.mod, seed=seed, error_render_level="none")
        try:
            tir.Trace(space.trace.insts, {}).apply_to_schedule(sch, remove_postproc=True)
        except tir.ScheduleError:
            continue
        sch.enter_postproc()
        if not all(p.apply(sch) for p in post):
            continue
        lib = build(sch.mod, CPU)
        out = np.zeros(want.shape, "float32")
        packed = lib.pack_weights(*args, out)
        lib(*packed[:-1], out)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=str(sch.trace))
        checked += 1
        if checked == 6:
            break
    assert checked >= 4
