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
from metaschedule.testing import RandomArrays, build_and_check
from metaschedule.tune_context import TuneContext

CPU = Target("llvm -mcpu=x86-64-v4 -num-cores=2")  # AVX-512 (testing.isas)
rand = RandomArrays(11)


pytestmark = pytest.mark.usefixtures("session_kernel_cache")


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
    src = build_and_check(sch.mod, [x, k], _depthwise_np(x, k), target=CPU)
    assert "kept in 8 accumulators of 16 lanes across loops ry, rx" in src
    # ry and rx written out: 4 pixels x 3x3 taps read 3 rows x 6 columns of input
    # pixels of 2 vectors each, and 9 taps x 2 vectors of the kernel; each is loaded once
    # into a pinned variable, an input vector under its padding guard unless the loops'
    # ranges prove it inside (the middle row's 4 inner columns)
    pinned = re.findall(r"(\w+) = (\(.*\? )?ms_load_f32x16\([^;]*\); MS_IN_REG\(\1\);", src)
    names = [name for name, _ in pinned]
    assert len(names) == len(set(names)) == 3 * 6 * 2 + 9 * 2
    assert sum(bool(guard) for _, guard in pinned) == 3 * 6 * 2 - 4 * 2
    assert "#define MS_IN_REG" in src


def _conv(h: int, w: int, c: int, f: int):
    x = te.placeholder((1, h, w, c), "float32", "X")
    k = te.placeholder((3, 3, c, f), "float32", "W")
    return te.create_prim_func([x, k, ops.conv2d_nhwc(x, k, 1, 1)])


def _conv_np(x, k):
    h, w = x.shape[1], x.shape[2]
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    return sum(
        np.einsum("nhwc,cf->nhwf", xp[:, ry : ry + h, rx : rx + w, :], k[ry, rx])
        for ry in range(3)
        for rx in range(3)
    )


def _conv_row_tile(pixels: int, h: int = 6, w: int = 8) -> tir.Schedule:
    """``pixels`` output pixels of a row x 32 channels (2 vectors) under the 3x3 window,
    the input channels outside it."""
    sch = tir.Schedule(_conv(h, w, 8, 32))
    block = sch.get_block("conv2d_nhwc")
    sch.compute_inline(sch.get_block("PaddedInput"))
    n, y, x, f, ry, rx, rc = sch.get_loops(block)
    x0, x1 = sch.split(x, [None, pixels])
    sch.reorder(n, y, x0, rc, ry, rx, x1, f)
    sch.decompose_reduction(block, rc)
    sch.vectorize(f)
    return sch


def _pinned(src: str, what: str) -> list[str]:
    return re.findall(rf"(\w+) = {what}\([^;]*\); MS_IN_REG\(\1\);", src)


@pytest.mark.compiler
def test_conv_window_broadcasts_each_input_pixel_once():
    # 4 pixels x 2 vectors under ry, rx written out: the 9 steps read 3 rows x 6 columns
    # of input pixels, each broadcast across the output channels once and kept (not once
    # per update: 72), and 9 taps x 2 weight vectors, each loaded once
    sch = _conv_row_tile(4)
    x, k = rand(1, 6, 8, 8), rand(3, 3, 8, 32)
    src = build_and_check(sch.mod, [x, k], _conv_np(x, k), target=CPU)
    assert "kept in 8 accumulators of 16 lanes across loops rc, ry, rx" in src
    interior = src[src.index("kept in 8 accumulators") :]
    interior = interior[: interior.index("ms_store_f32x16")]  # the first tile's updates
    broadcasts = _pinned(interior, "ms_bcast_f32x16")
    assert len(broadcasts) == len(set(broadcasts)) == 3 * 6
    assert len(_pinned(interior, "ms_load_f32x16")) == 9 * 2
    # every broadcast of the input shared: made only in the pinned assignments
    made = [ln for ln in interior.splitlines() if "ms_bcast_f32x16(" in ln and "X[" in ln]
    assert made and all("MS_IN_REG(" in ln for ln in made)


@pytest.mark.compiler
def test_conv_window_too_wide_for_the_registers_broadcasts_per_update():
    # 14 pixels x 2 vectors: 28 accumulators leave too few registers for the window's
    # pixels held between steps: nothing is written out (the input vector is never
    # reused), the loops stay and the kernel still computes the numpy result
    sch = _conv_row_tile(14, h=3, w=14)
    x, k = rand(1, 3, 14, 8), rand(3, 3, 8, 32)
    src = build_and_check(sch.mod, [x, k], _conv_np(x, k), target=CPU)
    assert "kept in 28 accumulators of 16 lanes" in src
    assert "MS_IN_REG(" not in src


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
    src = build_and_check(sch.mod, [a, b], a @ b, target=CPU)
    assert "MS_IN_REG" not in src


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
    # 2 vectors of channels, the 4 pixels of a row jammed in (JAM_SMALL_TILES)
    assert "pool_max kept in 8 accumulators of 16 lanes" in src


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
