"""compute_at, reverse_compute_at and sample_compute_location."""

from __future__ import annotations

import dataclasses
from unittest import mock

import numpy as np
import pytest

from metaschedule import te, tir
from metaschedule.codegen import build
from metaschedule.schedule import NotAffineError, ScheduleError
from metaschedule.schedule.error import (
    InsertionIndexError,
    LoopPositionError,
    NotAllBlocksUnderLoopError,
    NotCompleteOrReductionBlockError,
)
from metaschedule.schedule.primitives import compute_location_candidates as cl
from metaschedule.testing import matmul_relu
from metaschedule.testing.primitive_check import check_primitives as check
from metaschedule.tir import Block, BlockRealize, For, IntImm, SeqStmt
from metaschedule.tir.interpreter import interpret
from metaschedule.tir.structural import structural_equal

# ----------------------------------------------------------------------------- workloads


def softmax():
    x = te.placeholder((3, 5), "float32", "x")
    return te.create_prim_func([x, te.ops.softmax(x)])


def conv_bias_relu():
    data = te.placeholder((1, 5, 5, 2), "float32", "data")
    kernel = te.placeholder((3, 3, 2, 4), "float32", "kernel")
    bias = te.placeholder((4,), "float32", "bias")
    conv = te.ops.conv2d_nhwc(data, kernel, padding=1)
    return te.create_prim_func([data, kernel, bias, te.ops.relu(te.ops.bias_add(conv, bias))])


def chain2d(n=4, m=6):
    """A -> B -> C -> D, element-wise."""
    A = te.placeholder((n, m), "float32", "A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((n, m), lambda i, j: B[i, j] + 1.0, name="C")
    D = te.compute((n, m), lambda i, j: C[i, j] * C[i, j], name="D")
    return te.create_prim_func([A, D])


def stencil(n=8):
    A = te.placeholder((n + 1,), "float32", "A")
    B = te.compute((n + 1,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[i] + B[i + 1], name="C")
    return te.create_prim_func([A, C])


def inputs(func, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(p.static_shape()).astype(p.dtype) for p in func.params]


def loops_of(sch, name):
    return sch.get_loops(sch.get_block(name))


def extents(sch, name):
    return [sch.get(lp).extent.value for lp in loops_of(sch, name)]


def realize(sch, name) -> BlockRealize:
    return sch.state.block_realize("main", name)


# ----------------------------------------------------------------------------- compute_at


def test_compute_at_reduction_producer_keeps_reduction_loop():
    func = matmul_relu(10, 6, 8)
    sch = tir.Schedule(func)
    i, j = loops_of(sch, "D")
    sch.compute_at(sch.get_block("C"), j)
    # C now sits under D's i, j; only its reduction loop k remains as a new loop
    assert extents(sch, "C") == [10, 6, 8]
    r = realize(sch, "C")
    assert r.iter_values[0] is sch.get(i).loop_var and r.iter_values[1] is sch.get(j).loop_var
    body = sch.get(j).body
    assert isinstance(body, SeqStmt) and body.seq[1] is realize(sch, "D")
    check(sch, func)


def test_compute_at_outer_loop_covers_row():
    func = matmul_relu(10, 6, 8)
    sch = tir.Schedule(func)
    i, _ = loops_of(sch, "D")
    sch.compute_at(sch.get_block("C"), i)
    assert extents(sch, "C") == [10, 6, 8]
    assert isinstance(realize(sch, "C").predicate, IntImm)  # exact region: no predicate
    check(sch, func)


def test_compute_at_after_split_adds_predicate_for_partial_tile():
    func = matmul_relu(10, 6, 8)
    sch = tir.Schedule(func)
    i, _ = loops_of(sch, "D")
    io, _ = sch.split(i, [None, 4])  # 10 = 3 tiles of 4, the last one partial
    sch.compute_at(sch.get_block("C"), io)
    assert extents(sch, "C") == [3, 4, 6, 8]
    assert not isinstance(realize(sch, "C").predicate, IntImm)
    check(sch, func)


def test_compute_at_preserve_unit_loops():
    func = matmul_relu(10, 6, 8)
    sch = tir.Schedule(func)
    _, j = loops_of(sch, "D")
    sch.compute_at(sch.get_block("C"), j, preserve_unit_loops=True)
    assert extents(sch, "C") == [10, 6, 1, 1, 8]
    check(sch, func)


def test_compute_at_moves_deeper_then_back_up():
    func = matmul_relu(10, 6, 8)
    sch = tir.Schedule(func)
    c = sch.get_block("C")
    i, j = loops_of(sch, "D")
    sch.compute_at(c, i)
    sch.compute_at(c, j)
    assert extents(sch, "C") == [10, 6, 8]
    sch.compute_at(c, i)
    assert extents(sch, "C") == [10, 6, 8]
    assert len(sch.get(i).body.seq) == 2
    check(sch, func)


def test_compute_at_padding_into_conv_row():
    func = conv_bias_relu()
    sch = tir.Schedule(func)
    loops = loops_of(sch, "conv2d_nhwc")
    sch.compute_at(sch.get_block("PaddedInput"), loops[1])
    # one output row needs three padded rows
    assert extents(sch, "PaddedInput") == [1, 5, 3, 7, 2]
    check(sch, func)


def test_softmax_fused_row_by_row():
    func = softmax()
    sch = tir.Schedule(func)
    expsum = sch.get_block("T_softmax_expsum")
    i, _ = sch.get_loops(expsum)
    # exp also feeds norm: norm must first come under the row loop
    with pytest.raises(NotAllBlocksUnderLoopError, match="T_softmax_norm"):
        sch.compute_at(sch.get_block("T_softmax_exp"), i)
    sch.reverse_compute_at(sch.get_block("T_softmax_norm"), i)
    sch.compute_at(sch.get_block("T_softmax_exp"), i)
    sch.compute_at(sch.get_block("T_softmax_maxelem"), i)
    names = [r.block.name_hint for r in sch.state.child_block_realizes(sch.get(i))]
    assert names == ["T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"]
    check(sch, func)


def test_compute_at_cache_read_blocks_in_tiled_matmul():
    func = matmul_relu(8, 12, 8)
    sch = tir.Schedule(func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [2, 4])
    j0, j1 = sch.split(j, [3, 4])
    k0, k1 = sch.split(k, [2, 4])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    a_local = sch.cache_read(c, 0, "local")
    sch.compute_at(a_local, k0)
    assert extents(sch, "A_local") == [2, 3, 2, 4, 4]
    c_local = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(c_local, j0)
    sch.reverse_compute_at(sch.get_block("D"), j0)
    assert extents(sch, "D") == [2, 3, 4, 4]
    check(sch, func)


def test_compute_at_index_positions():
    func = chain2d()
    sch = tir.Schedule(func)
    b, c, d = (sch.get_block(n) for n in "BCD")
    i, _j = sch.get_loops(b)
    sch.reverse_compute_at(c, i)
    sch.reverse_compute_at(d, i)
    # i's body: [B-nest, C-nest, D-nest]; B may go anywhere before C
    with pytest.raises(InsertionIndexError, match=r"\[0, 1\]"):
        sch.compute_at(b, i, index=2)
    sch.compute_at(b, i, index=-2)
    kids = sch.state.child_block_realizes(sch.get(i))
    assert [r.block.name_hint for r in kids] == ["B", "C", "D"]
    check(sch, func)


def test_compute_at_no_legal_position():
    func = chain2d()
    sch = tir.Schedule(func)
    b, c, d = (sch.get_block(n) for n in "BCD")
    i, j = sch.get_loops(b)
    sch.reverse_compute_at(c, j)
    sch.reverse_compute_at(d, j)
    # j holds B (producer of C) and D (consumer of C) in one subtree of i
    with pytest.raises(InsertionIndexError, match="no place"):
        sch.compute_at(c, i)


# ----------------------------------------------------------------------------- reverse


def test_reverse_compute_at_after_split():
    func = matmul_relu(10, 6, 8)
    sch = tir.Schedule(func)
    i, _, _ = loops_of(sch, "C")
    io, _ = sch.split(i, [None, 3])
    sch.reverse_compute_at(sch.get_block("D"), io)
    assert extents(sch, "D") == [4, 3, 6]
    body = sch.get(io).body
    assert isinstance(body, SeqStmt) and len(body.seq) == 2
    check(sch, func)


def test_reverse_compute_at_inside_reduction_loop_recomputes_but_agrees():
    func = matmul_relu(10, 6, 8)
    sch = tir.Schedule(func)
    _, _, k = loops_of(sch, "C")
    sch.reverse_compute_at(sch.get_block("D"), k)
    assert extents(sch, "D") == [10, 6, 8]
    check(sch, func)


def test_reverse_compute_at_bias_relu_under_conv_row():
    func = conv_bias_relu()
    sch = tir.Schedule(func)
    loops = loops_of(sch, "conv2d_nhwc")
    sch.reverse_compute_at(sch.get_block("T_add"), loops[1])
    sch.reverse_compute_at(sch.get_block("T_relu"), loops[1])
    assert extents(sch, "T_relu") == [1, 5, 5, 4]
    check(sch, func)


def test_reverse_compute_at_stencil_read_is_rejected():
    func = stencil()
    sch = tir.Schedule(func)
    (i,) = loops_of(sch, "B")
    with pytest.raises(ScheduleError, match="not a single iteration variable"):
        sch.reverse_compute_at(sch.get_block("C"), i)
    # compute_at of the producer is fine: one output needs two inputs
    sch.compute_at(sch.get_block("B"), loops_of(sch, "C")[0])
    assert extents(sch, "B") == [8, 2]
    check(sch, func)


def test_reverse_compute_at_splitting_reduction_is_rejected():
    A = te.placeholder((4, 6), "float32", "A")
    B = te.compute((4, 6), lambda i, j: A[i, j] + 1.0, name="B")
    r = te.reduce_axis((0, 6), "r")
    C = te.compute((4,), lambda i: te.sum(B[i, r], axis=r), name="C")
    func = te.create_prim_func([A, C])
    sch = tir.Schedule(func)
    i, j = loops_of(sch, "B")
    with pytest.raises(ScheduleError, match="reduction variable"):
        sch.reverse_compute_at(sch.get_block("C"), j)
    sch.reverse_compute_at(sch.get_block("C"), i)
    assert extents(sch, "C") == [4, 6]
    check(sch, func)


def test_reverse_compute_at_producer_not_under_loop():
    A = te.placeholder((4, 6), "float32", "A")
    B1 = te.compute((4, 6), lambda i, j: A[i, j] + 1.0, name="B1")
    B2 = te.compute((4, 6), lambda i, j: A[i, j] * 2.0, name="B2")
    C = te.compute((4, 6), lambda i, j: B1[i, j] + B2[i, j], name="C")
    func = te.create_prim_func([A, C])
    sch = tir.Schedule(func)
    # B1 precedes B2's loop: it is done by then, so C may follow B2 alone
    sch.reverse_compute_at(sch.get_block("C"), loops_of(sch, "B2")[0])
    check(sch, func)
    sch2 = tir.Schedule(func)
    with pytest.raises(NotAllBlocksUnderLoopError, match="B2"):
        sch2.reverse_compute_at(sch2.get_block("C"), loops_of(sch2, "B1")[0])
    with pytest.raises(NotAllBlocksUnderLoopError, match="no producer"):
        sch2.reverse_compute_at(sch2.get_block("B2"), loops_of(sch2, "B1")[0])


# ----------------------------------------------------------------------------- errors


def test_error_leaves_schedule_unchanged():
    func = matmul_relu(10, 6, 8)
    sch = tir.Schedule(func)
    mod, n = sch.mod, len(sch.trace.insts)
    i, _, _ = loops_of(sch, "C")
    with pytest.raises(NotAllBlocksUnderLoopError, match="'D'.*not under loop i"):
        sch.compute_at(sch.get_block("C"), i)
    assert sch.mod is mod and len(sch.trace.insts) == n + 3


def test_error_no_consumer():
    sch = tir.Schedule(matmul_relu(10, 6, 8))
    i, _, _ = loops_of(sch, "C")
    with pytest.raises(NotAllBlocksUnderLoopError, match="no consumer"):
        sch.compute_at(sch.get_block("D"), i)


def test_error_root_block_and_loop_inside_block():
    sch = tir.Schedule(matmul_relu(10, 6, 8))
    i, _ = loops_of(sch, "D")
    with pytest.raises(LoopPositionError, match="inside block 'root'"):
        sch.compute_at(sch.get_block("root"), i)


def _wrap_in_block(func, name: str):
    """Put the loop nest of block ``name`` inside an opaque block ``name + '_outer'``."""
    root = func.body.block
    seq = list(root.body.seq)
    idx = next(k for k, s in enumerate(seq) if isinstance(s, For) and _holds(s, name))
    inner = seq[idx]
    outer = BlockRealize((), IntImm("bool", 1), Block((), (), (), name + "_outer", inner))
    seq[idx] = outer
    new_root = dataclasses.replace(root, body=SeqStmt(tuple(seq)))
    return func.with_body(dataclasses.replace(func.body, block=new_root))


def _holds(stmt, name):
    found = []
    from metaschedule.tir.functor import post_order_visit

    post_order_visit(
        stmt, lambda n: found.append(n) if isinstance(n, Block) and n.name_hint == name else None
    )
    return bool(found)


def test_error_loop_in_other_scope():
    sch = tir.Schedule(_wrap_in_block(matmul_relu(10, 6, 8), "D"))
    _i, j = loops_of(sch, "D")
    with pytest.raises(LoopPositionError, match="scope of block 'D_outer'"):
        sch.compute_at(sch.get_block("C"), j)
    with pytest.raises(LoopPositionError, match="inside block 'D_outer'"):
        sch.compute_at(sch.get_block("D_outer"), j)


def test_error_not_complete_nor_reduction():
    func = matmul_relu(10, 6, 8)
    sch0 = tir.Schedule(func)
    r = realize(sch0, "C")
    broken = dataclasses.replace(r, block=dataclasses.replace(r.block, init=None))
    sch0.state.replace("main", {r: broken})
    sch = tir.Schedule(sch0.mod)
    _, j = loops_of(sch, "D")
    with pytest.raises(NotCompleteOrReductionBlockError, match="'C'.*not data-parallel.*no init"):
        sch.compute_at(sch.get_block("C"), j)


def test_error_not_affine():
    func = chain2d()
    sch0 = tir.Schedule(func)
    r = realize(sch0, "B")
    i, j = (sch0.get(lp).loop_var for lp in loops_of(sch0, "B"))
    sch0.state.replace("main", {r: dataclasses.replace(r, iter_values=(i * j % 4, j))})
    sch = tir.Schedule(sch0.mod)
    with pytest.raises(NotAffineError, match="'B'"):
        sch.compute_at(sch.get_block("B"), loops_of(sch, "C")[0])


def test_root_marker_is_a_no_op():
    sch = tir.Schedule(matmul_relu(10, 6, 8))
    loc = sch.sample_compute_location(sch.get_block("C"), decision=-1)
    sch.compute_at(sch.get_block("C"), loc)  # root marker: nothing happens
    assert structural_equal(sch.mod["main"], matmul_relu(10, 6, 8))


# ----------------------------------------------------------------------------- sampling


def test_sample_compute_location_candidates_and_decisions():
    func = chain2d()
    sch = tir.Schedule(func, seed=3)
    b = sch.get_block("B")
    seen = set()
    for _ in range(30):
        s = sch.copy()
        loc = s.sample_compute_location(s.get_block("B"))
        seen.add(s.trace.get_decision(s.trace.insts[-1]))
        sch.seed(sch.fork_seed())
    assert seen == {-2, -1, 0, 1}
    loc = sch.sample_compute_location(b, decision=1)
    assert sch.get(loc) is sch.get(loops_of(sch, "C")[1])
    sch.compute_at(b, loc)
    assert extents(sch, "B") == [4, 6]
    check(sch, func)


def test_sample_compute_location_inline_marker():
    func = chain2d()
    sch = tir.Schedule(func)
    loc = sch.sample_compute_location(sch.get_block("C"), decision=-2)
    assert sch.get(loc) == "inline"
    sch.compute_at(sch.get_block("C"), loc)
    assert "C" not in sch.state.index("main").blocks
    check(sch, func)


def test_sample_compute_location_falls_back_to_lower_legal_decision():
    func = matmul_relu(10, 6, 8)
    sch = tir.Schedule(func)
    c = sch.get_block("C")
    # C is a reduction (not inlinable); D's loops i, j are both legal
    loc = sch.sample_compute_location(c, decision=7)
    assert sch.trace.get_decision(sch.trace.insts[-1]) == 1
    sch.compute_at(c, loc)
    check(sch, func)
    fresh = tir.Schedule(func)
    with pytest.raises(ScheduleError, match="legal: \\[-1, 0, 1\\]"):
        fresh.sample_compute_location(fresh.get_block("C"), decision=-2)


def test_sample_compute_location_same_seed_same_trace():
    func = conv_bias_relu()

    def run(seed):
        sch = tir.Schedule(func, seed=seed)
        for name in ("PaddedInput", "T_add"):
            blk = sch.get_block(name)
            sch.compute_at(blk, sch.sample_compute_location(blk))
        return sch

    a, b = run(11), run(11)
    assert a.trace.as_json() == b.trace.as_json()
    assert structural_equal(a.mod, b.mod)
    check(a, func)


def test_sample_compute_location_block_without_consumer():
    sch = tir.Schedule(matmul_relu(10, 6, 8))
    loc = sch.sample_compute_location(sch.get_block("D"))
    assert sch.get(loc) == "root"


def _permute_root(func, order):
    root = func.body.block
    seq = root.body.seq
    new_root = dataclasses.replace(root, body=SeqStmt(tuple(seq[k] for k in order)))
    return func.with_body(dataclasses.replace(func.body, block=new_root))


def _diamond():
    """A2 -> B -> C, and D reads both B and C."""
    X = te.placeholder((4, 6), "float32", "X")
    A2 = te.compute((4, 6), lambda i, j: X[i, j] - 1.0, name="A2")
    B = te.compute((4, 6), lambda i, j: A2[i, j] * 2.0, name="B")
    C = te.compute((4, 6), lambda i, j: B[i, j] + 1.0, name="C")
    D = te.compute((4, 6), lambda i, j: B[i, j] * C[i, j], name="D")
    return te.create_prim_func([X, D])


def test_error_dataflow_out_of_order():
    func = _diamond()
    late_writer = tir.Schedule(_permute_root(chain2d(), [1, 0, 2]))  # C before B
    with pytest.raises(ScheduleError, match="'B' writes 'B', read by 'C', after it"):
        late_writer.compute_at(late_writer.get_block("C"), loops_of(late_writer, "D")[0])
    early_reader = tir.Schedule(_permute_root(func, [0, 2, 1, 3]))  # C before B
    with pytest.raises(ScheduleError, match="'C' reads the output of 'B' before"):
        early_reader.compute_at(early_reader.get_block("B"), loops_of(early_reader, "D")[0])


# ----------------------------------------------------------------------------- native code


@pytest.mark.compiler
def test_tiled_matmul_with_moved_blocks_builds():
    func = matmul_relu(8, 12, 8)
    sch = tir.Schedule(func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 3])  # partial tiles: predicates on the moved blocks
    j0, j1 = sch.split(j, [3, 4])
    k0, k1 = sch.split(k, [2, 4])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    sch.compute_at(sch.cache_read(c, 1, "local"), k0)
    sch.reverse_compute_at(sch.get_block("D"), j0)
    check(sch, func)
    want = inputs(func)
    interpret(func, *want)
    got = inputs(func)
    got[-1][...] = 0
    build(sch.mod, "cpu")(*got)
    np.testing.assert_allclose(got[-1], want[-1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("illegal", [(), (1,), (0, 2), (1, 2, 3)])
def test_replayed_decisions_pick_what_the_candidate_list_picks(illegal):
    # replay checks only the candidates it needs; it must choose as the full list does,
    # also when some loops are illegal (made so here) and a decision falls back
    sch = tir.Schedule(conv_bias_relu())
    for name in ("PaddedInput", "conv2d_nhwc", "T_add"):
        realize = sch.state.block_realize("main", name)
        loops = cl._candidate_loops(sch.state, "main", realize)
        assert len(loops) == 4
        bad = {id(loops[i]) for i in illegal}
        real = cl.can_compute_at
        with mock.patch.object(
            cl,
            "can_compute_at",
            lambda st, f, r, lp, bad=bad, real=real: id(lp) not in bad and real(st, f, r, lp),
        ):
            cands = cl.compute_location_candidates(sch.state, "main", realize)
            assert [c[0] for c in cands if c[0] >= 0] == [i for i in range(4) if i not in illegal]
            for want in range(-3, 8):
                lower = [c for c in cands if c[0] <= want]
                got = cl.closest_compute_location(sch.state, "main", realize, want)
                if not lower:
                    assert got is None
                else:
                    assert got[0] == lower[-1][0] and got[1] is lower[-1][1], (name, want)
