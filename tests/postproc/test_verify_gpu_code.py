"""VerifyGPUCode: kernels within the target's threads, shared memory, vthread, vector limits."""

import pytest

from metaschedule import te, tir
from metaschedule.postproc import VerifyGPUCode
from metaschedule.postproc.verify_gpu_code import GPULimits, gpu_code_errors
from metaschedule.space_generator import PostOrderApply
from metaschedule.target import Target
from metaschedule.tir.transform import lower
from metaschedule.tune_context import TuneContext


def gpu_matmul(func, rows=16, cols=16, k_tile=8):
    """Blocks of ``rows x cols`` threads, A cached in shared memory per ``k_tile`` step."""
    sch = tir.Schedule(func)
    block = sch.get_block("T_matmul_NN")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, rows])
    j0, j1 = sch.split(j, [None, cols])
    k0, _ = sch.split(k, [None, k_tile])
    sch.reorder(i0, j0, i1, j1, k0)
    sch.bind(sch.fuse(i0, j0), "blockIdx.x")
    sch.bind(sch.fuse(i1, j1), "threadIdx.x")
    a_shared = sch.cache_read(block, 0, "shared")
    sch.compute_at(a_shared, k0)
    sch.enter_postproc()
    return sch


def errors(sch, **limits):
    lim = GPULimits(
        **{"max_threads_per_block": 1024, "max_shared_memory_per_block": 49152, **limits}
    )
    return gpu_code_errors(lower(sch.mod["main"]), lim)


def test_valid_kernel_passes_unchanged(matmul):
    sch = gpu_matmul(matmul(64, 64, 64))
    mod, n = sch.mod, len(sch.trace.insts)
    assert VerifyGPUCode().apply(sch) is True
    assert sch.mod is mod and len(sch.trace.insts) == n


def test_threads_per_block(matmul):
    sch = gpu_matmul(matmul(64, 64, 64), rows=32, cols=64)
    assert VerifyGPUCode().apply(sch) is False
    assert errors(sch) == [
        "kernel at loop i_0_j_0_fused: 2048 threads per block (threadIdx.x=2048); at most 1024"
    ]


def test_shared_memory_counts_one_block_tile(matmul):
    # A_shared is allocated 64 x 64 at the root; one block touches its 16 rows x all of k
    sch = gpu_matmul(matmul(64, 64, 64))
    assert errors(sch, max_shared_memory_per_block=4096) == []
    assert errors(sch, max_shared_memory_per_block=4095) == [
        "kernel at loop i_0_j_0_fused: 4096 bytes of shared memory (A_shared); at most 4095"
    ]


def test_limits_come_from_the_tune_context_target(matmul):
    func = matmul(64, 64, 64)
    small = Target({"kind": "cuda", "max_shared_memory_per_block": 2048})
    post = VerifyGPUCode()
    TuneContext(
        func,
        target=small,
        space_generator=PostOrderApply(sch_rules=[], postprocs=[post], mutator_probs={}),
    )
    assert post.limits.max_shared_memory_per_block == 2048
    assert post.apply(gpu_matmul(func)) is False
    assert post.apply(gpu_matmul(func, k_tile=4)) is False  # still all of k per block
    assert VerifyGPUCode().apply(gpu_matmul(func)) is True


def test_cpu_target_is_an_error():
    with pytest.raises(ValueError, match="expected a cuda target, got cpu"):
        GPULimits.from_target(Target("cpu"))


def scale(n=64, m=256):
    a = te.placeholder((n, m), "float32", "A")
    b = te.compute((n, m), lambda i, j: a[i, j] * 2.0, name="B")
    c = te.compute((n, m), lambda i, j: b[i, j] + 1.0, name="C")
    return te.create_prim_func([a, c])


def bound(i_split, j_split, axes):
    """C = A * 2 + 1 (64 x 256), its loops split as given and bound to ``axes`` in order
    (``None``: serial, ``"vector"``: vectorized)."""
    sch = tir.Schedule(scale())
    sch.compute_inline(sch.get_block("B"))
    i, j = sch.get_loops(sch.get_block("C"))
    loops = sch.split(i, i_split) + sch.split(j, j_split)
    for lp, axis in zip(loops, axes):
        if axis == "vector":
            sch.vectorize(lp)
        elif axis is not None:
            sch.bind(lp, axis)
    return sch


def test_threads_and_thread_z():
    sch = bound([None, 1], [2, 128], ["blockIdx.x", None, None, "threadIdx.z"])
    assert errors(sch) == ["kernel at loop i_0: threadIdx.z extent 128; at most 64"]
    sch = bound([None, 1], [2, 128], ["blockIdx.x", None, None, "threadIdx.x"])
    assert errors(sch) == []
    assert errors(sch, max_threads_per_block=64) == [
        "kernel at loop i_0: 128 threads per block (threadIdx.x=128); at most 64"
    ]


def test_grid_y():
    sch = bound([None, 1], [2, 128], ["blockIdx.y", None, None, "threadIdx.x"])
    assert errors(sch) == []
    assert errors(sch, max_grid_yz=32) == ["kernel at loop i_0: blockIdx.y extent 64; at most 32"]


def test_virtual_threads():
    sch = bound([4, 16], [None, 64], ["blockIdx.x", "vthread.x", None, "threadIdx.x"])
    assert errors(sch) == ["kernel at loop i_0: 16 virtual threads; at most 8"]
    assert errors(sch, max_vthread=16) == []


def test_vector_accesses_at_most_16_bytes():
    sch = bound([None, 1], [None, 32, 8], ["blockIdx.x", None, None, "threadIdx.x", "vector"])
    assert errors(sch) == [
        "kernel at loop i_0: vectorized loop j_2 accesses 8 x float32 of C = 32 bytes at once; "
        + "at most 16 bytes"
    ]
    sch = bound([None, 1], [None, 64, 4], ["blockIdx.x", None, None, "threadIdx.x", "vector"])
    assert errors(sch) == []


def test_one_extent_per_thread_axis_in_a_kernel():
    sch = tir.Schedule(scale())
    i, j = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.bind(sch.split(j, [None, 64])[1], "threadIdx.x")
    sch.compute_at(sch.get_block("B"), i)
    sch.bind(sch.split(sch.get_loops(sch.get_block("B"))[1], [None, 32])[1], "threadIdx.x")
    assert errors(sch) == [
        "kernel at loop i: threadIdx.x is bound to loops of extents 32 and 64; a kernel has "
        + "one extent per thread axis"
    ]
    assert VerifyGPUCode().apply(sch) is False


def test_cpu_function_has_no_kernel(matmul):
    sch = tir.Schedule(matmul())
    assert VerifyGPUCode().apply(sch) is True
