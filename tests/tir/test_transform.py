"""Lowering passes: each one checked structurally and against the reference interpreter."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from metaschedule import te
from metaschedule.tir import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    IterType,
    IterVar,
    PrimFunc,
    Range,
    SeqStmt,
    Var,
    const,
    floordiv,
    post_order_visit,
)
from metaschedule.tir.functor import substitute
from metaschedule.tir.interpreter import interpret
from metaschedule.tir.stmt import true
from metaschedule.tir.transform import (
    LOWER_PASSES,
    compact_allocations,
    convert_blocks,
    lower,
    lower_alloc_buffers,
    lower_init,
    plan_allocations,
    simplify_indices,
)
from metaschedule.tir.transform.affine import affine, bounds, const_bounds

RNG = np.random.default_rng(0)


# ----------------------------------------------------------------------------- workloads


def matmul_exp(n: int = 8, m: int = 6, k: int = 5) -> PrimFunc:
    """D = exp(A @ B): a reduction block with init, an intermediate buffer, an elementwise block."""
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    D = te.compute((n, m), lambda i, j: te.exp(C[i, j] * 0.1), name="D")
    return te.create_prim_func([A, B, D])


def _region(buf: Buffer, *idx) -> BufferRegion:
    return BufferRegion(buf, tuple(Range(i, 1) for i in idx))


def tiled_matmul_local(n: int = 16, ti: int = 4, tj: int = 8) -> PrimFunc:
    """C = A @ B through a "local" cache computed at the (i0, j0) tile, as cache_write +
    reverse_compute_at produce it; C_local is allocated at the root for the whole matrix."""
    A, B, C = (Buffer(name, (n, n)) for name in "ABC")
    CL = Buffer("C_local", (n, n), scope="local")
    i0, j0, k, i1, j1, i2, j2 = (Var(x) for x in ("i0", "j0", "k", "i1", "j1", "i2", "j2"))
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
    update = Block(
        iter_vars=(
            IterVar(vi, Range(0, n)),
            IterVar(vj, Range(0, n)),
            IterVar(vk, Range(0, n), IterType.COMM_REDUCE),
        ),
        reads=(_region(A, vi, vk), _region(B, vk, vj)),
        writes=(_region(CL, vi, vj),),
        name_hint="C_local",
        body=BufferStore(CL, CL[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
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
            ForKind.SERIAL,
            For(
                j1,
                0,
                tj,
                ForKind.SERIAL,
                BlockRealize((i0 * ti + i1, j0 * tj + j1, k), true(), update),
            ),
        ),
    )
    wi, wj = Var("wi"), Var("wj")
    write_back = Block(
        iter_vars=(IterVar(wi, Range(0, n)), IterVar(wj, Range(0, n))),
        reads=(_region(CL, wi, wj),),
        writes=(_region(C, wi, wj),),
        name_hint="C",
        body=BufferStore(C, CL[wi, wj], (wi, wj)),
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
            ForKind.SERIAL,
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


def fused_tiled_matmul_local(
    n: int = 16, ti: int = 4, tj: int = 8, kind: ForKind = ForKind.PARALLEL
) -> PrimFunc:
    """tiled_matmul_local with the tile loops fused into one loop ``f`` of ``kind``: the tile
    is indexed by ``f // (n // tj)`` in rows and ``f % (n // tj)`` in columns."""
    func = tiled_matmul_local(n, ti, tj)
    (i0_loop,) = [f for f in nodes(func.body, For) if f.loop_var.name == "i0"]
    j0_loop = i0_loop.body
    f = Var("f")
    cols = n // tj
    vmap = {i0_loop.loop_var: floordiv(f, cols), j0_loop.loop_var: f % cols}
    body = For(f, 0, (n // ti) * cols, kind, substitute(j0_loop.body, vmap))
    root = func.body.block
    new_root = Block((), (), (), "root", body, alloc_buffers=root.alloc_buffers)
    return PrimFunc(func.params, BlockRealize((), true(), new_root))


def guarded_copy(n: int = 10, factor: int = 4) -> PrimFunc:
    """B[v] = A[v] + 1 over a non-divisible split: the BlockRealize has a predicate."""
    A, B = Buffer("A", (n,)), Buffer("B", (n,))
    io, ii, v = Var("io"), Var("ii"), Var("v")
    blk = Block(
        (IterVar(v, Range(0, n)),),
        (_region(A, v),),
        (_region(B, v),),
        "B",
        BufferStore(B, A[v] + 1.0, (v,)),
    )
    pred = io * factor + ii < n
    nest = For(
        io,
        0,
        -(-n // factor),
        ForKind.SERIAL,
        For(ii, 0, factor, ForKind.SERIAL, BlockRealize((io * factor + ii,), pred, blk)),
    )
    root = Block((), (), (), "root", nest)
    return PrimFunc((A, B), BlockRealize((), true(), root))


def running_sum(n: int = 12) -> PrimFunc:
    """acc carries a value across iterations of i: its allocation must stay above the loop."""
    A, B = Buffer("A", (n,)), Buffer("B", (n,))
    acc = Buffer("acc", (1,))
    i = Var("i")
    body = SeqStmt(
        (
            BufferStore(acc, const(0.0), (0,)),
            For(
                i,
                0,
                n,
                ForKind.SERIAL,
                SeqStmt(
                    (
                        BufferStore(acc, acc[0] + A[i], (0,)),
                        BufferStore(B, acc[0], (i,)),
                    )
                ),
            ),
        )
    )
    root = Block((), (), (), "root", body, alloc_buffers=(acc,))
    return PrimFunc((A, B), BlockRealize((), true(), root))


# ----------------------------------------------------------------------------- helpers


def _arrays(func: PrimFunc) -> list[np.ndarray]:
    out = []
    for b in func.params:
        out.append(RNG.standard_normal(b.static_shape()).astype(b.dtype))
    return out


def assert_same_meaning(before: PrimFunc, after: PrimFunc) -> None:
    """Run both functions in the interpreter on the same inputs; outputs must agree."""
    args = _arrays(before)
    a1 = [x.copy() for x in args]
    a2 = [x.copy() for x in args]
    interpret(before, *a1)
    interpret(after, *a2)
    for x, y in zip(a1, a2):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def nodes(node, cls) -> list:
    out = []
    post_order_visit(node, lambda n: out.append(n) if isinstance(n, cls) else None)
    return out


def run_prefix(func: PrimFunc, count: int) -> PrimFunc:
    for p in LOWER_PASSES[:count]:
        func = p(func)
    return func


WORKLOADS = [matmul_exp, tiled_matmul_local, fused_tiled_matmul_local, guarded_copy, running_sum]


# ----------------------------------------------------------------------------- affine


def test_affine_collects_terms_and_cancels():
    i, j = Var("i"), Var("j")
    form = affine((i * 8 + j) * 4 - i * 32 + 3)
    assert form.coef(j) == 4 and form.coef(i) == 0 and form.const == 3
    assert affine(floordiv(i * 8 + 16, 8)).coef(i) == 1


def test_bounds_sweep_ranged_vars_and_keep_others_symbolic():
    i0, i1 = Var("i0"), Var("i1")
    lo, hi = bounds(i0 * 8 + i1, {i1: (const(0), const(8))})
    assert lo.coef(i0) == 8 and lo.const == 0
    assert (hi - lo).is_const() and (hi - lo).const == 7
    assert const_bounds(floordiv(i1, 3), {i1: (const(0), const(8))}) == (0, 2)
    assert const_bounds(i1 % 4, {i1: (const(0), const(8))}) == (0, 3)


# ----------------------------------------------------------------------------- passes


def test_lower_init_guards_init_by_reduction_vars():
    func = lower_init(matmul_exp())
    blocks = nodes(func.body, Block)
    assert all(b.init is None for b in blocks)
    (update,) = [b for b in blocks if b.name_hint == "C"]
    guard = update.body.seq[0]
    assert isinstance(guard, IfThenElse)
    (k_var,) = [iv.var for iv in update.iter_vars if iv.iter_type == IterType.COMM_REDUCE]
    assert guard.condition.a is k_var and guard.condition.b.value == 0
    assert_same_meaning(matmul_exp(), func)


def test_lower_alloc_buffers_places_allocate_in_block():
    func = lower_alloc_buffers(matmul_exp())
    root = func.body.block
    assert root.alloc_buffers == ()
    assert isinstance(root.body, Allocate) and root.body.buffer.name == "C"
    assert_same_meaning(matmul_exp(), func)


def test_convert_blocks_substitutes_bindings_and_predicates():
    before = run_prefix(guarded_copy(), 2)
    func = convert_blocks(before)
    assert not nodes(func.body, Block) and not nodes(func.body, BlockRealize)
    (cond,) = nodes(func.body, IfThenElse)
    (store,) = nodes(func.body, BufferStore)
    io_ii = {v.name for v in nodes(store.indices[0], Var)}
    assert io_ii == {"io", "ii"}  # the iter var v was replaced by io * 4 + ii
    assert isinstance(cond.then_case, BufferStore)
    assert_same_meaning(guarded_copy(), func)


def test_convert_blocks_requires_init_lowered_first():
    with pytest.raises(ValueError, match="run lower_alloc_buffers first"):
        convert_blocks(matmul_exp())
    with pytest.raises(ValueError, match="block C still has an init.*run lower_init first"):
        convert_blocks(lower_alloc_buffers(matmul_exp()))


def test_plan_allocations_sinks_local_tile_into_tile_loop():
    func = run_prefix(tiled_matmul_local(), 4)
    (alloc,) = nodes(func.body, Allocate)
    (j0_loop,) = [f for f in nodes(func.body, For) if f.loop_var.name == "j0"]
    assert j0_loop.body is alloc  # inside both tile loops, around the two nests
    assert_same_meaning(tiled_matmul_local(), func)


@pytest.mark.parametrize("kind", [ForKind.PARALLEL, ForKind.SERIAL], ids=["parallel", "serial"])
def test_fused_tile_loop_gets_a_private_compact_tile(kind):
    """f // 2 and f % 2 index disjoint tiles: the tile sinks into f (and below) and shrinks."""
    before = fused_tiled_matmul_local(16, 4, 8, kind)
    func = lower(before)
    (alloc,) = nodes(func.body, Allocate)
    (f_loop,) = [f for f in nodes(func.body, For) if f.loop_var.name == "f"]
    assert f_loop.kind is kind and f_loop.body is alloc
    assert alloc.buffer.static_shape() == (4, 8)
    assert_same_meaning(before, func)


def _carried_by_pairs(kind: ForKind) -> PrimFunc:
    """acc[f // 2] accumulates over the two iterations 2m, 2m + 1: only f // 2 separates
    iterations, which is not one-to-one in f."""
    A, B = Buffer("A", (8,)), Buffer("B", (4,))
    acc = Buffer("acc", (4,))
    f, i = Var("f"), Var("i")
    body = SeqStmt(
        (
            For(i, 0, 4, ForKind.SERIAL, BufferStore(acc, const(0.0), (i,))),
            For(f, 0, 8, kind, BufferStore(acc, acc[floordiv(f, 2)] + A[f], (floordiv(f, 2),))),
            For(i, 0, 4, ForKind.SERIAL, BufferStore(B, acc[i], (i,))),
        )
    )
    return PrimFunc((A, B), Allocate(acc, body))


def test_plan_allocations_needs_a_one_to_one_split_of_the_fused_loop():
    func = plan_allocations(_carried_by_pairs(ForKind.SERIAL))
    assert isinstance(func.body, Allocate)  # all three loops use it: stays around them
    T = Buffer("T", (4, 8))
    A = Buffer("A", (8, 8))
    f, j = Var("f"), Var("j")
    # f // 2 in one dimension only: iterations 2m and 2m + 1 both touch row m
    loop = For(
        f,
        0,
        8,
        ForKind.SERIAL,
        For(
            j,
            0,
            8,
            ForKind.SERIAL,
            SeqStmt(
                (
                    BufferStore(T, T[floordiv(f, 2), j] + 1.0, (floordiv(f, 2), j)),
                    BufferStore(A, T[floordiv(f, 2), j], (f, j)),
                )
            ),
        ),
    )
    func = plan_allocations(PrimFunc((A,), Allocate(T, loop)))
    assert isinstance(func.body, Allocate)
    # f // 2 and f % 2 in two dimensions: one-to-one, so the buffer moves in
    i = Var("i")
    loop2 = For(
        f,
        0,
        8,
        ForKind.SERIAL,
        SeqStmt(
            (
                For(
                    j,
                    0,
                    4,
                    ForKind.SERIAL,
                    BufferStore(T, const(1.0), (floordiv(f, 2), (f % 2) * 4 + j)),
                ),
                For(
                    i,
                    0,
                    4,
                    ForKind.SERIAL,
                    BufferStore(A, T[floordiv(f, 2), (f % 2) * 4 + i], (f, i)),
                ),
            )
        ),
    )
    func = plan_allocations(PrimFunc((A,), Allocate(T, loop2)))
    assert isinstance(func.body, For) and isinstance(func.body.body, Allocate)
    func = lower(func)
    assert nodes(func.body, Allocate)[0].buffer.static_shape() == (1, 4)


def test_parallel_loop_privatizes_buffers_it_cannot_prove_disjoint():
    """Every iteration writes then reads all of T: not disjoint, but a parallel loop's
    iterations are independent, so each gets its own T instead of racing on a shared one."""
    A, B = Buffer("A", (6, 4)), Buffer("B", (6,))
    T = Buffer("T", (4,))
    p, i, j = Var("p"), Var("i"), Var("j")
    body = For(
        p,
        0,
        6,
        ForKind.PARALLEL,
        SeqStmt(
            (
                For(i, 0, 4, ForKind.SERIAL, BufferStore(T, A[p, i] * 2.0, (i,))),
                BufferStore(B, const(0.0), (p,)),
                For(j, 0, 4, ForKind.SERIAL, BufferStore(B, B[p] + T[j], (p,))),
            )
        ),
    )
    before = PrimFunc((A, B), Allocate(T, body))
    func = plan_allocations(before)
    assert isinstance(func.body, For) and isinstance(func.body.body, Allocate)
    assert_same_meaning(before, func)
    # a serial loop whose iterations each write all of T before reading it: T sinks too
    serial = PrimFunc((A, B), Allocate(T, dataclasses.replace(body, kind=ForKind.SERIAL)))
    func = plan_allocations(serial)
    assert isinstance(func.body, For) and isinstance(func.body.body, Allocate)
    assert_same_meaning(serial, func)


def _halo(write: int, read: int) -> PrimFunc:
    """A producer computed at a tile loop with a halo (as a padded window's input under
    ``compute_at``): each iteration ``t`` writes ``T[2t .. 2t + write)`` and reads
    ``T[2t + j + r]`` for ``j < 2, r < read - 1``; neighbouring iterations overlap."""
    A, B = Buffer("A", (12,)), Buffer("B", (8,))
    T = Buffer("T", (12,))
    t, i, j, r = Var("t"), Var("i"), Var("j"), Var("r")
    body = For(
        t,
        0,
        4,
        ForKind.SERIAL,
        SeqStmt(
            (
                For(i, 0, write, ForKind.SERIAL, BufferStore(T, A[t * 2 + i] * 2.0, (t * 2 + i,))),
                For(j, 0, 2, ForKind.SERIAL, BufferStore(B, const(0.0), (t * 2 + j,))),
                For(
                    j,
                    0,
                    2,
                    ForKind.SERIAL,
                    For(
                        r,
                        0,
                        read - 1,
                        ForKind.SERIAL,
                        BufferStore(B, B[t * 2 + j] + T[t * 2 + j + r], (t * 2 + j,)),
                    ),
                ),
            )
        ),
    )
    return PrimFunc((A, B), Allocate(T, body))


def test_plan_allocations_sinks_a_halo_written_before_it_is_read():
    """Overlapping iterations, each writing the window it then reads: no value flows from
    one to the next, so the buffer is per iteration and compacts to the window (TVM's
    allocation at the common ancestor of the uses gives the same)."""
    before = _halo(write=4, read=4)
    func = plan_allocations(before)
    assert isinstance(func.body, For) and isinstance(func.body.body, Allocate)
    assert_same_meaning(before, func)
    compact = compact_allocations(func)
    assert [int(d) for d in compact.body.body.buffer.shape] == [4]
    assert_same_meaning(before, compact)


def test_plan_allocations_keeps_a_halo_read_beyond_what_the_iteration_wrote():
    """Reads past the written window take the previous iteration's values: not sunk."""
    func = plan_allocations(_halo(write=3, read=4))
    assert isinstance(func.body, Allocate)


def test_plan_allocations_keeps_carried_buffer_outside_loop():
    func = run_prefix(running_sum(), 4)
    assert isinstance(func.body, Allocate)
    assert_same_meaning(running_sum(), func)


def test_plan_allocations_narrows_to_the_statements_that_use_it():
    func = run_prefix(matmul_exp(), 4)
    assert isinstance(func.body, Allocate)  # both nests use C
    A, B = Buffer("A", (4,)), Buffer("B", (4,))
    T = Buffer("T", (4,))
    i, j, k = Var("i"), Var("j"), Var("k")
    body = SeqStmt(
        (
            For(i, 0, 4, ForKind.SERIAL, BufferStore(T, A[i] * 2.0, (i,))),
            For(j, 0, 4, ForKind.SERIAL, BufferStore(B, T[j], (j,))),
            For(k, 0, 4, ForKind.SERIAL, BufferStore(A, A[k] + 1.0, (k,))),
        )
    )
    func = plan_allocations(PrimFunc((A, B), Allocate(T, body)))
    assert isinstance(func.body, SeqStmt) and isinstance(func.body.seq[0], Allocate)
    assert len(func.body.seq) == 2 and len(func.body.seq[0].body.seq) == 2


def test_compact_allocations_shrinks_tile_to_register_block():
    func = lower(tiled_matmul_local(n=16, ti=4, tj=8))
    (alloc,) = nodes(func.body, Allocate)
    assert alloc.buffer.static_shape() == (4, 8)
    assert alloc.buffer.scope == "local"
    for load in nodes(alloc.body, BufferLoad):
        if load.buffer is alloc.buffer:  # offsets subtracted: only the inner loop vars remain
            assert {v.name for v in nodes(load.indices, Var)} <= {"i1", "j1", "i2", "j2"}
    assert_same_meaning(tiled_matmul_local(), func)


def test_compact_allocations_leaves_full_buffers_and_params():
    func = run_prefix(matmul_exp(), 5)
    (alloc,) = nodes(func.body, Allocate)
    assert alloc.buffer.static_shape() == (8, 6)
    A = Buffer("A", (8,))
    i = Var("i")
    f2 = PrimFunc((A,), For(i, 2, 4, ForKind.SERIAL, BufferStore(A, const(1.0), (i,))))
    assert compact_allocations(f2).params[0] is A


def test_compact_allocations_offsets_partial_region():
    A, T = Buffer("A", (4,)), Buffer("T", (10,))
    i = Var("i")
    body = SeqStmt(
        (
            For(i, 0, 4, ForKind.SERIAL, BufferStore(T, A[i], (i + 3,))),
            For(i, 0, 4, ForKind.SERIAL, BufferStore(A, T[i + 3] * 2.0, (i,))),
        )
    )
    before = PrimFunc((A,), Allocate(T, body))
    func = compact_allocations(before)
    assert func.body.buffer.static_shape() == (4,)
    assert_same_meaning(before, func)


def test_simplify_indices_uses_loop_ranges():
    A = Buffer("A", (8, 8))
    i0, i1 = Var("i0"), Var("i1")
    idx = floordiv(i0 * 8 + i1, 8)
    body = For(
        i0,
        0,
        8,
        ForKind.SERIAL,
        For(i1, 0, 8, ForKind.SERIAL, BufferStore(A, const(1.0), (idx, (i0 * 8 + i1) % 8))),
    )
    func = simplify_indices(PrimFunc((A,), body))
    (store,) = nodes(func.body, BufferStore)
    assert store.indices[0] is i0 and store.indices[1] is i1


def test_simplify_indices_drops_decided_conditions():
    A = Buffer("A", (8,))
    i = Var("i")
    always = IfThenElse(i < 8, BufferStore(A, const(1.0), (i,)))
    never = IfThenElse(i >= 8, BufferStore(A, const(2.0), (i,)))
    func = simplify_indices(PrimFunc((A,), For(i, 0, 8, ForKind.SERIAL, SeqStmt((always, never)))))
    assert not nodes(func.body, IfThenElse)
    (store,) = nodes(func.body, BufferStore)
    assert store.value.value == 1.0


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: w.__name__)
def test_every_pass_prefix_preserves_meaning(workload):
    for count in range(1, len(LOWER_PASSES) + 1):
        assert_same_meaning(workload(), run_prefix(workload(), count))


def test_lower_result_is_block_free_and_idempotent():
    func = lower(matmul_exp())
    assert not nodes(func.body, Block) and func.attrs["lowered"] is True
    again = lower(func)
    assert_same_meaning(func, again)
    with pytest.raises(TypeError, match="PrimFunc"):
        lower("not a function")
