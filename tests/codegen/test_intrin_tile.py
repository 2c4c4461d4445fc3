"""Register tiles of dot-product calls: a tensorized int8 matmul's outer-product tile (rows
of A by vectors of B) keeps its int32 accumulators in vector variables across the
reduction loops (the plan says so; the C calls the intrinsic's register form), and the
integers equal numpy's for random tile shapes (compiled where the host runs the ISA)."""

from __future__ import annotations

import os
import shutil
import zlib

import numpy as np
import pytest

from metaschedule import te, tir
from metaschedule.codegen import build
from metaschedule.codegen.c_codegen import codegen_c
from metaschedule.codegen.c_intrin import C_INTRINSICS, accumulating_call, usable_tensor_intrins
from metaschedule.codegen.isa import host_arch
from metaschedule.codegen.options import CodegenOptions
from metaschedule.codegen.plan import plan_function
from metaschedule.target import Target
from metaschedule.testing import run_emulated
from metaschedule.tir.transform import lower

VNNI = "llvm -mcpu=icelake-server -num-cores=2"
HASWELL = "llvm -mcpu=haswell -num-cores=2"
N1 = "llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1 -num-cores=2"
#: (target, tensor intrinsic, its C function, lanes)
CASES = [
    (VNNI, "dot_16x4_vnni", "ms_dot_16x4_vnni", 16),
    (HASWELL, "dot_8x4_avx2_exact", "ms_dot_8x4_avx2_exact", 8),
    ("llvm -mcpu=skylake-avx512", "dot_16x4_avx512_exact", "ms_dot_16x4_avx512_exact", 16),
    (N1, "dot_4x4_u8u8u32_udot", "ms_dot_4x4_u8u8s32_udot", 4),
]


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


def int8_matmul(m: int, n: int, k: int, lanes: int, b_dtype="int8", a_dtype="uint8"):
    """``C[i, j] = sum_k A[i, k] * B[j, k]`` (8-bit integers -> s32), B packed
    ``[n // lanes, k // 4, lanes, 4]`` (one vector load per call)."""
    a = te.placeholder((m, k), a_dtype, name="A")
    b = te.placeholder((n // lanes, k // 4, lanes, 4), b_dtype, name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute(
        (m, n),
        lambda i, j: te.sum(
            a[i, r].astype("int32") * b[j // lanes, r // 4, j % lanes, r % 4].astype("int32"),
            axis=r,
        ),
        name="C",
    )
    return te.create_prim_func([a, b, c])


def tiled(func, intrin: str, lanes: int, rows: int, vectors: int, ksplit: int, local: bool):
    """An outer-product tile of ``rows x vectors`` calls under the reduction loops ``k0,
    k1`` (``ksplit`` steps of 4 in ``k1``); with ``local``, accumulated in a cache."""
    sch = tir.Schedule(func)
    blk = sch.get_block("C")
    cw = sch.cache_write(blk, 0, "local") if local else None
    i, j, k = sch.get_loops(blk)
    i0, i1 = sch.split(i, [None, rows])
    j0, j1, j2 = sch.split(j, [None, vectors, lanes])
    k0, k1, k2 = sch.split(k, [None, ksplit, 4])
    sch.reorder(i0, j0, k0, k1, i1, j1, j2, k2)
    if cw is not None:
        sch.reverse_compute_at(cw, j0)
    sch.decompose_reduction(blk, k0)
    sch.tensorize(j2, intrin)
    return sch


def operands(func, seed: int):
    rng = np.random.default_rng(seed)
    a_buf, b_buf, c_buf = func.params
    lo = {"uint8": 0, "int8": -128}
    a = rng.integers(lo[a_buf.dtype], lo[a_buf.dtype] + 256, a_buf.static_shape())
    b = rng.integers(lo[b_buf.dtype], lo[b_buf.dtype] + 256, b_buf.static_shape())
    a, b = a.astype(a_buf.dtype), b.astype(b_buf.dtype)
    n = c_buf.static_shape()[1]
    bt = b.transpose(0, 2, 1, 3).reshape(n, -1).astype(np.int64)
    want = (a.astype(np.int64) @ bt.T).astype(np.int32)
    return a, b, np.zeros(c_buf.static_shape(), np.int32), want


# ----------------------------------------------------------------------------- the plan


@pytest.mark.parametrize(("target", "intrin", "fn", "lanes"), CASES, ids=[c[1] for c in CASES])
@pytest.mark.parametrize("local", [False, True], ids=["global", "local"])
def test_an_outer_product_of_calls_is_kept_in_vector_accumulators(target, intrin, fn, lanes, local):
    b_dtype = "uint8" if "u8u8" in intrin else "int8"
    func = int8_matmul(16, 4 * lanes, 64, lanes, b_dtype)
    sch = tiled(func, intrin, lanes, rows=4, vectors=2, ksplit=2, local=local)
    plan = plan_function(lower(sch.mod["main"]), target)
    [(loop, tile)] = plan.tiles
    assert tile.lanes == lanes and tile.widths == (lanes,) * 8  # 4 rows x 2 vectors
    assert [lp.loop_var.name for lp in tile.region] == ["k_0", "k_1"] == [loop.loop_var.name, "k_1"]
    calls = [accumulating_call(p) for p in tile.points]
    assert all(c is not None and c[0].name == fn for c in calls)
    assert C_INTRINSICS[fn].register_form == f"{fn}_acc"
    assert f"kept in 8 accumulators of {lanes} lanes across loops k_0, k_1" in tile.describe()
    # the C: the register form in the loop, the accumulators started from the init value
    code = codegen_c(lower(sch.mod["main"]), target).code
    body = code[code.index("_kernel(void** args)") if "_kernel(void" in code else 0 :]
    assert body.count(f"{fn}_acc(") == 8 and f"{fn}(" not in body
    assert body.count(f"ms_bcast_i32x{lanes}(0)") == 8  # the init nest folded in


def test_a_tile_over_the_register_budget_is_split_into_rows():
    func = int8_matmul(128, 128, 64, 16)
    # 8 rows x 4 vectors = 32 accumulators: TileLimits.max_call_accumulators on AVX-512
    sch = tiled(func, "dot_16x4_vnni", 16, rows=8, vectors=4, ksplit=1, local=False)
    [(_, tile)] = plan_function(lower(sch.mod["main"]), VNNI).tiles
    assert len(tile.points) == 32 and not tile.outer
    # 16 x 8 = 128: the row loop moves outside the reduction loops, 8 accumulators stay
    sch = tiled(func, "dot_16x4_vnni", 16, rows=16, vectors=8, ksplit=1, local=False)
    [(_, tile)] = plan_function(lower(sch.mod["main"]), VNNI).tiles
    assert len(tile.points) == 8 and [lp.loop_var.name for lp in tile.outer] == ["i_1"]
    # 16 x 4 = 64, and 4 when split (too few chains): the calls stay on memory
    sch = tiled(func, "dot_16x4_vnni", 16, rows=16, vectors=4, ksplit=1, local=False)
    assert plan_function(lower(sch.mod["main"]), VNNI).tiles == ()
    # AVX2 has 16 registers: 4 x 4 fit, 6 x 4 do not (nor 4 when split)
    func = int8_matmul(48, 64, 64, 8)
    for rows, want in ((4, [16]), (6, [])):
        sch = tiled(func, "dot_8x4_avx2_exact", 8, rows, vectors=4, ksplit=1, local=False)
        tiles = plan_function(lower(sch.mod["main"]), HASWELL).tiles
        assert [len(t.points) for _, t in tiles] == want


def test_the_switch_off_leaves_the_calls_on_memory():
    sch = tiled(int8_matmul(16, 64, 64, 16), "dot_16x4_vnni", 16, 4, 2, 2, local=True)
    func = lower(sch.mod["main"])
    off = CodegenOptions(tensorized_tiles=False)
    assert plan_function(func, VNNI, off).tiles == ()
    code = codegen_c(func, VNNI, options=off).code
    assert "ms_dot_16x4_vnni(" in code and "ms_dot_16x4_vnni_acc(" not in code


# ----------------------------------------------------------------------------- compiled


def _runnable(target: str, intrin: str) -> None:
    if host_arch() != "x86_64" or intrin not in usable_tensor_intrins(Target(target)):
        pytest.skip(f"{intrin} does not run here")
    if intrin not in usable_tensor_intrins(Target("llvm")):
        pytest.skip(f"the host cannot run {intrin}")


@pytest.mark.compiler
@pytest.mark.parametrize(
    ("target", "intrin", "fn", "lanes"), CASES[:3], ids=[c[1] for c in CASES[:3]]
)
def test_random_tiles_of_calls_equal_numpy(target, intrin, fn, lanes):
    """Property: any tile shape, reduction split and accumulation buffer gives numpy's
    integers (accumulators in registers or, when the plan declines, in memory)."""
    _runnable(target, intrin)
    rng = np.random.default_rng(zlib.crc32(intrin.encode()))
    for case in range(6):
        rows, vectors = int(rng.integers(1, 9)), int(rng.integers(1, 4))
        ksplit, local = int(rng.choice([1, 2, 4])), bool(rng.integers(2))
        m = rows * int(rng.integers(1, 3))
        n = lanes * vectors * int(rng.integers(1, 3))
        k = 4 * ksplit * int(rng.integers(1, 5))
        func = int8_matmul(m, n, k, lanes)
        sch = tiled(func, intrin, lanes, rows, vectors, ksplit, local)
        a, b, c, want = operands(func, seed=case)
        lib = build(sch.mod, target)
        lib(a, b, c)
        shape = (m, n, k, rows, vectors, ksplit, local)
        np.testing.assert_array_equal(c, want, err_msg=f"{intrin} {shape}")
        tiles = plan_function(lower(sch.mod["main"]), target).tiles
        assert (f"{fn}_acc(" in lib.get_source()) == bool(tiles), shape
        if k > 4 and rows * vectors <= 16:  # a reduction loop, and registers for the tile
            assert tiles, shape


@pytest.mark.compiler
@pytest.mark.skipif(
    host_arch() == "aarch64"
    or shutil.which("aarch64-linux-gnu-gcc") is None
    or shutil.which("qemu-aarch64") is None
    or not os.path.isdir("/usr/aarch64-linux-gnu"),
    reason="needs the aarch64 cross compiler and qemu-aarch64",
)
def test_random_tiles_of_sdot_calls_equal_numpy_under_qemu():
    rng = np.random.default_rng(7)
    for case in range(3):
        rows, vectors, ksplit = int(rng.integers(1, 9)), int(rng.integers(1, 5)), 2
        func = int8_matmul(rows * 2, 4 * vectors, 16, 4, a_dtype="int8")
        sch = tiled(func, "dot_4x4_i8i8s32_sdot", 4, rows, vectors, ksplit, bool(case % 2))
        a, b, c, want = operands(func, seed=case)
        lib = build(sch.mod, N1)
        assert "ms_dot_4x4_i8i8s32_sdot_acc(" in lib.get_source()
        _, _, got = run_emulated(lib, a, b, c)
        np.testing.assert_array_equal(got, want)
