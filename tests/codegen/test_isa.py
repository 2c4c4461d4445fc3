"""The ISA record (codegen/isa.py): named CPUs, -mattr, aarch64 triples, the host's
record, and code that builds, runs and stays in its ISA on every ISA the host runs."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metaschedule as ms
from metaschedule import te, tir
from metaschedule.codegen.c_accumulate import TileLimits
from metaschedule.codegen.c_codegen import FunctionWriter
from metaschedule.codegen.c_helpers import Helpers
from metaschedule.codegen.isa import CpuIsa, host_runs, isa_of, known_cpus, named_isa
from metaschedule.target import HostCpuInfo, Target
from metaschedule.te import ops
from metaschedule.testing.hosts import native_target
from metaschedule.testing.isas import AVX2, AVX512, SSE2, X86_TARGETS, runnable_targets

RUNNABLE = runnable_targets()


def test_named_x86_cpus():
    haswell = isa_of("llvm -mcpu=haswell")
    assert (haswell.arch, haswell.name, haswell.vector_bytes, haswell.vector_registers) == (
        "x86_64",
        "avx2",
        32,
        16,
    )
    assert haswell.has("avx2", "fma") and not haswell.has("avx512f")
    assert haswell.lanes("float32") == 8 and haswell.lanes("int8") == 32
    sse = isa_of("llvm -mcpu=x86-64")
    assert (sse.name, sse.vector_bytes, sse.vector_registers) == ("sse2", 16, 16)
    assert not sse.has("fma") and not sse.has("avx")
    skx = isa_of("llvm -mcpu=skylake-avx512")
    assert (skx.name, skx.vector_bytes, skx.vector_registers, skx.datapath_bits) == (
        "avx512",
        64,
        32,
        512,
    )
    # Zen 4 runs AVX-512 on 256-bit units: one 16-lane FMA a cycle
    zen4 = named_isa("znver4")
    assert zen4 is not None and zen4.datapath_bits == 256 and zen4.fma_per_cycle == 1.0
    assert zen4.has("avx512vnni") and not isa_of("llvm -mcpu=znver3").has("avx512f")


def test_every_named_cpu_gives_its_targets_vector_width():
    for name in known_cpus("x86_64"):
        isa = named_isa(name)
        assert isa is not None
        assert Target(f"llvm -mcpu={name}").vector_width == isa.vector_bytes, name
        assert isa_of(f"llvm -mcpu={name}").vector_registers == (
            32 if isa.has("avx512f") else 16
        ), name


def test_aarch64_targets():
    n1 = isa_of("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1")
    assert (n1.arch, n1.name, n1.vector_bytes, n1.vector_registers) == ("aarch64", "neon", 16, 32)
    assert n1.has("dotprod") and n1.register_constraint == "w"
    plain = Target("llvm -mtriple=aarch64-linux-gnu")
    assert plain.vector_width == 16 and isa_of(plain).arch == "aarch64"
    assert not isa_of(plain).has("dotprod")
    dot = isa_of("llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod")
    assert dot.has("neon", "dotprod")
    assert isa_of("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72").fma_latency == 7
    assert not host_runs("llvm -mtriple=aarch64-linux-gnu") or n1.arch == "aarch64"


def test_mattr_adds_and_removes_extensions():
    wider = isa_of("llvm -mcpu=x86-64 -mattr=+avx2,+fma")
    assert (wider.name, wider.vector_bytes) == ("avx2", 32) and wider.has("fma")
    narrower = isa_of("llvm -mcpu=skylake-avx512 -mattr=-avx512f")
    assert narrower.name == "avx2" and narrower.vector_registers == 16
    assert not any(e.startswith("avx512") for e in narrower.extensions)


def test_the_target_vector_width_narrows_the_vectors_never_widens_them():
    assert isa_of("llvm -mcpu=skylake-avx512 -vector_width=32").vector_bytes == 32
    # AVX-512VL keeps its 32 registers at 256 bits
    assert isa_of("llvm -mcpu=skylake-avx512 -vector_width=32").vector_registers == 32
    assert isa_of("llvm -mcpu=haswell -vector_width=64").vector_bytes == 32


def test_the_hosts_record_comes_from_its_flags():
    zen3 = HostCpuInfo(
        physical_cores=2,
        vector_width=32,
        cache_line_bytes=64,
        l1_cache_bytes=32768,
        l2_cache_bytes=512 * 1024,
        l3_cache_bytes=None,
        vendor="AuthenticAMD",
        family=25,
        model=0x01,
        flags=frozenset({"sse", "sse2", "pni", "ssse3", "sse4_1", "avx", "avx2", "fma", "bmi1"}),
    )
    isa = isa_of(native_target(zen3), host=zen3)
    assert (isa.name, isa.vector_bytes, isa.vector_registers, isa.cpu) == ("avx2", 32, 16, "native")
    assert isa.has("sse3", "sse4.1", "bmi", "fma") and not isa.has("pni")
    assert (isa.fma_units, isa.fma_latency, isa.datapath_bits) == (2, 4, 256)  # znver3's row
    assert (isa.l1_bytes, isa.l2_bytes) == (32768, 512 * 1024)


def test_the_real_hosts_record_matches_its_target():
    host = isa_of(Target("llvm"))
    assert host.vector_bytes == Target("llvm").vector_width
    assert host_runs(Target("llvm"))


def test_a_gpu_target_has_no_cpu_record():
    with pytest.raises(ValueError, match="cpu target"):
        isa_of(Target("cuda"))


def test_peak_and_chains():
    zen5 = named_isa("znver5")
    assert isinstance(zen5, CpuIsa)
    assert zen5.peak_flops_per_cycle("float32") == 64.0  # two 16-lane FMAs
    assert zen5.fma_chains == 8
    assert named_isa("haswell").fma_chains == 10  # type: ignore[union-attr]


def test_tile_limits_follow_the_register_file():
    avx512, avx2 = TileLimits.of(isa_of(AVX512)), TileLimits.of(isa_of(AVX2))
    assert (avx512.max_accumulators, avx512.max_straight_accumulators) == (64, 28)
    assert (avx2.max_accumulators, avx2.max_straight_accumulators) == (32, 12)
    assert avx2.jam_accumulators == 8 and avx2.straight_registers == 16


def test_no_register_pin_on_a_vector_wider_than_the_register():
    a = te.placeholder((4,), "float32", "A")
    func = te.create_prim_func([a, te.compute((4,), lambda i: a[i] * 2.0, name="B")])
    fw = FunctionWriter(func, AVX2, Helpers(), "main")
    assert fw.pin("x", "float32", 8) == "MS_IN_REG(x);"
    assert fw.pin("x", "float32", 16) == ""  # 64 bytes: no ymm holds it
    assert fw.pin("x", "float64", 4) == "MS_IN_REG(x);"


# ----------------------------------------------------------------------------- built code


def _vector_matmul(m: int, n: int, k: int, lanes: int) -> tir.Schedule:
    """A matmul whose j loop is split so its inner ``lanes`` iterations are vectorized."""
    a = te.placeholder((m, k), "float32", "A")
    b = te.placeholder((k, n), "float32", "B")
    sch = tir.Schedule(te.create_prim_func([a, b, ops.matmul(a, b)]))
    i, j, kk = sch.get_loops(sch.get_block("T_matmul_NN"))
    j0, j1 = sch.split(j, [None, lanes])
    sch.reorder(i, j0, kk, j1)
    sch.vectorize(j1)
    return sch


def _elementwise(n: int, lanes: int) -> tir.Schedule:
    a = te.placeholder((3, n), "float32", "A")
    b = te.placeholder((3, n), "float32", "B")
    c = te.compute((3, n), lambda i, j: te.max(a[i, j] * b[i, j] + 1.0, a[i, j]), name="C")
    sch = tir.Schedule(te.create_prim_func([a, b, c]))
    i, j = sch.get_loops(sch.get_block("C"))
    _, j1 = sch.split(j, [None, lanes])
    sch.vectorize(j1)
    return sch


@pytest.mark.compiler
@pytest.mark.usefixtures("session_kernel_cache")
@pytest.mark.parametrize("isa", sorted(RUNNABLE))
@settings(max_examples=6)
@given(lanes=st.integers(1, 64), rows=st.integers(1, 5), depth=st.integers(1, 9))
def test_any_vector_length_builds_and_computes_on_every_isa(isa, lanes, rows, depth):
    target = RUNNABLE[isa]
    rng = np.random.default_rng(lanes * 100 + rows)
    n = lanes * 2
    a = rng.standard_normal((rows, depth)).astype("float32")
    b = rng.standard_normal((depth, n)).astype("float32")
    c = np.zeros((rows, n), "float32")
    ms.build(_vector_matmul(rows, n, depth, lanes).mod, target)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    x, y = (rng.standard_normal((3, n)).astype("float32") for _ in range(2))
    z = np.zeros((3, n), "float32")
    ms.build(_elementwise(n, lanes).mod, target)(x, y, z)
    np.testing.assert_allclose(z, np.maximum(x * y + 1.0, x), rtol=1e-5, atol=1e-5)  # FMA


def _registers_used(path: str) -> set[str]:
    out = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", path], capture_output=True, text=True, check=True
    ).stdout
    return {r for r in ("xmm", "ymm", "zmm") if f"%{r}" in out}


@pytest.mark.compiler
@pytest.mark.usefixtures("session_kernel_cache")
@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs objdump (binutils)")
@pytest.mark.parametrize("name", ["sse2", "avx2", "avx512"])
def test_a_narrower_targets_code_stays_in_its_isa(name):
    """Built for AVX2 (or SSE2) on any host, the kernel holds no zmm (nor ymm) register,
    however wide the schedule's vector loops are; checked by disassembly, so it holds
    also for ISAs the host cannot run."""
    target = X86_TARGETS[name]
    sch = _vector_matmul(8, 64, 16, 32)  # 32-lane vector loops: wider than any register
    lib = ms.build(sch.mod, target)
    used = _registers_used(lib.path)
    if name == "sse2":
        assert used <= {"xmm"}, used
    elif name == "avx2":
        assert "zmm" not in used and "ymm" in used, used
    else:
        assert "zmm" in used, used
    if target in RUNNABLE.values():
        a = np.ones((8, 16), "float32")
        b = np.arange(16 * 64, dtype="float32").reshape(16, 64) / 64
        c = np.zeros((8, 64), "float32")
        lib(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_the_x86_targets_name_the_isas():
    assert [isa_of(t).name for t in (SSE2, AVX2, AVX512)] == ["sse2", "avx2", "avx512"]
