"""RewriteCooperativeFetch and RewriteUnboundBlock: the GPU postprocessors that finish a
sampled schedule."""

from __future__ import annotations

import numpy as np
import pytest

from metaschedule import te, tir
from metaschedule.codegen.cuda_codegen import codegen_cuda
from metaschedule.postproc import RewriteCooperativeFetch, RewriteUnboundBlock, VerifyGPUCode
from metaschedule.tir import ForKind
from metaschedule.tir.gpu_emulator import GpuRaceError, emulate
from metaschedule.tir.transform import GPU_LOWER_PASSES, lower

KEY = "meta_schedule.cooperative_fetch"


def _fetch_schedule(matmul, vec: int):
    """A matmul with a shared cache of A under the threadIdx loop, annotated for fetching."""
    func = matmul(16, 16, 16)
    sch = tir.Schedule(func)
    blk = sch.get_block("T_matmul_NN")
    i, j, k = sch.get_loops(blk)
    i0, i1 = sch.split(i, [4, 4])
    j0, j1 = sch.split(j, [4, 4])
    k0, k1 = sch.split(k, [2, 8])
    sch.reorder(i0, j0, i1, j1, k0, k1)
    bx = sch.fuse(i0, j0)
    tx = sch.fuse(i1, j1)
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    cache = sch.cache_read(blk, 0, "shared")
    sch.compute_at(cache, k0, True)
    sch.fuse(*sch.get_loops(cache)[-2:])
    sch.annotate(cache, KEY, vec)
    return func, sch


@pytest.mark.parametrize("vec", [1, 4, 3])
def test_cooperative_fetch_splits_the_tile_among_the_threads(matmul, check, vec):
    func, sch = _fetch_schedule(matmul, vec)
    a = np.random.default_rng(0).random((16, 16), dtype=np.float32)
    b = np.random.default_rng(1).random((16, 16), dtype=np.float32)
    with pytest.raises(GpuRaceError):  # every thread loads the whole tile: they collide
        emulate(sch.mod, a, b, np.zeros((16, 16), np.float32))
    assert RewriteCooperativeFetch().apply(sch)
    loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block("A_shared"))]
    assert KEY not in sch.get(sch.get_block("A_shared")).annotations
    assert loops[-1 if vec == 1 else -2].thread_binding == "threadIdx.x"
    assert loops[-1 if vec == 1 else -2].extent.value == 16  # the tile's thread count
    if vec > 1:
        assert loops[-1].kind is ForKind.VECTORIZED and loops[-1].extent.value == vec
    c = np.zeros((16, 16), np.float32)
    emulate(sch.mod, a, b, c)  # now race-free, barriers in place
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    check(sch, func)
    assert VerifyGPUCode().apply(sch)


def test_cooperative_fetch_needs_threads_above():
    a = te.placeholder((8, 8), "float32", "A")
    func = te.create_prim_func([a, te.compute((8, 8), lambda i, j: a[i, j] + 1, name="B")])
    sch = tir.Schedule(func)
    cache = sch.cache_read(sch.get_block("B"), 0, "shared")
    sch.annotate(cache, KEY, 2)
    assert not RewriteCooperativeFetch().apply(sch)


def test_unbound_blocks_get_a_grid(softmax, check):
    sch = tir.Schedule(softmax)
    post = RewriteUnboundBlock(max_threadblocks=2)
    post.max_threads_per_block = 8
    assert post.apply(sch)
    for name in ("T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"):
        tags = [
            sch.get(lp).thread_binding
            for lp in sch.get_loops(sch.get_block(name))
            if sch.get(lp).kind is ForKind.THREAD_BINDING
        ]
        assert tags == ["blockIdx.x", "threadIdx.x"], name
    # 4 rows x 16: 64 elements > 2 blocks x 8 threads: a serial loop outside takes the rest
    outer = sch.get(sch.get_loops(sch.get_block("T_softmax_exp"))[0])
    assert outer.kind is ForKind.SERIAL and outer.extent.value == 4
    check(sch, softmax)
    src = codegen_cuda(lower(sch.mod["main"], GPU_LOWER_PASSES), "cuda")
    # the reductions have 4 outputs: 4 threads; the element-wise stages 8
    assert [k.block[0] for k in src.kernels] == [4, 8, 4, 8]
    assert RewriteUnboundBlock().apply(sch)  # nothing left to bind: a no-op
    with pytest.raises(ValueError, match="max_threadblocks"):
        RewriteUnboundBlock(0)


def test_unbound_block_without_spatial_loops_gets_unit_bindings():
    x = te.placeholder((16,), "float32", "X")
    from metaschedule.te.ops.reduce import reduce

    func = te.create_prim_func([x, reduce(x, "sum")])
    sch = tir.Schedule(func)
    assert RewriteUnboundBlock().apply(sch)
    src = codegen_cuda(lower(sch.mod["main"], GPU_LOWER_PASSES), "cuda")
    assert src.kernels[0].grid == (1, 1, 1) and src.kernels[0].block == (1, 1, 1)
    data = np.arange(16, dtype=np.float32)
    out = np.zeros((), np.float32)
    emulate(sch.mod, data, out)
    assert out == data.sum()
