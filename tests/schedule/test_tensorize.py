"""tensorize and tensor intrinsics: u8 x s8 -> s32 matmuls tensorized with each built-in
dot product, equal to numpy (compiled where the host runs the ISA, under qemu for
aarch64, and always by the reference interpreter); trace round trips; mismatches named."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from metaschedule import te, tir
from metaschedule.codegen import build
from metaschedule.codegen.c_expr import CodegenError
from metaschedule.codegen.c_intrin import usable_tensor_intrins
from metaschedule.codegen.isa import host_arch
from metaschedule.target import Target
from metaschedule.testing import assert_unchanged, run_emulated
from metaschedule.testing.primitive_check import check_primitives, replay_json
from metaschedule.tir import TensorIntrin
from metaschedule.tir.interpreter import interpret
from metaschedule.tir.tensor_intrin import DOT_PRODUCTS

HOST = Target("llvm -num-cores=2")
#: a CPU with each x86 intrinsic's extensions, for the ones the host lacks (then skipped)
X86_CPU = {
    "dot_16x4_vnni": "llvm -mcpu=icelake-server -num-cores=2",
    "dot_16x4_avx512": "llvm -mcpu=skylake-avx512 -num-cores=2",
    "dot_8x4_avxvnni": "llvm -mcpu=alderlake -num-cores=2",
    "dot_8x4_avx2": "llvm -mcpu=haswell -num-cores=2",
    "dot_16x4_avx512_exact": "llvm -mcpu=skylake-avx512 -num-cores=2",
    "dot_8x4_avx2_exact": "llvm -mcpu=haswell -num-cores=2",
}
N1 = Target("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1 -num-cores=2")
ARM_GENERIC = Target("llvm -mtriple=aarch64-linux-gnu -num-cores=2")
ARM_CPU = {
    "dot_4x4_i8i8s32_sdot": N1,
    "dot_4x4_u8u8u32_udot": N1,
    "dot_4x4_u8u8i32_hdot": N1,
    "dot_4x4_i8i8s32_neon": ARM_GENERIC,
}

_CROSS = shutil.which(os.environ.get("CROSS_CC") or "aarch64-linux-gnu-gcc")
needs_cross_qemu = pytest.mark.skipif(
    _CROSS is None
    or host_arch() == "aarch64"
    or shutil.which("qemu-aarch64") is None
    or not os.path.isdir("/usr/aarch64-linux-gnu"),
    reason="needs the aarch64 cross compiler and qemu-aarch64 "
    "(apt-get install gcc-aarch64-linux-gnu qemu-user)",
)


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


# ----------------------------------------------------------------------------- workloads


def int8_matmul(m=64, n=64, k=64, a_dtype="uint8", b_dtype="int8", packed=None):
    """``C[i, j] = sum_k A[i, k] * B[j, k]`` in int32; with ``packed=(lanes, 4)``, B comes
    packed as ``[n // lanes, k // 4, lanes, 4]`` (the layout that makes a tile one load)."""
    a = te.placeholder((m, k), a_dtype, name="A")
    r = te.reduce_axis((0, k), name="k")
    if packed is None:
        b = te.placeholder((n, k), b_dtype, name="B")

        def w(j, kk):
            return b[j, kk]
    else:
        lanes, red = packed
        b = te.placeholder((n // lanes, k // red, lanes, red), b_dtype, name="B")

        def w(j, kk):
            return b[j // lanes, kk // red, j % lanes, kk % red]

    c = te.compute(
        (m, n),
        lambda i, j: te.sum(a[i, r].astype("int32") * w(j, r).astype("int32"), axis=r),
        name="C",
    )
    return te.create_prim_func([a, b, c])


def tensorized(func, intrin: str, lanes: int, red: int = 4, via_block: bool = False):
    """Tile C's j by ``lanes`` and k by ``red`` innermost, split off the init, tensorize."""
    sch = tir.Schedule(func)
    blk = sch.get_block("C")
    i, j, k = sch.get_loops(blk)
    j0, j1 = sch.split(j, [None, lanes])
    k0, k1 = sch.split(k, [None, red])
    sch.reorder(i, j0, k0, j1, k1)
    sch.decompose_reduction(blk, k0)
    if via_block:
        sch.tensorize(sch.blockize(j1), intrin)
    else:
        sch.tensorize(j1, intrin)
    return sch


def operands(func, seed=0, a_high=256):
    """Random inputs over the dtypes' ranges (A below ``a_high``), a zero output, and
    numpy's result."""
    rng = np.random.default_rng(seed)
    a_buf, b_buf, c_buf = func.params
    lo = {"uint8": 0, "int8": -128}
    a = rng.integers(lo[a_buf.dtype], min(a_high, lo[a_buf.dtype] + 256), a_buf.static_shape())
    b = rng.integers(lo[b_buf.dtype], lo[b_buf.dtype] + 256, b_buf.static_shape())
    a, b = a.astype(a_buf.dtype), b.astype(b_buf.dtype)
    bt = b if b.ndim == 2 else b.transpose(0, 2, 1, 3).reshape(c_buf.static_shape()[1], -1)
    want = (a.astype(np.int64) @ bt.astype(np.int64).T).astype(np.int32)
    return a, b, np.zeros(c_buf.static_shape(), np.int32), want


def pack(b: np.ndarray, lanes: int, red: int = 4) -> np.ndarray:
    n, k = b.shape
    return b.reshape(n // lanes, lanes, k // red, red).transpose(0, 2, 1, 3).copy()


def a_high(name: str) -> int:
    """The AVX2/AVX512-BW sequences saturate pair sums to int16: exact for A < 128."""
    return 128 if name in ("dot_16x4_avx512", "dot_8x4_avx2") else 256


# ----------------------------------------------------------------------------- the registry


def test_the_builtin_intrinsics_are_registered_with_tvms_names():
    names = TensorIntrin.names()
    for name in (
        "dot_16x4_vnni",
        "dot_16x4_avx512",
        "dot_8x4_avxvnni",
        "dot_8x4_avx2",
        "dot_4x4_i8i8s32_sdot",
        "dot_4x4_u8u8u32_udot",
        "dot_4x4_i8i8s32_neon",
    ):
        assert name in names
        intrin = TensorIntrin.get(name)
        assert [p.static_shape() for p in intrin.desc.params] == [
            p.static_shape() for p in intrin.impl.params
        ]
    vnni = TensorIntrin.get("dot_16x4_vnni")
    assert [p.dtype for p in vnni.desc.params] == ["uint8", "int8", "int32"]
    assert [p.static_shape() for p in vnni.desc.params] == [(4,), (16, 4), (16,)]
    assert vnni.calls == ("ms_dot_16x4_vnni",)
    assert "T.ms_dot_16x4_vnni(T.address_of(C[0])" in vnni.impl.script()


def test_register_and_get():
    vnni = TensorIntrin.get("dot_16x4_vnni")
    assert TensorIntrin.get("no_such_intrin", allow_missing=True) is None
    with pytest.raises(ValueError, match="no tensor intrinsic named 'no_such_intrin'"):
        TensorIntrin.get("no_such_intrin")
    with pytest.raises(ValueError, match="already registered"):
        TensorIntrin.register("dot_16x4_vnni", vnni.desc, vnni.impl)
    TensorIntrin.register("test_my_vnni", vnni.desc, vnni.impl)
    TensorIntrin.register("test_my_vnni", vnni.desc, vnni.impl, override=True)
    assert TensorIntrin.get("test_my_vnni").impl is vnni.impl
    other = TensorIntrin.get("dot_8x4_avx2")
    with pytest.raises(ValueError, match="parameter 1"):
        TensorIntrin.register("test_bad", vnni.desc, other.impl)


def test_usable_intrinsics_follow_the_isa_record():
    assert set(usable_tensor_intrins("llvm -mcpu=icelake-server")) >= {
        "dot_16x4_vnni",
        "dot_16x4_avx512",
        "dot_8x4_avx2",
    }
    assert "dot_8x4_avxvnni" not in usable_tensor_intrins("llvm -mcpu=icelake-server")
    assert "dot_8x4_avxvnni" in usable_tensor_intrins("llvm -mcpu=alderlake")
    assert usable_tensor_intrins("llvm -mcpu=haswell") == ["dot_8x4_avx2", "dot_8x4_avx2_exact"]
    assert set(usable_tensor_intrins(N1)) == set(ARM_CPU)
    assert usable_tensor_intrins(ARM_GENERIC) == ["dot_4x4_i8i8s32_neon"]


# ----------------------------------------------------------------------------- the primitive


def test_tensorize_replaces_the_tile_by_the_call():
    sch = tensorized(int8_matmul(), "dot_16x4_vnni", 16)
    outer = sch.get(sch.get_block("C_o"))
    text = sch.mod.script()
    assert 'T.block("C")' not in text
    assert (
        "T.ms_dot_16x4_vnni(T.address_of(C[v_i_o, v_j_o * 16]), T.address_of(A[v_i_o, "
        "v_k_o * 4]), T.address_of(B[v_j_o * 16, v_k_o * 4]), 64)" in text
    )
    assert {r.buffer.name for r in outer.reads} == {"A", "B", "C"}
    assert [r.buffer.name for r in outer.writes] == ["C"]
    assert str(sch.trace).splitlines()[-2] == (
        "sch.tensorize(block_or_loop=l5, tensor_intrin='dot_16x4_vnni', preserve_unit_iters=True)"
    )


@pytest.mark.parametrize("name", sorted(DOT_PRODUCTS))
def test_each_intrinsic_computes_numpys_product_by_the_interpreter(name):
    dp = DOT_PRODUCTS[name]
    func = int8_matmul(32, 32, 32, dp.a_dtype, dp.b_dtype)
    sch = tensorized(func, name, dp.lanes, dp.reduce)
    check_primitives(sch, func, rtol=0, atol=0)
    a, b, c, want = operands(func, a_high=a_high(name))
    interpret(sch.mod["main"], a, b, c)
    np.testing.assert_array_equal(c, want)


def test_tensorize_a_blockized_block_is_tensorize_of_the_loop():
    func = int8_matmul()
    by_loop = tensorized(func, "dot_16x4_vnni", 16)
    by_block = tensorized(func, "dot_16x4_vnni", 16, via_block=True)
    assert tir.structural_equal(by_loop.mod, by_block.mod)
    check_primitives(by_block, func, rtol=0, atol=0)


def test_the_saturating_sequences_saturate_in_the_reference_as_in_the_hardware():
    func = int8_matmul(4, 16, 4)
    sch = tensorized(func, "dot_16x4_avx512", 16)
    a = np.full((4, 4), 255, np.uint8)
    b = np.full((16, 4), 127, np.int8)
    c = np.zeros((4, 16), np.int32)
    interpret(sch.mod["main"], a, b, c)
    assert (c == 2 * 32767).all()  # two saturated pairs, not 4 * 255 * 127


# ----------------------------------------------------------------------------- compiled


def _x86_target(name: str) -> Target:
    if host_arch() != "x86_64":
        pytest.skip("x86 intrinsics on an x86 host")
    return HOST if name in usable_tensor_intrins(HOST) else Target(X86_CPU[name])


@pytest.mark.compiler
@pytest.mark.parametrize("name", sorted(X86_CPU))
@pytest.mark.parametrize("packed", [False, True], ids=["strided", "packed"])
def test_x86_intrinsics_compile_and_equal_numpy(name, packed):
    """Built for the host where it has the extensions; otherwise built for a CPU that has
    them, and skipped when loading (UnsupportedIsaError: the conftest's convention)."""
    target = _x86_target(name)
    dp = DOT_PRODUCTS[name]
    func = int8_matmul(packed=(dp.lanes, 4) if packed else None)
    sch = tensorized(func, name, dp.lanes)
    a, b, c, want = operands(func, seed=3, a_high=a_high(name))
    lib = build(sch.mod, target)
    lib(a, b, c)
    np.testing.assert_array_equal(c, want)
    if packed:  # a packed tile is one vector load: the call passes its row length
        src = lib.get_source()  # the register form (_acc) where the tile stays in registers
        assert re.search(rf"{dp.op}(_acc)?\(", src) and ", 4));" in src


@pytest.mark.compiler
def test_a_tuned_style_schedule_with_a_cache_parallel_loop_and_vector_init():
    if "dot_16x4_vnni" not in usable_tensor_intrins(HOST):
        pytest.skip("the host has no AVX512-VNNI")
    func = int8_matmul(packed=(16, 4))
    sch = tir.Schedule(func)
    blk = sch.get_block("C")
    cw = sch.cache_write(blk, 0, "global")
    i, j, k = sch.get_loops(blk)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    sch.reverse_compute_at(cw, j0)
    init = sch.decompose_reduction(blk, k0)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.parallel(i0)
    sch.tensorize(j1, "dot_16x4_vnni")
    check_primitives(sch, func, rtol=0, atol=0)
    a, b, c, want = operands(func, seed=5)
    build(sch.mod, HOST)(a, b, c)
    np.testing.assert_array_equal(c, want)


@pytest.mark.compiler
def test_a_replayed_trace_computes_the_same_numbers():
    if "dot_16x4_vnni" not in usable_tensor_intrins(HOST):
        pytest.skip("the host has no AVX512-VNNI")
    func = int8_matmul()
    sch = tensorized(func, "dot_16x4_vnni", 16)
    fresh = replay_json(sch, func)
    assert tir.structural_equal(fresh.mod, sch.mod)
    a, b, c1, want = operands(func, seed=9)
    c2 = c1.copy()
    build(sch.mod, HOST)(a, b, c1)
    build(fresh.mod, HOST)(a, b, c2)
    np.testing.assert_array_equal(c1, want)
    np.testing.assert_array_equal(c2, want)


@pytest.mark.compiler
def test_building_for_a_target_without_the_extension_is_an_error():
    sch = tensorized(int8_matmul(), "dot_16x4_vnni", 16)
    with pytest.raises(CodegenError, match="lacks avx512vnni"):
        build(sch.mod, "llvm -mcpu=skylake-avx512 -num-cores=2")
    with pytest.raises(CodegenError, match="x86_64 code and the target is aarch64"):
        build(sch.mod, N1)


@pytest.mark.compiler
@needs_cross_qemu
@pytest.mark.parametrize("name", sorted(ARM_CPU))
def test_aarch64_intrinsics_equal_numpy_under_qemu(name):
    dp = DOT_PRODUCTS[name]
    func = int8_matmul(32, 32, 32, dp.a_dtype, dp.b_dtype)
    sch = tensorized(func, name, dp.lanes, dp.reduce)
    a, b, c, want = operands(func, seed=11)
    lib = build(sch.mod, ARM_CPU[name])
    _, _, c = run_emulated(lib, a, b, c)
    np.testing.assert_array_equal(c, want)
    objdump = shutil.which("aarch64-linux-gnu-objdump")
    if objdump is not None and "dot" in name.rsplit("_", 1)[1]:
        asm = subprocess.run(
            [objdump, "-d", lib.path], capture_output=True, text=True, check=True, timeout=60
        ).stdout
        assert ("\tsdot\t" in asm) or ("\tudot\t" in asm)


@pytest.mark.compiler
@needs_cross_qemu
def test_sdot_needs_dotprod_in_the_target():
    sch = tensorized(int8_matmul(16, 16, 16, "int8", "int8"), "dot_4x4_i8i8s32_sdot", 4)
    with pytest.raises(CodegenError, match="lacks dotprod"):
        build(sch.mod, ARM_GENERIC)


# ----------------------------------------------------------------------------- mismatches


def _tiled(func, lanes, red=4, decompose=True):
    sch = tir.Schedule(func)
    blk = sch.get_block("C")
    i, j, k = sch.get_loops(blk)
    j0, j1 = sch.split(j, [None, lanes])
    k0, k1 = sch.split(k, [None, red])
    sch.reorder(i, j0, k0, j1, k1)
    if decompose:
        sch.decompose_reduction(blk, k0)
    return sch, j1


def test_a_tile_of_other_extents_names_the_loops():
    sch, j1 = _tiled(int8_matmul(), 8)
    assert_unchanged(
        sch,
        lambda: sch.tensorize(j1, "dot_16x4_vnni"),
        r"the loops under block 'C_o' are \(j_1: 8, k_1: 4\), the intrinsic's are "
        r"\(i: 16, k: 4\)",
    )


def test_other_dtypes_are_named():
    sch, j1 = _tiled(int8_matmul(a_dtype="int8"), 16)
    assert_unchanged(
        sch, lambda: sch.tensorize(j1, "dot_16x4_vnni"), "A is int8, the intrinsic's A is uint8"
    )


def test_an_init_left_in_the_block_asks_for_decompose_reduction():
    sch, j1 = _tiled(int8_matmul(), 16, decompose=False)
    assert_unchanged(sch, lambda: sch.tensorize(j1, "dot_16x4_vnni"), "decompose_reduction first")


def test_another_computation_is_named():
    a = te.placeholder((64, 64), "uint8", name="A")
    b = te.placeholder((64, 64), "int8", name="B")
    r = te.reduce_axis((0, 64), name="k")
    c = te.compute(
        (64, 64),
        lambda i, j: te.sum(a[i, r].astype("int32") + b[j, r].astype("int32"), axis=r),
        name="C",
    )
    sch, j1 = _tiled(te.create_prim_func([a, b, c]), 16)
    assert_unchanged(sch, lambda: sch.tensorize(j1, "dot_16x4_vnni"), "a Add where it has a Mul")


def test_a_transposed_operand_must_be_compact_where_the_intrinsic_needs_it():
    """B[k, j] (KN layout) binds crosswise; the 4 values of a row are then 64 apart,
    which the implementation cannot take (it asks only for B's row stride)."""
    a = te.placeholder((64, 64), "uint8", name="A")
    b = te.placeholder((64, 64), "int8", name="B")
    r = te.reduce_axis((0, 64), name="k")
    c = te.compute(
        (64, 64),
        lambda i, j: te.sum(a[i, r].astype("int32") * b[r, j].astype("int32"), axis=r),
        name="C",
    )
    sch, j1 = _tiled(te.create_prim_func([a, b, c]), 16)
    assert_unchanged(
        sch,
        lambda: sch.tensorize(j1, "dot_16x4_vnni"),
        r"operand 1 \(B\) must be compact along its axis 1 \(stride 1\), but the region of "
        r"buffer B bound to it has stride 64",
    )


def test_an_operand_indexed_by_another_loop_is_named():
    sch = tir.Schedule(int8_matmul(64, 64, 64))
    blk = sch.get_block("C")
    i, j, k = sch.get_loops(blk)
    i0, i1 = sch.split(i, [None, 16])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, j, k0, i1, k1)  # (i1: 16, k1: 4), but i1 runs along A's rows
    sch.decompose_reduction(blk, k0)
    assert_unchanged(
        sch,
        lambda: sch.tensorize(i1, "dot_16x4_vnni"),
        r"accesses A\[.*\] where the intrinsic accesses A\[k_1\]: the block's index 0 moves",
    )


def test_an_unknown_intrinsic_lists_the_registered_ones():
    sch, j1 = _tiled(int8_matmul(), 16)
    assert_unchanged(
        sch, lambda: sch.tensorize(j1, "dot_nope"), "no tensor intrinsic named 'dot_nope'"
    )
