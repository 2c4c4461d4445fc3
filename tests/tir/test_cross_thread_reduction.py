"""The GPU lowering of reductions bound to threadIdx: a shared-memory tree (thread counts
that are no power of two; the others use warp shuffles, tests/tir/test_warp_reduction.py)."""

import numpy as np
import pytest

import metaschedule as ms
from metaschedule import te
from metaschedule.codegen.cuda_codegen import codegen_cuda
from metaschedule.te.ops.reduce import reduce
from metaschedule.tir.gpu_emulator import emulate
from metaschedule.tir.transform import GPU_LOWER_PASSES, lower, lower_cross_thread_reduction


def _bound_reduction(kind: str, threads: int, n=4, k=30, thread_outside=True):
    x = te.placeholder((n, k), "float32", "X")
    sch = ms.tir.Schedule(te.create_prim_func([x, reduce(x, kind, [1])]))
    (blk,) = sch.get_child_blocks(sch.get_block("root"))
    i, kk = sch.get_loops(blk)
    sch.bind(i, "blockIdx.x")
    k0, k1 = sch.split(kk, [None, threads])
    if thread_outside:
        sch.reorder(k1, k0)
    sch.bind(k1, "threadIdx.x")
    return sch


@pytest.mark.parametrize(
    "kind, threads, outside",
    [("sum", 8, True), ("max", 5, False), ("min", 3, True), ("sum", 1, False), ("max", 32, True)],
)
def test_tree_reduction_matches_numpy(kind, threads, outside):
    sch = _bound_reduction(kind, threads, thread_outside=outside)
    x = np.random.default_rng(threads).random((4, 30), dtype=np.float32)
    out = np.zeros(4, np.float32)
    emulate(sch.mod, x, out)  # barriers and races checked thread by thread
    np.testing.assert_allclose(out, getattr(x, kind)(1), rtol=1e-5)


def test_lowered_form_and_cuda_source():
    lowered = lower(_bound_reduction("sum", 6).mod["main"], GPU_LOWER_PASSES)
    code = codegen_cuda(lowered, "cuda").code
    assert "__shared__ __align__(16) float T_reduce_sum_partial[6];" in code
    assert "float T_reduce_sum_acc[1];" in code
    assert code.count("__syncthreads();") == 4  # after the partials, then per halving step
    assert "__shfl" not in code
    assert "if (k0_1 == 0) {" in code


def test_unsupported_patterns_are_reported():
    a = te.placeholder((4, 16), "float32", "A")
    # a non-commutative-looking update (out = value - out) is no reduction tree
    k = te.reduce_axis((0, 16), "k")
    odd = te.compute((4,), lambda i: te.sum(a[i, k], axis=k), name="S")
    sch = ms.tir.Schedule(te.create_prim_func([a, odd]))
    blk = sch.get_block("S")
    i, kk = sch.get_loops(blk)
    sch.bind(i, "blockIdx.x")
    sch.bind(kk, "threadIdx.x")
    func = sch.mod["main"]
    body = func.body.block.body.body.body.block
    from metaschedule.tir.expr import Sub
    from metaschedule.tir.functor import replace_fields
    from metaschedule.tir.stmt import BufferStore

    store = body.body
    bad = replace_fields(
        body, body=BufferStore(store.buffer, Sub(store.value.b, store.value.a), store.indices)
    )

    class _Swap(ms.tir.functor.Mutator):
        def visit_Block(self, b):
            return bad if b is body else self.generic_visit(b)

    with pytest.raises(ValueError, match=r"not out = f\(out, value\)"):
        lower_cross_thread_reduction(func.with_body(_Swap().visit(func.body)))
