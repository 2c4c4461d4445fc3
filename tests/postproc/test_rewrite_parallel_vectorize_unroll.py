"""RewriteParallelVectorizeUnroll: loop kinds and pragmas from the root block's hints."""

import pytest

from metaschedule import te, tir
from metaschedule.mutator.mutate_parallel import analyze_parallel, fused_loops
from metaschedule.postproc import RewriteParallelVectorizeUnroll
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
from metaschedule.tir.stmt import true

PAR, VEC = "meta_schedule.parallel", "meta_schedule.vectorize"
EXPLICIT, IMPLICIT = "meta_schedule.unroll_explicit", "meta_schedule.unroll_implicit"


def annotate_root(sch, **hints):
    keys = {"parallel": PAR, "vectorize": VEC, "explicit": EXPLICIT, "implicit": IMPLICIT}
    root = sch.get_block("root")
    for name, value in hints.items():
        sch.annotate(root, keys[name], value)
    sch.enter_postproc()


def loops_of(sch, block):
    return [sch.get(lp) for lp in sch.get_loops(sch.get_block(block))]


def shape(loops):
    return [(lp.kind, lp.extent.value) for lp in loops]


def elementwise(n=8, m=32):
    a = te.placeholder((n, m), "float32", "A")
    b = te.compute((n, m), lambda i, j: a[i, j] * 2.0, name="B")
    return te.create_prim_func([a, b])


def tiled_matmul(func):
    """``i0, j0, k, i1, j1`` (4, 3, 8, 4, 4): an SRS tiling of a 16 x 12 x 8 matmul."""
    sch = tir.Schedule(func, seed=0)
    i, j, k = sch.get_loops(sch.get_block("T_matmul_NN"))
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(i0, j0, k, i1, j1)
    return sch


def test_tiled_matmul_gets_parallel_vector_and_unroll(matmul, check):
    func = matmul()
    sch = tiled_matmul(func)
    annotate_root(sch, parallel=8, vectorize=16, explicit=16)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    loops = loops_of(sch, "T_matmul_NN")
    # i0 * j0 = 12 >= 8: both fused; j1 contiguous (stride 1), i1 is not (stride 12 != 4)
    assert shape(loops) == [
        (ForKind.PARALLEL, 12),
        (ForKind.SERIAL, 8),
        (ForKind.SERIAL, 4),
        (ForKind.VECTORIZED, 4),
    ]
    assert loops[0].annotations == {"pragma_auto_unroll_max_step": 16, "pragma_unroll_explicit": 1}
    assert sch.get(sch.get_block("root")).annotations == {}
    check(sch, func)
    names = [i.kind.name for i in sch.trace.insts]
    post = names[names.index("EnterPostproc") + 1 :]
    assert post.count("Unannotate") == 3 and "Fuse" in post and "Parallel" in post


def test_stops_at_the_first_product_reaching_the_parallel_extent_as_the_mutator(check):
    a = te.placeholder((4, 4, 8), "float32", "A")
    b = te.compute((4, 4, 8), lambda i, j, k: a[i, j, k] + 1.0, name="B")
    func = te.create_prim_func([a, b])
    sch = tir.Schedule(func)
    annotate_root(sch, parallel=16)
    prods = analyze_parallel(sch, "root", "main", 64)
    assert fused_loops(prods, 16) == (2,)  # the plan MutateParallel counts on
    assert RewriteParallelVectorizeUnroll().apply(sch)
    assert shape(loops_of(sch, "B")) == [(ForKind.PARALLEL, 16), (ForKind.SERIAL, 8)]
    check(sch, func)


def test_all_loops_fused_split_parallel_and_vectorized(check):
    func = elementwise(8, 32)
    sch = tir.Schedule(func)
    annotate_root(sch, parallel=16, vectorize=8, implicit=64)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    loops = loops_of(sch, "B")
    assert shape(loops) == [(ForKind.PARALLEL, 32), (ForKind.VECTORIZED, 8)]
    assert loops[0].annotations == {}  # as TVM: a pure spatial block is not unrolled
    check(sch, func)


def test_implicit_unroll_on_a_reduction(matmul, check):
    func = matmul()
    sch = tir.Schedule(func)
    annotate_root(sch, implicit=64)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    loops = loops_of(sch, "T_matmul_NN")
    assert [lp.kind for lp in loops] == [ForKind.SERIAL] * 3
    assert loops[0].annotations == {"pragma_auto_unroll_max_step": 64, "pragma_unroll_explicit": 0}
    assert not loops[1].annotations and not loops[2].annotations
    check(sch, func)


def test_small_fused_loop_is_not_split_past_its_extent(check):
    func = elementwise(2, 4)
    sch = tir.Schedule(func)
    annotate_root(sch, parallel=16, vectorize=64)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    assert shape(loops_of(sch, "B")) == [(ForKind.SERIAL, 1), (ForKind.VECTORIZED, 8)]
    assert "T.vectorized(8)" in sch.mod.script() and "T.parallel" not in sch.mod.script()
    check(sch, func)


def test_vectorizes_only_contiguous_inner_loops(check):
    func = elementwise(8, 16)
    sch = tir.Schedule(func)
    i, j = sch.get_loops(sch.get_block("B"))
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(j0, i, j1)  # i has stride 16, not 4 * 1: not fusible with j1
    annotate_root(sch, vectorize=64)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    assert shape(loops_of(sch, "B")) == [
        (ForKind.SERIAL, 4),
        (ForKind.SERIAL, 8),
        (ForKind.VECTORIZED, 4),
    ]
    check(sch, func)

    sch = tir.Schedule(func)
    annotate_root(sch, vectorize=128)  # i (stride 16) follows j (16 x 1): one fused loop
    assert RewriteParallelVectorizeUnroll().apply(sch)
    assert shape(loops_of(sch, "B")) == [(ForKind.VECTORIZED, 128)]
    check(sch, func)


def test_unit_inner_loop_does_not_stop_the_vectorized_fusion(check):
    # a unit loop over rows (stride 16) innermost, as a sampled tile of 1 leaves it: it
    # moves nothing, so j (stride 1) is fused with it and vectorized, not a 1-lane loop
    func = elementwise(8, 16)
    sch = tir.Schedule(func)
    i, j = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.split(i, [None, 1])
    sch.reorder(i0, j, i1)
    sch.annotate(i0, "keep", 1)  # not fusible: leaves j, i1 to the vectorize plan
    annotate_root(sch, vectorize=16)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    assert shape(loops_of(sch, "B")) == [(ForKind.SERIAL, 8), (ForKind.VECTORIZED, 16)]
    check(sch, func)


def test_inner_loop_wider_than_the_vector_extent_stays_serial(check):
    func = elementwise(8, 32)
    sch = tir.Schedule(func)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.annotate(i, "keep", 1)  # an annotated loop cannot be fused: no all-loops plan
    annotate_root(sch, vectorize=16)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    assert [lp.kind for lp in loops_of(sch, "B")] == [ForKind.SERIAL, ForKind.SERIAL]
    check(sch, func)


def test_reduction_loops_are_neither_parallel_nor_vectorized(matmul, check):
    func = matmul()
    sch = tir.Schedule(func)
    annotate_root(sch, parallel=64, vectorize=16, explicit=0)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    loops = loops_of(sch, "T_matmul_NN")
    # i * j = 192 >= 64; k is a reduction loop: nothing to vectorize; unroll 0: no pragma
    assert shape(loops) == [(ForKind.PARALLEL, 192), (ForKind.SERIAL, 8)]
    assert all(not lp.annotations for lp in loops)
    check(sch, func)


def test_softmax_every_child_block_rewritten(softmax, check):
    sch = tir.Schedule(softmax)
    annotate_root(sch, parallel=4, vectorize=16, explicit=16)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    for reduction in ("T_softmax_maxelem", "T_softmax_expsum"):
        loops = loops_of(sch, reduction)
        assert shape(loops) == [(ForKind.PARALLEL, 4), (ForKind.SERIAL, 16)]
        assert loops[0].annotations["pragma_auto_unroll_max_step"] == 16
    for spatial in ("T_softmax_exp", "T_softmax_norm"):
        loops = loops_of(sch, spatial)
        assert shape(loops) == [(ForKind.PARALLEL, 4), (ForKind.VECTORIZED, 16)]
        assert loops[0].annotations == {}
    check(sch, softmax)


def test_conv2d(conv2d, check):
    sch = tir.Schedule(conv2d)
    annotate_root(sch, parallel=8, vectorize=8, explicit=64)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    conv = loops_of(sch, "conv2d_nhwc")
    # nn * yy = 6 < 8, * xx = 36: three fused; the innermost loop is a reduction
    assert shape(conv)[0] == (ForKind.PARALLEL, 36)
    assert conv[0].annotations["pragma_auto_unroll_max_step"] == 64
    assert [lp.kind for lp in conv[1:]] == [ForKind.SERIAL] * 4
    pad = loops_of(sch, "PaddedInput")
    # (1, 8, 8, 4): data rows are 6 wide, so i1 and i2 are not contiguous together; i3 * i2
    # = 32 > 8: only i3 vectorized; i0 * i1 = 8 parallel
    assert shape(pad) == [(ForKind.PARALLEL, 8), (ForKind.SERIAL, 8), (ForKind.VECTORIZED, 4)]
    assert pad[0].annotations == {}
    check(sch, conv2d)


@pytest.mark.compiler
def test_compiled_results_match(matmul, softmax, check_build):
    func = matmul()
    sch = tiled_matmul(func)
    annotate_root(sch, parallel=8, vectorize=16, explicit=16)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    check_build(sch, func)
    sch = tir.Schedule(softmax)
    annotate_root(sch, parallel=4, vectorize=16, implicit=16)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    check_build(sch, softmax)


def test_shared_outer_loop_is_parallelised_once(check):
    a = te.placeholder((8, 16), "float32", "A")
    b = te.compute((8, 16), lambda i, j: a[i, j] * 2.0, name="B")
    c = te.compute((8, 16), lambda i, j: b[i, j] + 1.0, name="C")
    func = te.create_prim_func([a, c])
    sch = tir.Schedule(func)
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i)
    annotate_root(sch, parallel=4, vectorize=16)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    # "i" has two children: it alone is fused (renamed) and parallel; each inner j vectorized
    assert shape(loops_of(sch, "B")) == [(ForKind.PARALLEL, 8), (ForKind.VECTORIZED, 16)]
    assert shape(loops_of(sch, "C")) == [(ForKind.PARALLEL, 8), (ForKind.VECTORIZED, 16)]
    check(sch, func)


def test_loop_the_parallel_primitive_rejects_is_left_serial(check):
    # X: A[v + 1] = A[v] + 1 reads what another iteration writes: loop analysis calls the
    # loop data-parallel, the parallel primitive refuses it; the schedule is kept as is
    a = Buffer("A", (9,))
    i, v = Var("i"), Var("v")
    block = Block(
        (IterVar(v, Range(0, 8), IterType.DATA_PAR),),
        (BufferRegion(a, (Range(v, 1),)),),
        (BufferRegion(a, (Range(v + 1, 1),)),),
        "X",
        BufferStore(a, a[v] + 1.0, (v + 1,)),
    )
    loop = For(i, 0, 8, ForKind.SERIAL, BlockRealize((i,), true(), block))
    func = PrimFunc((a,), BlockRealize((), true(), Block((), (), (), "root", loop)))
    sch = tir.Schedule(func)
    annotate_root(sch, parallel=4)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    assert shape(loops_of(sch, "X")) == [(ForKind.SERIAL, 8)]
    check(sch, func)


def test_without_hints_nothing_changes(matmul):
    sch = tir.Schedule(matmul())
    sch.enter_postproc()
    mod, n = sch.mod, len(sch.trace.insts)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    assert sch.mod is mod and len(sch.trace.insts) == n


def test_malformed_hints_raise_before_any_change(matmul):
    sch = tir.Schedule(matmul())
    annotate_root(sch, explicit=16, implicit=16)
    mod, n = sch.mod, len(sch.trace.insts)
    with pytest.raises(ValueError, match="both 'meta_schedule.unroll_explicit' and"):
        RewriteParallelVectorizeUnroll().apply(sch)
    assert sch.mod is mod and len(sch.trace.insts) == n
    sch = tir.Schedule(matmul())
    annotate_root(sch, parallel="many")
    with pytest.raises(TypeError, match="'meta_schedule.parallel' must be an int, got 'many'"):
        RewriteParallelVectorizeUnroll().apply(sch)


@pytest.mark.parametrize("workload", ["conv", "depthwise", "matmul"])
def test_composed_access_offsets_are_those_of_the_substituted_indices(workload):
    """The row-major offset of each access, composed from the forms of the block's
    bindings, has the terms of the substituted minimums' offset (which it saves building
    and walking), on the blocks of sampled schedules of padded windows and a matmul."""
    import numpy as np

    from metaschedule.postproc import rewrite_parallel_vectorize_unroll as rpvu
    from metaschedule.space_generator import PostOrderApply
    from metaschedule.te import ops
    from metaschedule.tir.functor import substitute
    from metaschedule.tir.transform.affine import affine
    from metaschedule.tune_context import TuneContext

    x = te.placeholder((1, 8, 8, 16), "float32", "X")
    if workload == "conv":
        w = te.placeholder((3, 3, 16, 16), "float32", "W")
        func = te.create_prim_func([x, w, ops.conv2d_nhwc(x, w, stride=1, padding=1)])
    elif workload == "depthwise":
        k = te.placeholder((3, 3, 16), "float32", "K")
        func = te.create_prim_func([x, k, ops.depthwise_conv2d_nhwc(x, k, stride=1, padding=1)])
    else:
        a, b = te.placeholder((24, 20), "float32", "A"), te.placeholder((20, 36), "float32", "B")
        func = te.create_prim_func([a, b, te.ops.matmul(a, b)])
    ctx = TuneContext(func, target="llvm", space_generator=PostOrderApply(), rand_state=1)
    spaces = ctx.generate_design_space()
    rng = np.random.default_rng(0)
    composed = 0
    for seed in range(6):
        sch = tir.Schedule(ctx.mod, seed=int(rng.integers(2**31)), error_render_level="none")
        try:
            spaces[seed % len(spaces)].trace.apply_to_schedule(sch, remove_postproc=True)
        except tir.ScheduleError:
            continue
        for realize in sch.state.index("main").blocks.values():
            block = realize.block
            bindings = {iv.var: v for iv, v in zip(block.iter_vars, realize.iter_values)}
            for access in (*block.reads, *block.writes):
                form = rpvu._composed_offset(access, bindings, {})
                mins = tuple(substitute(r.min, bindings) for r in access.region)
                offset = rpvu._flat_offset(mins, access.buffer.shape)
                if form is None:
                    continue
                want = affine(offset)
                assert form.const == want.const
                assert {k: c for k, (c, _) in form.terms.items()} == {
                    k: c for k, (c, _) in want.terms.items()
                }
                composed += 1
    assert composed >= 20
