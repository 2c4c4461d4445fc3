"""RewriteReductionBlock: every reduction init decomposed at the right loop."""

import pytest

from metaschedule import tir
from metaschedule.postproc import RewriteReductionBlock
from metaschedule.tir import ForKind


def loop_names(sch, block):
    return [sch.get(lp).loop_var.name for lp in sch.get_loops(sch.get_block(block))]


def block_names(sch):
    return [r.block.name_hint for r in sch.state.child_block_realizes(sch.mod["main"].body)]


def test_untiled_matmul_init_before_k(matmul, check):
    func = matmul()
    sch = tir.Schedule(func)
    sch.enter_postproc()
    assert RewriteReductionBlock().apply(sch)
    assert sch.get(sch.get_block("T_matmul_NN")).init is None
    # k is the decompose point: the init goes inside j, right before k (no loop copied)
    assert loop_names(sch, "T_matmul_NN_init") == ["i", "j"]
    assert loop_names(sch, "T_matmul_NN") == ["i", "j", "k"]
    j = sch.get(sch.get_loops(sch.get_block("T_matmul_NN"))[1])
    assert [type(s).__name__ for s in j.body.seq] == ["BlockRealize", "For"]
    check(sch, func)
    names = [i.kind.name for i in sch.trace.insts]
    assert names[names.index("EnterPostproc") + 1 :][:3] == [
        "GetBlock",
        "GetLoops",
        "DecomposeReduction",
    ]


def test_tiled_matmul_init_before_the_outer_reduction_loop(matmul, check):
    func = matmul(16, 12, 8)
    sch = tir.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("T_matmul_NN"))
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 4])
    k0, k1 = sch.split(k, [None, 2])
    sch.reorder(i0, j0, k0, i1, k1, j1)
    sch.parallel(i0)
    sch.vectorize(j1)
    sch.enter_postproc()
    assert RewriteReductionBlock().apply(sch)
    assert loop_names(sch, "T_matmul_NN_init") == ["i_0", "j_0", "i_1_init", "j_1_init"]
    init_loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block("T_matmul_NN_init"))]
    # the copied loops keep their kinds: the init is vectorized too
    assert [lp.kind for lp in init_loops] == [
        ForKind.PARALLEL,
        ForKind.SERIAL,
        ForKind.SERIAL,
        ForKind.VECTORIZED,
    ]
    check(sch, func)


def test_softmax_both_reductions(softmax, check):
    sch = tir.Schedule(softmax)
    sch.enter_postproc()
    assert RewriteReductionBlock().apply(sch)
    assert block_names(sch) == [
        "T_softmax_maxelem_init",
        "T_softmax_maxelem",
        "T_softmax_exp",
        "T_softmax_expsum_init",
        "T_softmax_expsum",
        "T_softmax_norm",
    ]
    check(sch, softmax)


def test_conv2d(conv2d, check):
    sch = tir.Schedule(conv2d)
    sch.enter_postproc()
    assert RewriteReductionBlock().apply(sch)
    assert loop_names(sch, "conv2d_nhwc_init") == ["nn", "yy", "xx", "ff"]
    assert sch.get(sch.get_block("conv2d_nhwc")).init is None
    check(sch, conv2d)


@pytest.mark.compiler
def test_compiled_conv2d(conv2d, check_build):
    sch = tir.Schedule(conv2d)
    ff = sch.get_loops(sch.get_block("conv2d_nhwc"))[3]
    sch.reorder(*sch.get_loops(sch.get_block("conv2d_nhwc"))[4:], ff)
    sch.vectorize(ff)
    sch.enter_postproc()
    assert RewriteReductionBlock().apply(sch)
    check_build(sch, conv2d)


def test_cross_thread_reduction_keeps_its_init(matmul):
    sch = tir.Schedule(matmul())
    _, _, k = sch.get_loops(sch.get_block("T_matmul_NN"))
    sch.bind(k, "threadIdx.x")
    sch.enter_postproc()
    mod = sch.mod
    assert RewriteReductionBlock().apply(sch)
    assert sch.mod is mod


def test_rejected_decomposition_returns_false(matmul):
    sch = tir.Schedule(matmul())
    _, j, k = sch.get_loops(sch.get_block("T_matmul_NN"))
    sch.fuse(j, k)  # feeds both a data-parallel and a reduction iter var
    sch.enter_postproc()
    mod = sch.mod
    assert RewriteReductionBlock().apply(sch) is False
    assert sch.mod is mod


def test_nothing_to_do(matmul):
    sch = tir.Schedule(matmul())
    sch.enter_postproc()
    assert RewriteReductionBlock().apply(sch)
    n = len(sch.trace.insts)
    assert RewriteReductionBlock().apply(sch)  # already decomposed: no init left
    assert len(sch.trace.insts) == n
