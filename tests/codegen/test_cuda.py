"""The CUDA target: GPU lowering, the emulator, CUDA C generation and nvcc."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import metaschedule as ms
from metaschedule import te
from metaschedule.codegen.compiler import BuildError
from metaschedule.codegen.cuda_codegen import CodegenError, codegen_cuda
from metaschedule.codegen.nvcc import parse_ptxas
from metaschedule.runtime import CudaUnavailableError, cuda_unavailable_reason, load_module
from metaschedule.testing.gpu_schedules import shared_memory_matmul
from metaschedule.tir import stmt as S
from metaschedule.tir.functor import Visitor
from metaschedule.tir.gpu_emulator import GpuRaceError, emulate
from metaschedule.tir.interpreter import interpret
from metaschedule.tir.transform import GPU_LOWER_PASSES, LOWER_PASSES, is_storage_sync, lower

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "cuda_shared_matmul.cu")
needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None and not os.environ.get("NVCC"), reason="nvcc is not installed"
)


def _inputs(n: int):
    rng = np.random.default_rng(0)
    return rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)


def _syncs(func) -> int:
    found = []

    class V(Visitor):
        def visit_Evaluate(self, s):
            if is_storage_sync(s):
                found.append(s)

    V().visit(func.body)
    return len(found)


def test_target_fills_limits_from_the_arch():
    t = ms.Target("cuda -arch=sm_90")
    assert (t.max_threads_per_block, t.thread_warp_size, t.registers_per_block) == (1024, 32, 65536)
    assert t.max_shared_memory_per_block == 49152
    assert t.max_shared_memory_per_block_optin == 232448
    assert ms.Target({"kind": "cuda", "arch": "sm_80"}).max_shared_memory_per_block_optin == 166912
    assert ms.Target("cuda -arch=sm_75").max_shared_memory_per_block_optin == 65536
    with pytest.raises(ValueError, match="older than sm_50"):
        ms.Target("cuda -arch=sm_35")


def test_barriers_go_where_shared_memory_changes_hands():
    lowered = lower(shared_memory_matmul(32, 8).mod["main"], GPU_LOWER_PASSES)
    # one after the tiles are loaded, one before they are overwritten in the next step
    assert _syncs(lowered) == 2


def test_emulator_computes_the_cooperative_matmul():
    sch = shared_memory_matmul(32, 8)
    a, b = _inputs(32)
    c = np.zeros((32, 32), np.float32)
    emulate(sch.mod, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    c2 = np.zeros_like(c)
    interpret(sch.mod, a, b, c2)  # the reference interpreter hands it to the emulator
    np.testing.assert_array_equal(c, c2)


def test_emulator_reports_a_missing_barrier():
    func = lower(shared_memory_matmul(32, 8).mod["main"], LOWER_PASSES)  # no barriers
    assert _syncs(func) == 0
    a, b = _inputs(32)
    with pytest.raises(GpuRaceError, match="__syncthreads"):
        emulate(func, a, b, np.zeros((32, 32), np.float32))


def test_emulator_reports_a_barrier_in_divergent_code():
    n = 8
    a = te.placeholder((n,), "float32", "A")
    b = te.compute((n,), lambda i: a[i] * 2, name="B")
    sch = ms.tir.Schedule(te.create_prim_func([a, b]))
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "threadIdx.x")
    func = lower(sch.mod["main"], LOWER_PASSES)
    loop = func.body
    tx = loop.loop_var
    store = loop.body
    from metaschedule.tir import expr as E
    from metaschedule.tir.transform import storage_sync

    divergent = S.IfThenElse(
        E.LT(tx, E.const(4, tx.dtype)), S.SeqStmt((store, storage_sync())), store
    )
    func = func.with_body(
        S.For(tx, loop.min, loop.extent, loop.kind, divergent, thread_binding=loop.thread_binding)
    )
    with pytest.raises(GpuRaceError, match="never reach"):
        emulate(func, np.ones(n, np.float32), np.zeros(n, np.float32))


def test_cuda_source_matches_the_golden_file():
    lowered = lower(shared_memory_matmul(64, 16).mod["main"], GPU_LOWER_PASSES)
    src = codegen_cuda(lowered, "cuda -arch=sm_80")
    body = src.code.split("\n", 1)[1]  # the first line names the full target
    if os.environ.get("MS_UPDATE_GOLDEN"):
        with open(GOLDEN, "w", encoding="utf-8") as f:
            f.write(body)
    with open(GOLDEN, encoding="utf-8") as f:
        assert body == f.read(), "regenerate with MS_UPDATE_GOLDEN=1 if the change is intended"
    (kernel,) = src.kernels
    assert kernel.grid == (4, 4, 1) and kernel.block == (16, 16, 1)
    assert kernel.shared_bytes == 2 * 16 * 16 * 4
    assert "__launch_bounds__(256)" in src.code and src.code.count("__syncthreads();") == 2


def test_codegen_rejects_what_a_gpu_cannot_run():
    a = te.placeholder((8,), "float32", "A")
    func = te.create_prim_func([a, te.compute((8,), lambda i: a[i] + 1, name="B")])
    with pytest.raises(CodegenError, match="outside any GPU kernel.*RewriteUnboundBlock"):
        codegen_cuda(lower(func, GPU_LOWER_PASSES), "cuda")
    sch = ms.tir.Schedule(func)
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "threadIdx.x")
    with pytest.raises(CodegenError, match="cuda targets"):
        codegen_cuda(lower(sch.mod["main"], GPU_LOWER_PASSES), "cpu")


def test_ptxas_report_is_parsed():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'main_kernel0' for 'sm_80'
ptxas info    : Function properties for main_kernel0
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 376 bytes cmem[0]
"""
    r = parse_ptxas(log)["main_kernel0"]
    assert (
        r.registers,
        r.shared_bytes,
        r.spill_stores,
        r.spill_loads,
        r.stack_bytes,
        r.barriers,
    ) == (40, 2048, 4, 12, 8, 1)


@needs_nvcc
@pytest.mark.compiler
def test_build_with_nvcc_records_resources_and_round_trips(tmp_path):
    lib = ms.build(shared_memory_matmul(64, 16).mod, "cuda -arch=sm_80")
    res = lib.resources["main_kernel0"]
    assert res["registers"] > 0 and res["shared_bytes"] == 2048
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0
    assert ".entry main_kernel0" in lib.get_source("ptx") and lib.cubin[:4] == b"\x7fELF"
    path = tmp_path / "matmul.cuda.json"
    lib.export_library(path)
    again = load_module(path)
    assert again.source == lib.source and again.resources == lib.resources
    if cuda_unavailable_reason() is None:  # a GPU: run it
        a, b = _inputs(64)
        c = np.zeros((64, 64), np.float32)
        again(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4)
    else:
        with pytest.raises(CudaUnavailableError, match="GPU"):
            again(*_inputs(64), np.zeros((64, 64), np.float32))


@needs_nvcc
@pytest.mark.compiler
def test_nvcc_errors_are_build_errors(monkeypatch, tmp_path):
    from metaschedule.codegen.nvcc import compile_cuda

    with pytest.raises(BuildError, match="CUDA compilation failed"):
        compile_cuda("this is not CUDA", "sm_80", cache_dir=str(tmp_path))
    monkeypatch.setenv("NVCC", str(tmp_path / "no-nvcc"))
    with pytest.raises(BuildError, match="cannot run nvcc"):
        compile_cuda("__global__ void k() {}", "sm_80", cache_dir=str(tmp_path))


def test_tuning_for_cuda_without_a_gpu_fails_at_once(tmp_path):
    if cuda_unavailable_reason() is None:
        pytest.skip("this machine has a GPU")
    a = te.placeholder((16, 16), "float32", "A")
    func = te.create_prim_func([a, te.compute((16, 16), lambda i, j: a[i, j] * 2, name="B")])
    with pytest.raises(RuntimeError, match="cuda target needs a GPU.*RPCRunner"):
        ms.tune_tir(func, "cuda", str(tmp_path), 4)
    assert not os.path.exists(tmp_path / "database_tuning_record.json")


@pytest.mark.compiler
def test_tune_ops_benchmark_for_cuda_stops_with_one_line_without_a_gpu(tmp_path):
    import subprocess
    import sys

    if cuda_unavailable_reason() is None:
        pytest.skip("this machine has a GPU")
    script = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "tune_ops.py")
    run = subprocess.run(
        [sys.executable, script, "--target", "cuda", "--workloads", "matmul-16", "--trials", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)},
    )
    assert run.returncode == 2, run.stderr
    last = run.stdout.strip().splitlines()[-1]
    assert last.startswith("tune_ops: matmul-16: ") and "needs a GPU" in last
    assert "Traceback" not in run.stderr
