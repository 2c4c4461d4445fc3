"""Hand-written GPU schedules shared by tests, benchmarks and examples."""

from __future__ import annotations

from ..schedule import Schedule
from ..schedule.trace import Trace
from ..search_strategy.base import TraceReplayer
from ..te import create_prim_func, placeholder
from ..te.ops import matmul
from ..tir import PrimFunc
from ..tune_context import TuneContext

__all__ = ["sample_cuda_schedules", "shared_memory_matmul", "vectorized_fetch_matmul"]


def shared_memory_matmul(n: int = 64, tile: int = 16) -> Schedule:
    """``C = A @ B`` (n x n, float32) tiled for a GPU: one ``tile x tile`` block of threads
    per output tile; per step of ``k``, the threads cooperatively load an A tile and a B
    tile into shared memory, then each computes its element from them."""
    a = placeholder((n, n), "float32", "A")
    b = placeholder((n, n), "float32", "B")
    sch = Schedule(create_prim_func([a, b, matmul(a, b)]))
    block = sch.get_block("T_matmul_NN")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, tile])
    j0, j1 = sch.split(j, [None, tile])
    k0, k1 = sch.split(k, [None, tile])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    sch.bind(i0, "blockIdx.x")
    sch.bind(j0, "blockIdx.y")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    for index in (0, 1):
        cached = sch.cache_read(block, index, "shared")
        sch.compute_at(cached, k0)
        fused = sch.fuse(*sch.get_loops(cached)[-2:])
        _, ty, tx = sch.split(fused, [None, tile, tile])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
    return sch


def vectorized_fetch_matmul(n: int = 64, vec: int = 4) -> Schedule:
    """``C = A @ B`` (n x n, float32, n a multiple of 32): 32 x 32 output tiles on 8 x 8
    threads, 4 x 4 elements each; per step of 16 along ``k`` the threads load the A and B
    tiles into shared memory ``vec`` consecutive elements at a time (a vectorized loop, as
    RewriteCooperativeFetch makes), which CUDA C writes as ``float4`` accesses."""
    a = placeholder((n, n), "float32", "A")
    b = placeholder((n, n), "float32", "B")
    sch = Schedule(create_prim_func([a, b, matmul(a, b)]))
    block = sch.get_block("T_matmul_NN")
    i, j, k = sch.get_loops(block)
    i0, i1, i2 = sch.split(i, [None, 8, 4])
    j0, j1, j2 = sch.split(j, [None, 8, 4])
    k0, k1 = sch.split(k, [None, 16])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.bind(i0, "blockIdx.x")
    sch.bind(j0, "blockIdx.y")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    for index in (0, 1):
        cached = sch.cache_read(block, index, "shared")
        sch.compute_at(cached, k0)
        fused = sch.fuse(*sch.get_loops(cached)[-2:])
        _, ty, tx, lanes = sch.split(fused, [None, 8, 8, vec])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        sch.vectorize(lanes)
    return sch


def sample_cuda_schedules(
    func: PrimFunc,
    n: int,
    target: str = "cuda -arch=sm_80",
    seed: int = 0,
    max_tries: int = 200,
) -> list[Schedule]:
    """Up to ``n`` schedules of ``func`` drawn from the "cuda" design space (the default
    rules), each replayed with fresh decisions and passed through the "cuda"
    postprocessors (those that fail are skipped, as a search strategy does). The
    design spaces take turns, so each one that yields valid schedules is represented."""

    ctx = TuneContext(
        func, target=target, space_generator="post-order-apply", rand_state=seed, task_name="gpu"
    )
    spaces = ctx.generate_design_space()
    assert ctx.space_generator is not None and ctx.space_generator.postprocs is not None
    replay = TraceReplayer(ctx.mod, ctx.space_generator.postprocs)
    out: list[Schedule] = []
    for i in range(max_tries):
        if len(out) == n:
            break
        space = spaces[i % len(spaces)]
        sch = replay(Trace(space.trace.insts, {}), seed * 100_003 + i)
        if sch is not None:
            out.append(sch)
    return out
