"""aarch64 by cross-compilation: the flags, NEON code, a CrossModule that cannot be called
here but exports and reads like a module, and kernels run under qemu-user
(``ms.testing.run_emulated``) computing numpy's results.

Needs ``gcc-aarch64-linux-gnu`` (and ``qemu-user`` for the runs); skipped without them.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

from metaschedule import te, tir
from metaschedule.codegen import BuildError, build
from metaschedule.codegen.compiler import compiler_command, compiler_flags
from metaschedule.codegen.isa import host_arch
from metaschedule.runtime import UnsupportedIsaError, load_module
from metaschedule.runtime.cross_module import CrossModule
from metaschedule.schedule import Schedule
from metaschedule.target import Target
from metaschedule.testing import EmulationError, RandomArrays, run_emulated
from metaschedule.testing.schedules import matmul_schedule
from metaschedule.tir.op import max as tir_max

N1 = Target("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1 -num-cores=2")
GENERIC = Target("llvm -mtriple=aarch64-linux-gnu -num-cores=2")
TARGETS = {"neoverse-n1": N1, "generic": GENERIC}
rand = RandomArrays(7)

_CROSS = shutil.which(os.environ.get("CROSS_CC") or "aarch64-linux-gnu-gcc")
needs_cross = pytest.mark.skipif(
    _CROSS is None or host_arch() == "aarch64",
    reason="needs an x86 host with the aarch64 cross compiler "
    "(apt-get install gcc-aarch64-linux-gnu)",
)
needs_qemu = pytest.mark.skipif(
    shutil.which("qemu-aarch64") is None or not os.path.isdir("/usr/aarch64-linux-gnu"),
    reason="needs qemu-aarch64 (apt-get install qemu-user)",
)


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


# ----------------------------------------------------------------------------- workloads


def matmul(target: Target, m: int = 64, n: int = 64, k: int = 32):
    """The vectorized, register-tiled, parallel matmul recipe."""
    a = te.placeholder((m, k), "float32", name="A")
    b = te.placeholder((k, n), "float32", name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="T_matmul_NN")
    sch = Schedule(te.create_prim_func([a, b, c]))
    matmul_schedule(sch, target)
    return sch.mod


def elementwise(n: int = 1000, lanes: int = 4):
    """``max(tanh(x), exp(y) - 2)``, vectorized ``lanes`` wide (1000: a remainder loop)."""
    x = te.placeholder((n,), "float32", name="X")
    y = te.placeholder((n,), "float32", name="Y")
    z = te.compute((n,), lambda i: tir_max(te.tanh(x[i]), te.exp(y[i]) - 2.0), name="Z")
    sch = tir.Schedule(te.create_prim_func([x, y, z]))
    (i,) = sch.get_loops(sch.get_block("Z"))
    _, inner = sch.split(i, [None, lanes])
    sch.vectorize(inner)
    return sch.mod


def row_sums(m: int = 48, n: int = 200):
    """Row sums, parallel over rows."""
    a = te.placeholder((m, n), "float32", name="A")
    r = te.reduce_axis((0, n), name="r")
    s = te.compute((m,), lambda i: te.sum(a[i, r], axis=r), name="S")
    sch = tir.Schedule(te.create_prim_func([a, s]))
    i, _ = sch.get_loops(sch.get_block("S"))
    sch.parallel(i)
    return sch.mod


# ----------------------------------------------------------------------------- flags


def test_aarch64_flags_name_the_cpu_and_no_x86_isa(monkeypatch):
    monkeypatch.setenv("CROSS_CC", "aarch64-linux-gnu-gcc")
    assert compiler_command(N1) == ["aarch64-linux-gnu-gcc"]
    flags = compiler_flags(N1)
    assert "-mcpu=neoverse-n1" in flags
    assert not [f for f in flags if f.startswith("-march") or "x86" in f or "avx" in f]
    assert "-march=armv8-a" in compiler_flags(GENERIC)
    dot = Target("llvm -mtriple=aarch64-linux-gnu -mattr=+dotprod")
    assert "-march=armv8.2-a+dotprod" in compiler_flags(dot)


def test_mattr_becomes_gcc_feature_modifiers(monkeypatch):
    monkeypatch.setenv("CROSS_CC", "aarch64-linux-gnu-gcc")
    t = Target("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1 -mattr=-dotprod,+crypto")
    assert "-mcpu=neoverse-n1+nodotprod+crypto" in compiler_flags(t)


def test_a_cpu_the_cross_compiler_does_not_know_is_replaced(tmp_path, monkeypatch, caplog):
    """GCC 12 does not know apple-m1: its ISA record's extensions on ARMv8.2 instead."""
    fake = tmp_path / "old-aarch64-gcc"
    fake.write_text(
        '#!/bin/sh\nfor a in "$@"; do case "$a" in -mcpu=apple-m1|-mcpu=neoverse-n9) exit 1;; '
        "esac; done\necho 'aarch64-linux-gnu-gcc (Debian 12.2.0-14) 12.2.0'\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("CROSS_CC", str(fake))
    with caplog.at_level("WARNING", logger="metaschedule.codegen.compiler"):
        flags = compiler_flags(Target("llvm -mtriple=aarch64-linux-gnu -mcpu=apple-m1"))
    assert "-march=armv8.2-a+dotprod" in flags
    assert "does not know -mcpu=apple-m1" in caplog.text
    with pytest.raises(BuildError, match="does not know -mcpu=neoverse-n9"):
        compiler_flags(Target("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n9"))


def test_the_cross_compiler_is_cross_cc_else_debians(monkeypatch):
    monkeypatch.delenv("CROSS_CC", raising=False)
    monkeypatch.setenv("CC", "gcc-for-the-host")
    assert compiler_command(N1) == ["aarch64-linux-gnu-gcc"]
    monkeypatch.setenv("CROSS_CC", "ccache /opt/cross/bin/aarch64-gcc")
    assert compiler_command(N1) == ["ccache", "/opt/cross/bin/aarch64-gcc"]
    if host_arch() == "x86_64":
        assert compiler_command(Target("llvm")) == ["gcc-for-the-host"]


@pytest.mark.compiler
@pytest.mark.skipif(host_arch() == "aarch64", reason="aarch64 is this host's own")
def test_a_missing_cross_compiler_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CROSS_CC", str(tmp_path / "no-such-gcc"))
    with pytest.raises(BuildError) as err:
        build(elementwise(), N1)
    message = str(err.value)
    assert "\n" not in message
    assert "no-such-gcc" in message and "apt-get install gcc-aarch64-linux-gnu" in message


# ----------------------------------------------------------------------------- NEON code


@pytest.mark.compiler
@needs_cross
def test_a_vectorized_matmul_becomes_neon_fmla(tmp_path):
    lib = build(matmul(N1), N1)
    assert isinstance(lib, CrossModule)
    objdump = shutil.which("aarch64-linux-gnu-objdump")
    if objdump is None:
        pytest.skip("needs aarch64-linux-gnu-objdump (binutils-aarch64-linux-gnu)")
    asm = subprocess.run(
        [objdump, "-d", lib.path], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    fmla = [line for line in asm.splitlines() if "\tfmla\t" in line and ".4s" in line]
    assert len(fmla) >= 8, "no 4 x float32 NEON multiply-add in the matmul"


# ----------------------------------------------------------------------------- the module


@pytest.mark.compiler
@needs_cross
def test_a_cross_module_is_read_not_loaded_and_cannot_be_called_here():
    lib = build(elementwise(), N1)
    assert isinstance(lib, CrossModule) and lib.arch == "aarch64"
    assert lib.function_names == ["main"] and lib["main"].param_names == ["X", "Y", "Z"]
    assert lib.target == N1
    assert "ms_vexp_f32x4" in lib.get_source()
    x, y, z = rand(1000), rand(1000), np.zeros(1000, "float32")
    with pytest.raises(UnsupportedIsaError, match="built for aarch64.*ms.testing.run_emulated"):
        lib(x, y, z)
    with pytest.raises(UnsupportedIsaError, match="this machine is x86_64"):
        lib.time_evaluator("main", number=1)(x, y, z)


@pytest.mark.compiler
@needs_cross
def test_export_library_writes_an_aarch64_elf_that_loads_as_a_cross_module(tmp_path):
    lib = build(row_sums(), GENERIC)
    path = lib.export_library(tmp_path / "sums.so")
    head = open(path, "rb").read(20)
    assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == 183  # EM_AARCH64
    again = load_module(path)
    assert isinstance(again, CrossModule)
    assert again.metadata == lib.metadata and again.get_source() == lib.get_source()


# ----------------------------------------------------------------------------- under qemu


@pytest.mark.compiler
@needs_cross
@needs_qemu
@pytest.mark.parametrize("cpu", TARGETS)
def test_matmul_under_qemu(cpu):
    target = TARGETS[cpu]
    a, b = rand(64, 32), rand(32, 64)
    _, _, c = run_emulated(build(matmul(target), target), a, b, np.zeros((64, 64), "float32"))
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.compiler
@needs_cross
@needs_qemu
@pytest.mark.parametrize("cpu", TARGETS)
def test_elementwise_exp_tanh_max_under_qemu(cpu):
    lib = build(elementwise(), TARGETS[cpu])
    x, y = rand(1000) * 4, rand(1000) * 4
    z = np.zeros(1000, "float32")
    out = run_emulated(lib, x, y, z)
    np.testing.assert_allclose(out[2], np.maximum(np.tanh(x), np.exp(y) - 2), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out[0], x)  # inputs come back unchanged
    assert not z.any()  # the caller's arrays are not written


@pytest.mark.compiler
@needs_cross
@needs_qemu
@pytest.mark.parametrize("cpu", TARGETS)
def test_reduction_under_qemu(cpu):
    a = rand(48, 200)
    (_, s) = run_emulated(build(row_sums(), TARGETS[cpu]), a, np.zeros(48, "float32"))
    np.testing.assert_allclose(s, a.sum(axis=1), rtol=1e-4, atol=1e-4)


@pytest.mark.compiler
@needs_cross
@needs_qemu
def test_run_emulated_checks_arguments_as_a_call_does():
    lib = build(row_sums(), N1)
    with pytest.raises(ValueError, match="parameter S of main expects shape"):
        run_emulated(lib, rand(48, 200), np.zeros(47, "float32"))


@pytest.mark.compiler
@needs_cross
def test_a_missing_qemu_is_named(tmp_path, monkeypatch):
    lib = build(row_sums(), N1)
    monkeypatch.setenv("PATH", str(tmp_path))  # no qemu-aarch64 on it
    with pytest.raises(EmulationError, match="apt-get install qemu-user"):
        run_emulated(lib, rand(48, 200), np.zeros(48, "float32"))


@pytest.mark.compiler
@needs_cross
def test_an_emulated_run_is_bounded(tmp_path):
    hang = tmp_path / "hanging-qemu"
    hang.write_text("#!/bin/sh\nsleep 60\n")
    hang.chmod(0o755)
    lib = build(row_sums(), N1)
    with pytest.raises(EmulationError, match="more than 1 s and was killed"):
        run_emulated(
            lib, rand(48, 200), np.zeros(48, "float32"), timeout_sec=1, emulator=[str(hang)]
        )
