"""build(): lowering + C + compiler + cache, checked against numpy."""

from __future__ import annotations

import platform
import re
import subprocess
import threading
import time

import numpy as np
import pytest

from metaschedule import te
from metaschedule.codegen import BuildError, build, c_helpers
from metaschedule.codegen.isa import isa_of
from metaschedule.target import Target
from metaschedule.testing import RandomArrays, matmul
from metaschedule.tir import (
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    For,
    ForKind,
    IRModule,
    IterType,
    IterVar,
    PrimFunc,
    Range,
    SeqStmt,
    Var,
    const,
)
from metaschedule.tir.stmt import true

pytestmark = pytest.mark.compiler
rand = RandomArrays(2)


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


# ----------------------------------------------------------------------------- workloads


def _region(buf, *idx):
    return BufferRegion(buf, tuple(Range(i, 1) for i in idx))


def tiled_matmul(n: int = 64, ti: int = 4, tj: int = 16) -> PrimFunc:
    """A scheduled matmul: parallel row tiles, a "local" accumulator tile computed at the
    (i0, j0) tile (allocated at the root, as cache_write leaves it), unrolled rows and a
    vectorized inner column loop."""
    A, B, C = (Buffer(name, (n, n)) for name in "ABC")
    CL = Buffer("C_local", (n, n), scope="local")
    i0, j0, k, i1, j1, i2, j2 = (Var(x) for x in ("i0", "j0", "k", "i1", "j1", "i2", "j2"))
    vi, vj, vk, wi, wj = (Var(x) for x in ("vi", "vj", "vk", "wi", "wj"))
    update = Block(
        (
            IterVar(vi, Range(0, n)),
            IterVar(vj, Range(0, n)),
            IterVar(vk, Range(0, n), IterType.COMM_REDUCE),
        ),
        (_region(A, vi, vk), _region(B, vk, vj)),
        (_region(CL, vi, vj),),
        "C_local",
        BufferStore(CL, CL[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
        init=BufferStore(CL, const(0.0), (vi, vj)),
    )
    nest1 = For(
        k,
        0,
        n,
        ForKind.SERIAL,
        For(
            i1,
            0,
            ti,
            ForKind.UNROLLED,
            For(
                j1,
                0,
                tj,
                ForKind.VECTORIZED,
                BlockRealize((i0 * ti + i1, j0 * tj + j1, k), true(), update),
            ),
        ),
    )
    write_back = Block(
        (IterVar(wi, Range(0, n)), IterVar(wj, Range(0, n))),
        (_region(CL, wi, wj),),
        (_region(C, wi, wj),),
        "C",
        BufferStore(C, CL[wi, wj], (wi, wj)),
    )
    nest2 = For(
        i2,
        0,
        ti,
        ForKind.SERIAL,
        For(
            j2,
            0,
            tj,
            ForKind.VECTORIZED,
            BlockRealize((i0 * ti + i2, j0 * tj + j2), true(), write_back),
        ),
    )
    body = For(
        i0,
        0,
        n // ti,
        ForKind.PARALLEL,
        For(j0, 0, n // tj, ForKind.SERIAL, SeqStmt((nest1, nest2))),
    )
    root = Block((), (), (), "root", body, alloc_buffers=(CL,))
    return PrimFunc((A, B, C), BlockRealize((), true(), root))


# ----------------------------------------------------------------------------- numerics


def test_matmul_matches_numpy():
    lib = build(matmul(33, 17, 29))
    a, b, c = rand(33, 29), rand(29, 17), np.zeros((33, 17), "float32")
    lib(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5)


def test_scheduled_tiled_matmul_with_local_tile():
    lib = build(tiled_matmul(64, 4, 16))
    src = lib.get_source()
    lanes = min(16, isa_of(Target("cpu")).lanes("float32"))  # 16-lane loops, in registers
    assert "#pragma omp parallel for" in src and f"ms_f32x{lanes}" in src
    assert "float C_local[64] __attribute__((aligned(64)));" in src  # a 4x16 register tile
    assert "not vectorized" not in src
    a, b, c = rand(64, 64), rand(64, 64), np.zeros((64, 64), "float32")
    lib(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_reduction_elementwise_and_intermediate_buffer():
    A = te.placeholder((20, 30), name="A")
    k = te.reduce_axis((0, 30), name="k")
    M = te.compute((20,), lambda i: te.max(A[i, k], axis=k), name="M")
    E = te.compute((20, 30), lambda i, j: te.exp(A[i, j] - M[i]), name="E")
    k2 = te.reduce_axis((0, 30), name="k2")
    S = te.compute((20,), lambda i: te.sum(E[i, k2], axis=k2), name="S")
    Y = te.compute((20, 30), lambda i, j: E[i, j] / S[i], name="Y")
    lib = build(te.create_prim_func([A, Y]))
    a = rand(20, 30)
    a[3, :] = -np.inf  # max-reductions start at -inf: no -ffast-math
    a[3, 5] = 1.0
    y = np.zeros_like(a)
    lib(a, y)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-6)


def test_int_and_float64_kernels():
    lib = build(matmul(7, 5, 6, dtype="int32"))
    a = rand.rng.integers(-50, 50, (7, 6)).astype("int32")
    b = rand.rng.integers(-50, 50, (6, 5)).astype("int32")
    c = np.zeros((7, 5), "int32")
    lib(a, b, c)
    np.testing.assert_array_equal(c, a @ b)
    lib = build(matmul(7, 5, 6, dtype="float64"))
    a, b, c = rand(7, 6, dtype="float64"), rand(6, 5, dtype="float64"), np.zeros((7, 5))
    lib(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-12)


def test_irmodule_with_two_functions():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((8,), lambda i: A[i] + 1.0, name="C")
    mod = IRModule({"double": te.create_prim_func([A, B]), "inc": te.create_prim_func([A, C])})
    lib = build(mod)
    a, out = rand(8), np.zeros(8, "float32")
    lib["double"](a, out)
    np.testing.assert_allclose(out, a * 2)
    lib["inc"](a, out)
    np.testing.assert_allclose(out, a + 1)
    with pytest.raises(ValueError, match="no 'main' and several functions"):
        lib(a, out)
    assert build(IRModule({"inc": mod["inc"]})).entry_name == "inc"


# ----------------------------------------------------------------------------- errors


def test_dynamic_shapes_are_rejected():
    n = Var("n")
    A = Buffer("A", (n,))
    i = Var("i")
    func = PrimFunc((A,), For(i, 0, n, ForKind.SERIAL, BufferStore(A, const(1.0), (i,))))
    with pytest.raises(ValueError, match="dynamic shapes are not supported"):
        build(func)


def test_non_cpu_and_bad_inputs():
    from metaschedule.codegen.cuda_codegen import CodegenError

    with pytest.raises(CodegenError, match="outside any GPU kernel"):  # nothing bound
        build(matmul(2, 2, 2), "cuda")
    with pytest.raises(TypeError, match="PrimFunc or an IRModule"):
        build("main")


def test_compiler_error_carries_source_and_message(monkeypatch):
    # a "bad intrinsic": exp spelled as a function the C library does not declare
    monkeypatch.setitem(c_helpers._MATH, "exp", "ms_no_such_intrinsic")
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: te.exp(A[i]), name="B")
    with pytest.raises(BuildError) as info:
        build(te.create_prim_func([A, B]))
    err = info.value
    assert isinstance(err, RuntimeError)
    assert "implicit declaration of function" in str(err)
    assert "ms_no_such_intrinsicf" in str(err) and "ms_no_such_intrinsicf" in err.compiler_output
    assert "ms_no_such_intrinsicf(A[i])" in err.source
    assert "int32_t main_kernel(void** args)" in err.source


def test_missing_or_failing_compiler(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/ms-cc")
    with pytest.raises(BuildError, match="cannot run the C compiler '/nonexistent/ms-cc'"):
        build(matmul(2, 2, 2))
    monkeypatch.setenv("CC", "false")
    with pytest.raises(BuildError, match=r"C compilation failed \(exit code 1\)"):
        build(matmul(2, 2, 2))


# ----------------------------------------------------------------------------- speed, cache


def test_build_1024_matmul_is_fast_and_cached(tmp_path, monkeypatch):
    import metaschedule.codegen.compiler as compiler

    runs = []
    real_run = compiler.run_bounded

    def counting_run(cmd, *args, **kwargs):
        runs.append(list(cmd))
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(compiler, "run_bounded", counting_run)
    func = matmul(1024, 1024, 1024)
    start = time.perf_counter()
    lib = build(func, cache_dir=str(tmp_path / "k"))
    cold = time.perf_counter() - start
    compiles = len(runs)
    lib2 = build(func, cache_dir=str(tmp_path / "k"))
    # a generous bound (a cold build takes ~0.2 s): the source must stay small
    assert cold < 10.0, f"building a 1024^3 matmul took {cold:.2f} s"
    assert compiles >= 1 and len(runs) == compiles, "the second build ran the compiler again"
    assert lib2.path == lib.path
    name = lib.path.split("/")[-1]
    assert sorted(p.name for p in (tmp_path / "k").iterdir()) == [name, f"{name}.sha256"]


def test_concurrent_builds_of_one_kernel(tmp_path):
    func = matmul(16, 16, 16)
    paths, errors = [], []

    def work():
        try:
            paths.append(build(func, cache_dir=str(tmp_path)).path)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(paths)) == 1
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".sha256", ".so"]  # no temporaries


def test_target_flags_reach_the_compiler():
    lib = build(matmul(4, 4, 4), Target("llvm -mcpu=x86-64 -num-cores=1"))
    assert lib.target.mcpu == "x86-64"
    a, b, c = rand(4, 4), rand(4, 4), np.zeros((4, 4), "float32")
    lib(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- matmul recipe


def _recipe_module(m: int, n: int, k: int, target: Target):
    from metaschedule.schedule import Schedule
    from metaschedule.te import ops
    from metaschedule.testing.schedules import matmul_schedule

    A = te.placeholder((m, k), "float32", "A")
    B = te.placeholder((k, n), "float32", "B")
    sch = Schedule(te.create_prim_func([A, B, ops.matmul(A, B)]))
    matmul_schedule(sch, target, row_block=32, col_block=64)
    return sch.mod


AVX512 = Target("llvm -mcpu=x86-64-v4 -num-cores=2")
AVX2 = Target("llvm -mcpu=haswell -num-cores=2")


@pytest.mark.parametrize(
    "shape,target",
    [((128, 128, 64), AVX512), ((96, 80, 72), AVX512), ((64, 96, 40), AVX2)],
    ids=["square-avx512", "uneven-avx512", "avx2"],
)
def test_matmul_recipe_matches_numpy_with_private_register_tiles(shape, target):
    m, n, k = shape
    lib = build(_recipe_module(m, n, k, target), target)
    src = lib.get_source()
    # the accumulator tile is a small stack array inside the parallel loop; the packed B
    # panel is allocated once per thread, never inside a loop
    assert re.search(r"float T_matmul_NN_local\[\d+\] __attribute__\(\(aligned\(64\)\)\);", src)
    assert "#pragma omp parallel" in src and "not vectorized" not in src
    assert src.count("aligned_alloc") <= 1
    a, b, c = rand(m, k), rand(k, n), np.zeros((m, n), "float32")
    lib(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"), reason="checks x86 AVX-512 assembly"
)
def test_matmul_recipe_inner_loop_keeps_accumulators_in_registers(tmp_path):
    """The hot loop of the recipe: one FMA per accumulator register, no stack traffic
    (spills or reloads of accumulators) and no masked lane inserts."""
    from metaschedule.codegen import codegen_c
    from metaschedule.codegen.compiler import compiler_command, compiler_flags
    from metaschedule.testing.schedules import matmul_tiles
    from metaschedule.tir.transform import lower

    target = AVX512  # assembly only: any x86 host
    mod = _recipe_module(128, 128, 256, target)
    (src_path, asm_path) = (tmp_path / "k.c", tmp_path / "k.s")
    src_path.write_text(codegen_c(IRModule({"main": lower(mod["main"])}), target).code)
    flags = [f for f in compiler_flags(target) if f not in ("-shared", "-Wl,-z,defs")]
    subprocess.run(
        [*compiler_command(), *flags, "-S", str(src_path), "-o", str(asm_path)],
        check=True,
        capture_output=True,
    )
    # basic blocks: from a label to the first jump
    blocks = [
        re.split(r"\n\tj\w+\t", blk)[0] for blk in re.split(r"\n\.L\w+:", asm_path.read_text())
    ]
    hot = [blk for blk in blocks if "vfmadd" in blk and "zmm" in blk]
    assert hot, "no AVX-512 FMA loop in the generated assembly"
    loop = max(hot, key=lambda blk: blk.count("vfmadd"))
    t = matmul_tiles(target, 128, 128, row_block=32, col_block=64)
    assert loop.count("vfmadd") >= t.rows * t.vectors
    assert "rsp" not in loop and "rbp)" not in loop and "{%k" not in loop
