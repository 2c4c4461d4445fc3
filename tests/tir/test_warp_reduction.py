"""Cross-thread reductions with warp shuffles: lowering, emulation, CUDA C, nvcc."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import metaschedule as ms
from metaschedule import te
from metaschedule.codegen.cuda_codegen import codegen_cuda
from metaschedule.te import ops
from metaschedule.te.ops.reduce import reduce
from metaschedule.tir import expr as E
from metaschedule.tir import stmt as S
from metaschedule.tir.functor import Mutator
from metaschedule.tir.gpu_emulator import GpuRaceError, emulate
from metaschedule.tir.transform import GPU_LOWER_PASSES, lower
from metaschedule.tir.transform.warp_reduction import is_warp_shuffle

TARGET = "cuda -arch=sm_80"
needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None and not os.environ.get("NVCC"), reason="nvcc is not installed"
)


def _row_reduction(kind: str, threads: int, rows: int = 3, k: int = 256):
    x = te.placeholder((rows, k), "float32", "X")
    sch = ms.tir.Schedule(te.create_prim_func([x, reduce(x, kind, [1])]))
    (blk,) = sch.get_child_blocks(sch.get_block("root"))
    i, kk = sch.get_loops(blk)
    _, k1 = sch.split(kk, [None, threads])
    sch.bind(i, "blockIdx.x")
    sch.bind(k1, "threadIdx.x")
    return sch


def _softmax(threads: int, rows: int = 3, k: int = 256):
    """Every block of a softmax on its own kernel: one row per GPU block, ``threads``
    threads per row (the two reductions are cross-thread ones)."""
    x = te.placeholder((rows, k), "float32", "X")
    sch = ms.tir.Schedule(te.create_prim_func([x, ops.softmax(x)]))
    for name in ("maxelem", "exp", "expsum", "norm"):
        i, kk = sch.get_loops(sch.get_block(f"T_softmax_{name}"))
        _, k1 = sch.split(kk, [None, threads])
        sch.bind(i, "blockIdx.x")
        sch.bind(k1, "threadIdx.x")
    return sch


def _src(sch) -> str:
    return codegen_cuda(lower(sch.mod["main"], GPU_LOWER_PASSES), TARGET).code


@pytest.mark.parametrize("kind,threads", [("sum", 8), ("max", 32), ("min", 64), ("sum", 128)])
def test_shuffle_reduction_matches_numpy(kind, threads):
    sch = _row_reduction(kind, threads)
    src = _src(sch)
    steps = int(np.log2(min(threads, 32))) + (int(np.log2(threads // 32)) if threads > 32 else 0)
    assert src.count("__shfl_down_sync(") == steps
    mask = "0xffu" if threads == 8 else "0xffffffffu"  # a block of 8 threads: a partial warp
    assert f"__shfl_down_sync({mask}," in src
    # one partial per warp in shared memory, and one barrier, only beyond a warp
    assert src.count("__syncthreads();") == (1 if threads > 32 else 0)
    x = np.random.default_rng(threads).random((3, 256), dtype=np.float32)
    out = np.zeros(3, np.float32)
    emulate(sch.mod, x, out)
    np.testing.assert_allclose(out, getattr(x, kind)(1), rtol=1e-5)


@pytest.mark.parametrize("threads", [32, 128])
def test_softmax_with_shuffles_matches_numpy(threads):
    sch = _softmax(threads)
    src = _src(sch)
    assert "__shfl_down_sync" in src
    assert ("_partial[" in src) == (threads > 32)  # warps' partials only beyond one warp
    x = np.random.default_rng(0).random((3, 256), dtype=np.float32)
    out = np.zeros_like(x)
    emulate(sch.mod, x, out)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5)


def test_no_shuffle_when_some_threads_skip_the_reduction():
    # 24 threads: not a power of two -> the shared-memory tree
    assert "__shfl" not in _src(_row_reduction("sum", 24, k=48))


def test_emulator_reports_a_shuffle_in_divergent_code():
    func = lower(_row_reduction("sum", 32).mod["main"], GPU_LOWER_PASSES)
    tx: list[E.Var] = []

    class _Find(Mutator):
        def visit_For(self, loop):
            if loop.thread_binding == "threadIdx.x":
                tx.append(loop.loop_var)
            return self.generic_visit(loop)

        def visit_BufferStore(self, s):
            if is_warp_shuffle(s.value) and s.value.args[2].value == 16:
                return S.IfThenElse(E.LT(tx[0], E.const(16, "int32")), s)
            return s

    bad = func.with_body(_Find().visit(func.body))
    x = np.ones((3, 256), np.float32)
    with pytest.raises(GpuRaceError, match="shfl_down_sync.*divergent"):
        emulate(bad, x, np.zeros(3, np.float32))


@needs_nvcc
@pytest.mark.compiler
@pytest.mark.parametrize("threads", [32, 128])
def test_shuffle_sources_compile_with_nvcc(threads):
    lib = ms.build(_softmax(threads).mod, TARGET)
    assert "shfl.sync.down" in lib.get_source("ptx")
    assert all(r["spill_stores"] == 0 for r in lib.resources.values())


def test_emulator_reports_a_mask_that_leaves_out_running_lanes():
    func = lower(_row_reduction("sum", 32).mod["main"], GPU_LOWER_PASSES)

    class _HalfMask(Mutator):
        def visit_BufferStore(self, s):
            if is_warp_shuffle(s.value):
                mask, *rest = s.value.args
                call = E.Call(s.value.dtype, s.value.op, (E.const(0xFFFF, "int64"), *rest))
                return S.BufferStore(s.buffer, call, s.indices)
            return s

    bad = func.with_body(_HalfMask().visit(func.body))
    with pytest.raises(GpuRaceError, match="mask 0xffff, which does not name its lane"):
        emulate(bad, np.ones((3, 256), np.float32), np.zeros(3, np.float32))
