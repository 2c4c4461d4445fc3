"""A reduction's init nest folded into its register accumulators (codegen/c_accumulate.py,
``plan_init_fusion``): the tile starts from the init value in registers and is stored
once, instead of being stored as zeros and loaded back."""

from __future__ import annotations

import re

import numpy as np
import pytest

from metaschedule import te, tir
from metaschedule.codegen import build
from metaschedule.codegen.c_codegen import FunctionWriter
from metaschedule.codegen.c_helpers import Helpers
from metaschedule.codegen.c_init_fusion import plan_init_fusion
from metaschedule.postproc import Postproc
from metaschedule.search_strategy.base import TraceReplayer
from metaschedule.space_generator import PostOrderApply
from metaschedule.target import Target
from metaschedule.te import ops
from metaschedule.testing import RandomArrays
from metaschedule.tir import Buffer, BufferLoad, BufferStore, For, ForKind, PrimFunc, Var, const
from metaschedule.tir.interpreter import interpret
from metaschedule.tune_context import TuneContext

CPU = Target("llvm -mcpu=x86-64-v4 -num-cores=2")  # AVX-512 (testing.isas)
rand = RandomArrays(11)

pytestmark = pytest.mark.usefixtures("session_kernel_cache")


def _depthwise(h: int = 8, w: int = 12, c: int = 32):
    data = te.placeholder((1, h, w, c), "float32", "data")
    kernel = te.placeholder((3, 3, c), "float32", "kernel")
    return te.create_prim_func([data, kernel, ops.depthwise_conv2d_nhwc(data, kernel, padding=1)])


def _depthwise_ref(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    h, w = x.shape[1], x.shape[2]
    return sum(xp[:, i : i + h, j : j + w, :] * k[i, j] for i in range(3) for j in range(3))


def _zero_stores(src: str, buf: str) -> list[str]:
    return re.findall(rf"{buf}\[[^\]]*\] = 0\.0f;|ms_store_f32x\d+\(&{buf}\[[^;]*0\.0f", src)


@pytest.mark.compiler
@pytest.mark.parametrize("inline_pad", [False, True], ids=["pad-stage", "pad-inlined"])
def test_depthwise_tile_starts_in_registers_and_is_stored_once(inline_pad):
    # our best dep tiling, small: ry_0 = rx_0 = 1, rows and pixel groups (yy_2, xx_2)
    # between them and the 3x3 window, 4 pixels x 32 channels under it (8 vectors); the
    # padding inlined, its guards versioned: both copies of the body take the init
    func = _depthwise(h=8, w=24)
    sch = tir.Schedule(func)
    if inline_pad:
        sch.compute_inline(sch.get_block("PaddedInput"))
    block = sch.get_block("depthwise_conv2d_nhwc")
    nn, yy, xx, ff, ry, rx = sch.get_loops(block)
    yy0, yy2 = sch.split(yy, [None, 2])
    xx0, xx2, xx3 = sch.split(xx, [None, 6, 4])
    ry0, ry1 = sch.split(ry, [1, 3])
    rx0, rx1 = sch.split(rx, [1, 3])
    sch.reorder(nn, yy0, xx0, ff, ry0, rx0, yy2, xx2, ry1, rx1, xx3)
    ff0, ff3 = sch.split(ff, [None, 32])
    sch.reorder(ry0, rx0, yy2, xx2, ry1, rx1, xx3, ff3)
    sch.decompose_reduction(block, ry0)
    sch.vectorize(ff3)
    x, k = rand(1, 8, 24, 32), rand(3, 3, 32)
    lib = build(sch.mod, CPU)
    out = np.full((1, 8, 24, 32), np.nan, "float32")
    lib(x, k, out)
    np.testing.assert_allclose(out, _depthwise_ref(x, k), rtol=1e-4, atol=1e-4)
    src = lib.get_source()
    assert "depthwise_conv2d_nhwc kept in 8 accumulators of 16 lanes across loops ry_1" in src
    assert "depthwise_conv2d_nhwc_acc_7 = ms_bcast_f32x16(0.0f);" in src
    if inline_pad:  # an interior copy without guards, and the border one
        assert "} else {" in src
        assert "depthwise_conv2d_nhwc_acc_15 = ms_bcast_f32x16(0.0f);" in src
    # the output is never read, and written once: no zeros stored ahead of the tile
    assert "ms_load_f32x16(&depthwise_conv2d_nhwc[" not in src
    assert not _zero_stores(src, "depthwise_conv2d_nhwc")
    assert "_init" not in src  # the init nest's loops are gone


@pytest.mark.compiler
@pytest.mark.parametrize("cache", [False, True])
def test_matmul_init_folds_into_its_tile(cache):
    a_t = te.placeholder((8, 24), "float32", "A")
    b_t = te.placeholder((24, 64), "float32", "B")
    sch = tir.Schedule(te.create_prim_func([a_t, b_t, ops.matmul(a_t, b_t)]))
    block = sch.get_block("T_matmul_NN")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 32])
    sch.reorder(i0, j0, k, i1, j1)
    name = "T_matmul_NN"
    if cache:
        sch.reverse_compute_at(sch.cache_write(block, 0, "global"), j0)
        name = "T_matmul_NN_global"
    sch.decompose_reduction(block, k)
    sch.vectorize(j1)
    a, b = rand(8, 24), rand(24, 64)
    lib = build(sch.mod, CPU)
    c = np.full((8, 64), np.nan, "float32")
    lib(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    src = lib.get_source()
    assert f"{name}_acc = ms_bcast_f32x16(0.0f);" in src
    assert not _zero_stores(src, name)
    assert f"ms_load_f32x16(&{name}[" not in src.split("kept in")[1].split("for (")[0]


@pytest.mark.compiler
def test_every_sampled_depthwise_schedule_compiles_to_the_numpy_result():
    """Sampled points of the default llvm space (RewriteLayout and the other default
    postprocessors applied), through the C back end: the init folded or not."""
    folded = 0
    for h in (4, 6):  # at 4 rows every tile fits in registers, at 6 many do not
        func = _depthwise(h, 8, 32)
        ctx = TuneContext(func, target="llvm", space_generator=PostOrderApply(), rand_state=0)
        replay = TraceReplayer(ctx.mod, Postproc.create("llvm"))
        x, k = rand(1, h, 8, 32), rand(3, 3, 32)
        want = _depthwise_ref(x, k)
        for space in ctx.generate_design_space():
            for seed in range(3):
                sch = replay(space.trace, seed)
                if sch is None:
                    continue
                lib = build(sch.mod, CPU)
                out = np.full(want.shape, np.nan, "float32")
                lib(*lib.pack_weights(x, k, out)[:-1], out)
                np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=str(sch.trace))
                folded += "_acc = ms_bcast_f32x" in lib.get_source()
    assert folded, "no sampled schedule had its init folded into the accumulators"


# ----------------------------------------------------------------------------- when it applies


def _writer() -> FunctionWriter:
    return FunctionWriter(PrimFunc((), tir.Evaluate(const(0))), CPU, Helpers(), "f")


def _pair(init_extent: int = 2, red_extent: int = 2, init_value=None, outer=(3, 3)):
    """``for o in outer[0]: for i in init_extent: B[o, i] = init_value`` then
    ``for o in outer[1]: for k in 4: for i in red_extent: B[o, i] += A[o, i, k]``."""
    a, b = Buffer("A", (3, 4, 4)), Buffer("B", (3, 4))
    o, oi, i, ii, k = (Var(n, "int32") for n in ("o", "o_init", "i", "i_init", "k"))
    value = const(0.0, "float32") if init_value is None else init_value(a)
    init = For(ii, const(0), const(init_extent), ForKind.SERIAL, BufferStore(b, value, (oi, ii)))
    init = For(oi, const(0), const(outer[0]), ForKind.SERIAL, init)
    upd = BufferStore(b, BufferLoad(b, (o, i)) + BufferLoad(a, (o, i, k)), (o, i))
    red = For(i, const(0), const(red_extent), ForKind.SERIAL, upd)
    red = For(k, const(0), const(4), ForKind.SERIAL, red)
    return init, For(o, const(0), const(outer[1]), ForKind.SERIAL, red)


def test_fusion_applies_when_the_init_writes_exactly_the_tile():
    init, red = _pair()
    fusion = plan_init_fusion(_writer(), init, red)
    assert fusion is not None and fusion.roots == (red.body,)  # the k loop, under o


@pytest.mark.parametrize(
    "kwargs",
    [
        {"init_extent": 3},  # the init writes an element the tile does not hold
        {"outer": (2, 3)},  # the outer loops differ
        {"init_value": lambda a: BufferLoad(a, (0, 0, 0))},  # not a plain value
    ],
    ids=["more-elements", "other-outer-loop", "value-loads"],
)
def test_fusion_refuses_an_init_that_is_not_the_tile(kwargs):
    init, red = _pair(**kwargs)
    assert plan_init_fusion(_writer(), init, red) is None


@pytest.mark.compiler
def test_an_init_that_is_not_the_tile_is_stored_as_before():
    # B[o, 0..3] = 0 but only B[o, 0..1] accumulated: the init stays a loop of stores
    init, red = _pair(init_extent=4)
    a, b = red.body.body.body.value.b.buffer, init.body.body.buffer
    func = PrimFunc((a, b), tir.SeqStmt([init, red]))
    x = rand(3, 4, 4)
    got, want = np.full((3, 4), 7.0, "float32"), np.full((3, 4), 7.0, "float32")
    lib = build(func, CPU)
    lib(x, got)
    interpret(func, x, want)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert "B_acc = 0.0f;" not in lib.get_source()
