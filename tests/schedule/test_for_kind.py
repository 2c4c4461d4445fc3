"""parallel, vectorize, unroll, bind: loop kinds, legality checks, numbers, trace round trip."""

import numpy as np

from metaschedule import tir
from metaschedule.testing import assert_unchanged, matmul
from metaschedule.testing.primitive_check import check_primitives as check
from metaschedule.tir import (
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    For,
    ForKind,
    IterType,
    IterVar,
    PrimFunc,
    Range,
    Var,
)
from metaschedule.tir.interpreter import interpret
from metaschedule.tir.stmt import true


def single_block(binding, dom, read_index, write_index=None, extent=8, buffer_len=9):
    """``for i in range(extent): block X (v = binding(i)): A[write] = A[read] + 1``.

    Reads and writes one buffer ``A`` (write_index None: writes ``B[v]`` instead).
    """
    A, B = Buffer("A", (buffer_len,)), Buffer("B", (buffer_len,))
    i, v = Var("i"), Var("v")
    dst = A if write_index is not None else B
    w = write_index(v) if write_index is not None else v
    block = Block(
        (IterVar(v, Range(*dom), IterType.DATA_PAR),),
        (BufferRegion(A, (Range(read_index(v), 1),)),),
        (BufferRegion(dst, (Range(w, 1),)),),
        "X",
        BufferStore(dst, A[read_index(v)] + 1.0, (w,)),
    )
    loop = For(i, 0, extent, ForKind.SERIAL, BlockRealize((binding(i),), true(), block))
    return PrimFunc((A, B), BlockRealize((), true(), Block((), (), (), "root", loop)))


def test_kinds_on_spatial_loops():
    func = matmul(8, 6, 4)
    sch = tir.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    j0, j1 = sch.split(j, [None, 3])
    sch.parallel(i)
    sch.vectorize(j1)
    sch.unroll(k)
    assert [sch.get(lp).kind for lp in (i, j0, j1, k)] == [
        ForKind.PARALLEL,
        ForKind.SERIAL,
        ForKind.VECTORIZED,
        ForKind.UNROLLED,
    ]
    assert "T.parallel(8)" in sch.mod.script() and "T.vectorized(3)" in sch.mod.script()
    check(sch, func)
    assert "sch.vectorize(loop=l" in str(sch.trace)


def test_reduction_loop_cannot_be_parallel_or_vectorized():
    sch = tir.Schedule(matmul(8, 6, 4))
    _i, j, k = sch.get_loops(sch.get_block("C"))
    assert_unchanged(
        sch,
        lambda: sch.parallel(k),
        r"loop k cannot be parallelized: it carries "
        r"the reduction of block 'C'",
    )
    assert_unchanged(sch, lambda: sch.vectorize(k), "loop k cannot be vectorized")
    f = sch.fuse(j, k)  # the fused loop carries the reduction too
    assert_unchanged(sch, lambda: sch.parallel(f), "loop j_k_fused cannot be parallelized")
    sch.unroll(f)  # unrolling keeps the order: always fine


def test_bind_threads():
    func = matmul(8, 6, 4)
    sch = tir.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "vthread.y")
    sch.bind(k, "threadIdx.x")  # reduction on threadIdx: a cross-thread reduction
    loops = [sch.get(lp) for lp in (i, j, k)]
    assert [lp.thread_binding for lp in loops] == ["blockIdx.x", "vthread.y", "threadIdx.x"]
    assert all(lp.kind is ForKind.THREAD_BINDING for lp in loops)
    check(sch, func)
    assert "thread_axis='blockIdx.x'" in str(sch.trace)


def test_bind_errors():
    sch = tir.Schedule(matmul(8, 6, 4))
    i, _j, k = sch.get_loops(sch.get_block("C"))
    assert_unchanged(sch, lambda: sch.bind(i, "threadIdx.w"), "unknown thread axis 'threadIdx.w'")
    assert_unchanged(sch, lambda: sch.bind(i, "warp"), "unknown thread axis")
    assert_unchanged(sch, lambda: sch.bind(k, "blockIdx.x"), "loop k cannot be bound .*reduction")
    assert_unchanged(sch, lambda: sch.bind(k, "vthread.x"), "reduction of block 'C'")


def test_only_serial_loops_change_kind():
    sch = tir.Schedule(matmul(8, 6, 4))
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.parallel(i)
    assert_unchanged(sch, lambda: sch.parallel(i), "loop i is parallel; only a serial loop")
    assert_unchanged(sch, lambda: sch.unroll(i), "only a serial loop can be unrolled")
    sch.bind(j, "threadIdx.y")
    assert_unchanged(sch, lambda: sch.vectorize(j), r"thread_binding \(threadIdx.y\)")
    sch.unroll(k)
    assert_unchanged(sch, lambda: sch.bind(k, "threadIdx.x"), "loop k is unroll")


def test_non_affine_binding_accepted_as_in_tvm():
    # TVM's parallel/vectorize/bind ask only that the loop reach data-parallel iter vars
    func = single_block(lambda i: i * i // 8, (0, 8), lambda v: v)
    want = [np.arange(9, dtype="float32"), np.zeros(9, "float32")]
    interpret(func, *want)
    for kind in ("parallel", "vectorize", "unroll"):
        sch = tir.Schedule(func)
        (i,) = sch.get_loops(sch.get_block("X"))
        getattr(sch, kind)(i)
        got = [np.arange(9, dtype="float32"), np.zeros(9, "float32")]
        interpret(sch.mod["main"], *got)
        np.testing.assert_array_equal(got[1], want[1])
    sch = tir.Schedule(func)
    (i,) = sch.get_loops(sch.get_block("X"))
    sch.bind(i, "threadIdx.x")
    assert sch.get(i).thread_binding == "threadIdx.x"


def test_dependence_between_iterations_rejected():
    # a scan: A[v] = A[v - 1] + 1 for v in 1..8 (wrongly declared data-parallel)
    scan = single_block(lambda i: i + 1, (1, 8), lambda v: v - 1, lambda v: v)
    sch = tir.Schedule(scan)
    (i,) = sch.get_loops(sch.get_block("X"))
    assert_unchanged(
        sch, lambda: sch.parallel(i), r"reads and writes buffer A at A\[v - 1\], A\[v\]"
    )
    assert_unchanged(sch, lambda: sch.vectorize(i), "dependence between iterations")
    sch.unroll(i)
    a = np.zeros(9, "float32")
    interpret(sch.mod["main"], a, np.zeros(9, "float32"))
    np.testing.assert_array_equal(a, np.arange(9, dtype="float32"))  # the scan still runs in order


def test_in_place_update_is_parallel():
    func = single_block(lambda i: i, (0, 8), lambda v: v, lambda v: v)  # A[v] = A[v] + 1
    sch = tir.Schedule(func)
    (i,) = sch.get_loops(sch.get_block("X"))
    sch.parallel(i)
    a = np.arange(9, dtype="float32")
    interpret(sch.mod["main"], a, np.zeros(9, "float32"))
    np.testing.assert_array_equal(a, np.r_[np.arange(1, 9), 8].astype("float32"))


def test_imperfect_split_stays_affine_for_vectorize():
    func = matmul(10, 6, 4)
    sch = tir.Schedule(func)
    i = sch.get_loops(sch.get_block("C"))[0]
    i0, i1 = sch.split(i, [None, 4])
    sch.parallel(i0)
    sch.vectorize(i1)
    check(sch, func)


def test_opaque_iter_var_loop_cannot_be_parallel():
    A, B = Buffer("A", (8,)), Buffer("B", (8,))
    i, v = Var("i"), Var("v")
    block = Block(
        (IterVar(v, Range(0, 8), IterType.OPAQUE),),
        (BufferRegion(A, (Range(v, 1),)),),
        (BufferRegion(B, (Range(v, 1),)),),
        "X",
        BufferStore(B, A[v], (v,)),
    )
    loop = For(i, 0, 8, ForKind.SERIAL, BlockRealize((i,), true(), block))
    sch = tir.Schedule(PrimFunc((A, B), BlockRealize((), true(), Block((), (), (), "root", loop))))
    (i,) = sch.get_loops(sch.get_block("X"))
    assert_unchanged(sch, lambda: sch.parallel(i), "it carries the opaque of block 'X'")
