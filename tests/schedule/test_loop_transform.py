"""split, fuse, reorder, add_unit_loop: structure, numbers, trace round trip, errors."""

import numpy as np

from metaschedule import te, tir
from metaschedule.schedule.affine import has_affine_binding
from metaschedule.schedule.analysis import loop_doms
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
from metaschedule.tir.arith import evaluate
from metaschedule.tir.arith.iter_map import is_affine_binding
from metaschedule.tir.interpreter import interpret
from metaschedule.tir.stmt import SeqStmt, true

# ----------------------------------------------------------------------------- helpers


def block_realize(sch, name="C"):
    return sch.state.block_realize("main", name)


def bindings(sch, name="C"):
    return [str(v) for v in block_realize(sch, name).iter_values]


def loop_names(sch, name="C"):
    return [sch.get(lp).loop_var.name for lp in sch.get_loops(sch.get_block(name))]


def seq_under_loop():
    """``for i in range(8): (for j in range(1): B[i] = A[i] + 1); C[i] = A[i] * 2``."""
    A, B, C = (Buffer(n, (8,), "float32") for n in "ABC")
    i, j = Var("i"), Var("j")

    def realize(name, dst, value):
        v = Var("v_" + name)
        block = Block(
            (IterVar(v, Range(0, 8), IterType.DATA_PAR),),
            (BufferRegion(A, (Range(v, 1),)),),
            (BufferRegion(dst, (Range(v, 1),)),),
            name,
            BufferStore(dst, value(A[v]), (v,)),
        )
        return BlockRealize((i,), true(), block)

    inner = For(j, 0, 1, ForKind.SERIAL, realize("B", B, lambda x: x + 1.0))
    loop = For(i, 0, 8, ForKind.SERIAL, SeqStmt((inner, realize("C", C, lambda x: x * 2.0))))
    root = Block((), (), (), "root", loop)
    return PrimFunc((A, B, C), BlockRealize((), true(), root))


def two_loops(binding, iter_type=IterType.DATA_PAR, inner_extent=lambda i: 4, min_=0):
    """``for i in range(min_, min_ + 4): for j in range(inner_extent(i)):
    block B (v = binding)``."""
    A, B = Buffer("A", (32,)), Buffer("B", (32,))
    i, j, v = Var("i"), Var("j"), Var("v")
    block = Block(
        (IterVar(v, Range(0, 32), iter_type),),
        (BufferRegion(A, (Range(v, 1),)),),
        (BufferRegion(B, (Range(v, 1),)),),
        "B",
        BufferStore(B, A[v] + 1.0, (v,)),
    )
    inner = For(
        j, 0, inner_extent(i), ForKind.SERIAL, BlockRealize((binding(i, j),), true(), block)
    )
    loop = For(i, min_, 4, ForKind.SERIAL, inner)
    return PrimFunc((A, B), BlockRealize((), true(), Block((), (), (), "root", loop)))


# ----------------------------------------------------------------------------- split


def test_split_perfect_names_and_bindings():
    func = matmul(16, 12, 8)
    sch = tir.Schedule(func)
    i = sch.get_loops(sch.get_block("C"))[0]
    outs = sch.split(i, [4, 4])
    assert [sch.get(lp).extent.value for lp in outs] == [4, 4]
    assert loop_names(sch) == ["i_0", "i_1", "j", "k"]
    assert bindings(sch)[0] == "i_0 * 4 + i_1"
    assert block_realize(sch).predicate.value == 1  # a perfect split adds no predicate
    check(sch, func)


def test_split_imperfect_adds_predicate():
    func = matmul(10, 12, 8)
    sch = tir.Schedule(func)
    i = sch.get_loops(sch.get_block("C"))[0]
    i0, i1 = sch.split(i, [None, 4])
    assert [sch.get(i0).extent.value, sch.get(i1).extent.value] == [3, 4]
    pred = str(block_realize(sch).predicate)
    assert "i_0 * 4 + i_1 < 10" in pred
    check(sch, func)


def test_split_three_ways_with_inferred_middle_and_expr_rvs():
    func = matmul(10, 12, 8)
    sch = tir.Schedule(func, seed=3)
    _, j, _ = sch.get_loops(sch.get_block("C"))
    tiles = sch.sample_perfect_tile(j, n=3, max_innermost_factor=4)
    outs = sch.split(j, tiles)
    assert [sch.get(lp).extent.value for lp in outs] == [sch.get(t) for t in tiles]
    i = sch.get_loops(sch.get_block("C"))[0]
    _a, b, _c = sch.split(i, [2, None, 3])
    assert sch.get(b).extent.value == 2  # ceil(10 / 6)
    check(sch, func)
    assert "factors=[v" in str(sch.trace)


def test_split_preserve_unit_iters():
    func = matmul(16, 12, 8)
    keep = tir.Schedule(func)
    keep.split(keep.get_loops(keep.get_block("C"))[0], [1, 16])
    assert bindings(keep)[0] == "i_0 * 16 + i_1"
    drop = tir.Schedule(func)
    drop.split(drop.get_loops(drop.get_block("C"))[0], [1, 16], preserve_unit_iters=False)
    assert bindings(drop)[0] == "i_1"
    assert loop_names(drop) == ["i_0", "i_1", "j", "k"]  # the unit loop stays, as in TVM
    check(keep, func)
    check(drop, func)


def test_split_single_factor_renames():
    func = matmul(10, 12, 8)
    sch = tir.Schedule(func)
    (i0,) = sch.split(sch.get_loops(sch.get_block("C"))[0], [None])
    assert sch.get(i0).loop_var.name == "i_0" and sch.get(i0).extent.value == 10
    check(sch, func)


def test_split_nonzero_min():
    A, B = Buffer("A", (8,)), Buffer("B", (8,))
    i, v = Var("i"), Var("v")
    block = Block(
        (IterVar(v, Range(2, 6)),),
        (BufferRegion(A, (Range(v, 1),)),),
        (BufferRegion(B, (Range(v, 1),)),),
        "B",
        BufferStore(B, A[v] + 1.0, (v,)),
    )
    loop = For(i, 2, 6, ForKind.SERIAL, BlockRealize((i,), true(), block))
    func = PrimFunc((A, B), BlockRealize((), true(), Block((), (), (), "root", loop)))
    sch = tir.Schedule(func)
    sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 4])
    assert bindings(sch, "B") == ["i_0 * 4 + i_1 + 2"]
    assert "i_0 * 4 + i_1 < 6" in str(block_realize(sch, "B").predicate)
    rng = np.random.default_rng(0)
    a = rng.standard_normal(8).astype("float32")
    b1, b2 = np.zeros(8, "float32"), np.zeros(8, "float32")
    interpret(func, a, b1)
    interpret(sch.mod["main"], a, b2)
    np.testing.assert_array_equal(b1, b2)


def test_split_errors_leave_schedule_unchanged():
    sch = tir.Schedule(matmul(10, 12, 8))
    i = sch.get_loops(sch.get_block("C"))[0]
    assert_unchanged(sch, lambda: sch.split(i, []), "at least one factor")
    assert_unchanged(sch, lambda: sch.split(i, [None, None]), "at most one factor may be None")
    assert_unchanged(sch, lambda: sch.split(i, [0, None]), "positive")
    assert_unchanged(sch, lambda: sch.split(i, [-2, 5]), "positive")
    assert_unchanged(sch, lambda: sch.split(i, [3, 3]), r"product .* 9, smaller than .* 10")
    _i0, _ = sch.split(i, [2, 5])
    assert_unchanged(sch, lambda: sch.split(i, [2, 5]), "no longer exists")


def test_split_symbolic_extent_rejected():
    n = Var("n")
    A, B = Buffer("A", (n,)), Buffer("B", (n,))
    i, v = Var("i"), Var("v")
    block = Block(
        (IterVar(v, Range(0, n)),),
        (BufferRegion(A, (Range(v, 1),)),),
        (BufferRegion(B, (Range(v, 1),)),),
        "B",
        BufferStore(B, A[v] + 1.0, (v,)),
    )
    loop = For(i, 0, n, ForKind.SERIAL, BlockRealize((i,), true(), block))
    sch = tir.Schedule(PrimFunc((A, B), BlockRealize((), true(), Block((), (), (), "root", loop))))
    i = sch.get_loops(sch.get_block("B"))[0]
    assert_unchanged(sch, lambda: sch.split(i, [None, 4]), "constant bounds, but loop i")
    assert_unchanged(sch, lambda: sch.fuse(i), "constant bounds, but loop i")


# ----------------------------------------------------------------------------- fuse


def test_fuse_two_loops():
    func = matmul(10, 12, 8)
    sch = tir.Schedule(func)
    i, j, _k = sch.get_loops(sch.get_block("C"))
    f = sch.fuse(i, j)
    assert sch.get(f).loop_var.name == "i_j_fused" and sch.get(f).extent.value == 120
    assert bindings(sch)[:2] == ["i_j_fused // 12", "i_j_fused % 12"]
    check(sch, func)


def test_fuse_three_loops_then_split():
    func = matmul(4, 6, 2)
    sch = tir.Schedule(func)
    f = sch.fuse(*sch.get_loops(sch.get_block("C")))
    assert sch.get(f).loop_var.name == "i_j_k_fused"
    first, middle, last = block_realize(sch).iter_values
    assert [str(first), str(last)] == ["i_j_k_fused // 12", "i_j_k_fused % 2"]
    fv = sch.get(f).loop_var
    assert [evaluate(middle, {fv: x}) for x in range(48)] == [x // 2 % 6 for x in range(48)]
    sch.split(f, [None, 5])
    check(sch, func)


def test_split_then_fuse_back_is_simplified():
    func = matmul(16, 12, 8)
    sch = tir.Schedule(func)
    i0, i1 = sch.split(sch.get_loops(sch.get_block("C"))[0], [4, 4])
    f = sch.fuse(i0, i1)
    assert bindings(sch)[0] == "i_0_i_1_fused"
    assert sch.get(f).extent.value == 16
    check(sch, func)


def test_fuse_unit_loops():
    func = matmul(16, 12, 8)
    keep = tir.Schedule(func)
    i0, i1 = keep.split(keep.get_loops(keep.get_block("C"))[0], [16, 1])
    keep.fuse(i0, i1)
    assert bindings(keep)[0] == "i_0_i_1_fused"
    drop = tir.Schedule(func)
    a, _ = drop.split(drop.get_loops(drop.get_block("C"))[0], [1, 16])
    f = drop.fuse(a, preserve_unit_iters=False)
    assert drop.get(f).extent.value == 1 and bindings(drop)[0] == "i_1"
    check(keep, func)
    check(drop, func)


def test_fuse_errors():
    sch = tir.Schedule(matmul(10, 12, 8))
    i, j, k = sch.get_loops(sch.get_block("C"))
    assert_unchanged(sch, lambda: sch.fuse(), "at least one loop")
    assert_unchanged(sch, lambda: sch.fuse(i, k), "not directly nested in loop i")
    assert_unchanged(sch, lambda: sch.fuse(j, i), "not inside loop j")
    assert_unchanged(sch, lambda: sch.fuse(i, i), "given twice")
    seq = tir.Schedule(seq_under_loop())
    i, j = seq.get_loops(seq.get_block("B"))
    assert_unchanged(seq, lambda: seq.fuse(i, j), "has siblings under loop i")


def test_fuse_across_blocks_of_different_nests():
    A = te.placeholder((4, 4), "float32", "A")
    B = te.compute((4, 4), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((4, 4), lambda i, j: B[i, j] * 2.0, name="C")
    sch = tir.Schedule(te.create_prim_func([A, C]))
    bi, _ = sch.get_loops(sch.get_block("B"))
    _, cj = sch.get_loops(sch.get_block("C"))
    assert_unchanged(sch, lambda: sch.fuse(bi, cj), "not inside loop i")


# ----------------------------------------------------------------------------- reorder


def test_reorder_full_and_partial():
    func = matmul(10, 12, 8)
    sch = tir.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.reorder(k, i)
    assert loop_names(sch) == ["k", "j", "i"]
    assert sch.get(i).loop_var.name == "i"  # LoopRVs stay valid
    sch.reorder(j, k)
    assert loop_names(sch) == ["j", "k", "i"]
    check(sch, func)


def test_reorder_after_tiling_keeps_kinds_and_others():
    func = matmul(16, 12, 8)
    sch = tir.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    _i0, i1 = sch.split(i, [4, 4])
    j0, j1 = sch.split(j, [3, 4])
    sch.annotate(j1, "hint", 1)
    sch.reorder(j0, i1)
    assert loop_names(sch) == ["i_0", "j_0", "i_1", "j_1", "k"]
    assert sch.get(j1).annotations == {"hint": 1}
    sch.reorder(k, i1)
    assert loop_names(sch) == ["i_0", "j_0", "k", "j_1", "i_1"]
    check(sch, func)


def test_reorder_keeps_split_pieces_of_a_spatial_reduction_fusion():
    func = matmul(4, 6, 4)
    sch = tir.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    f0, f1 = sch.split(sch.fuse(j, k), [8, 3])
    # swapping f0 and f1 would run C[., v_j] updates before its init
    assert_unchanged(
        sch,
        lambda: sch.reorder(f1, f0),
        r"cannot move loop j_k_fused_\d: it is "
        "bound to both data-parallel and reduction iter vars of block 'C'",
    )
    assert_unchanged(sch, lambda: sch.reorder(f0, i), "cannot move loop j_k_fused_0")
    sch.unroll(f1)
    check(sch, func)


def test_reorder_errors():
    sch = tir.Schedule(matmul(10, 12, 8))
    i, j, _k = sch.get_loops(sch.get_block("C"))
    assert_unchanged(sch, lambda: sch.reorder(i, i), "given twice")
    A = te.placeholder((4, 4), "float32", "A")
    B = te.compute((4, 4), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((4, 4), lambda i, j: B[i, j] * 2.0, name="C")
    two = tir.Schedule(te.create_prim_func([A, C]))
    bi, _ = two.get_loops(two.get_block("B"))
    _, cj = two.get_loops(two.get_block("C"))
    assert_unchanged(two, lambda: two.reorder(cj, bi), "different subtrees")
    seq = tir.Schedule(seq_under_loop())
    i, j = seq.get_loops(seq.get_block("B"))
    assert_unchanged(seq, lambda: seq.reorder(j, i), "perfectly nested")


# ----------------------------------------------------------------------------- add_unit_loop


def test_add_unit_loop_on_block_and_loop():
    func = matmul(10, 12, 8)
    sch = tir.Schedule(func)
    b = sch.get_block("C")
    u = sch.add_unit_loop(b)
    assert loop_names(sch) == ["i", "j", "k", "u"] and sch.get(u).extent.value == 1
    w = sch.add_unit_loop(sch.get_loops(b)[0])
    assert loop_names(sch) == ["u", "i", "j", "k", "u"]
    sch.fuse(w, sch.get_loops(b)[1])
    check(sch, func)


def test_add_unit_loop_root_rejected():
    sch = tir.Schedule(matmul(10, 12, 8))
    root = sch.get_block("root")
    assert_unchanged(sch, lambda: sch.add_unit_loop(root), "root block")


def test_fuse_needs_zero_min():
    sch = tir.Schedule(two_loops(lambda i, j: i * 4 + j - 4, min_=1))
    i, j = sch.get_loops(sch.get_block("B"))
    assert_unchanged(sch, lambda: sch.fuse(i, j), "loops starting at 0, loop i starts at 1")


def test_reorder_rejects_non_affine_opaque_and_dependent_nests():
    sch = tir.Schedule(matmul(10, 12, 8))
    assert_unchanged(sch, lambda: sch.reorder(), "at least one loop")
    square = tir.Schedule(two_loops(lambda i, j: i * i + j))
    i, j = square.get_loops(square.get_block("B"))
    assert_unchanged(square, lambda: square.reorder(j, i), "block 'B' has non-affine bindings")
    opaque = tir.Schedule(two_loops(lambda i, j: i * 4 + j, IterType.OPAQUE))
    i, j = opaque.get_loops(opaque.get_block("B"))
    assert_unchanged(opaque, lambda: opaque.reorder(j, i), "iter var v of kind OPAQUE")
    triangle = tir.Schedule(two_loops(lambda i, j: i * 4 + j, inner_extent=lambda i: i + 1))
    i, j = triangle.get_loops(triangle.get_block("B"))
    assert_unchanged(
        triangle,
        lambda: triangle.reorder(j, i),
        r"bounds of loop j \(0, i \+ 1\) depend on another loop",
    )


# ----------------------------------------------------------------------------- regressions
# (shrunk failures of test_schedule_property.py)


def test_reorder_rejects_the_halo_bindings_of_compute_at():
    # compute_at of a padding block under a conv loop binds it to yy + ax0: overlapping
    # windows, not an affine map, so its loops cannot be reordered (TVM agrees)
    data = te.placeholder((1, 5, 5, 3), "float32", "data")
    kernel = te.placeholder((3, 3, 3, 4), "float32", "kernel")
    func = te.create_prim_func([data, kernel, te.ops.conv2d_nhwc(data, kernel, padding=1)])
    sch = tir.Schedule(func)
    pad = sch.get_block("PaddedInput")
    loc = sch.sample_compute_location(pad, decision=1)  # under loop yy of the conv
    sch.compute_at(pad, loc)
    assert "yy + ax0" in bindings(sch, "PaddedInput")
    a, b = sch.get_loops(pad)[:2]
    assert_unchanged(sch, lambda: sch.reorder(b, a), "'PaddedInput' has non-affine bindings")
    check(sch, func)


def test_imperfect_split_of_a_fused_loop_keeps_values_and_affine_verdict():
    # fuse(j, k) then split by 13 (> 24 / 2): the predicate keeps f < 24; the simplified
    # bindings f_0 // 2, f_0 % 2 * 2 + f_1 are affine only under that predicate, which
    # arith's detection does not see; the schedule must not claim more than it detects
    func = matmul(4, 6, 4)
    sch = tir.Schedule(func)
    _, j, k = sch.get_loops(sch.get_block("C"))
    f = sch.fuse(j, k, preserve_unit_iters=False)
    sch.split(f, [13, None], preserve_unit_iters=False)
    r = block_realize(sch)
    assert str(r.predicate) == "j_k_fused_0 * 2 + j_k_fused_1 < 24"
    dom = loop_doms(sch.state.loops_above("main", r))
    assert has_affine_binding(sch.state, "main", r) == is_affine_binding(
        r.iter_values, dom, r.predicate
    )
    check(sch, func)
