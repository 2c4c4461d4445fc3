"""The default postprocessors of "llvm", run the way search strategies run them."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaschedule import te, tir
from metaschedule.postproc import (
    DisallowDynamicLoop,
    Postproc,
    RewriteLayout,
    RewriteParallelVectorizeUnroll,
    RewriteReductionBlock,
    RewriteTensorize,
)
from metaschedule.search_strategy.base import TraceReplayer
from metaschedule.te import ops
from metaschedule.tir import ForKind
from metaschedule.tir.interpreter import interpret
from metaschedule.tir.structural import structural_equal


def _matmul_16x12x8():
    a = te.placeholder((16, 8), "float32", "A")
    b = te.placeholder((8, 12), "float32", "B")
    return te.create_prim_func([a, b, ops.matmul(a, b)])


_MATMUL = _matmul_16x12x8()
_RNG = np.random.default_rng(0)
_ARRAYS = [_RNG.standard_normal(p.static_shape()).astype("float32") for p in _MATMUL.params]
_EXPECTED = _ARRAYS[0] @ _ARRAYS[1]


def test_llvm_defaults_in_tvm_order():
    got = Postproc.create("llvm")
    assert [type(p) for p in got] == [
        DisallowDynamicLoop,
        RewriteParallelVectorizeUnroll,
        RewriteReductionBlock,
        RewriteLayout,
        RewriteTensorize,
    ]
    assert got[-1].vectorize_init_loop
    assert all(a is not b for a, b in zip(got, Postproc.create("llvm")))  # fresh each time
    assert [type(p.clone()) for p in got] == [type(p) for p in got]


def design_space(func, seed=0):
    """A matmul template: sampled tiles i0 j0 k0 i1 j1, and the root hints of the rule."""
    sch = tir.Schedule(func, seed=seed)
    block = sch.get_block("T_matmul_NN")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, 2, max_innermost_factor=8))
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, 2, max_innermost_factor=8))
    sch.reorder(i0, j0, k, i1, j1)
    root = sch.get_block("root")
    sch.annotate(root, "meta_schedule.parallel", 8)
    sch.annotate(root, "meta_schedule.vectorize", 8)
    unroll = sch.sample_categorical([0, 16, 64], [0.2, 0.4, 0.4])
    sch.annotate(root, "meta_schedule.unroll_explicit", unroll)
    return sch


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_replayed_samples_become_concrete_programs(matmul, check, seed):
    func = matmul(16, 12, 8)
    replay = TraceReplayer(tir.Schedule(func).mod, Postproc.create("llvm"))
    sch = replay(design_space(func).trace, seed)
    assert sch is not None, replay.summary()
    script = sch.mod.script()
    assert "meta_schedule." not in script and "T.init()" not in script
    assert "T.parallel(" in script and "T_matmul_NN_init" in script
    check(sch, func)
    # replaying without post-processing and post-processing again gives the same program
    again = TraceReplayer(func, Postproc.create("llvm"))(sch.trace, seed + 100)
    assert again is not None and structural_equal(again.mod, sch.mod)


@pytest.mark.compiler
def test_compiled_defaults(matmul, conv2d, check_build):
    func = matmul(16, 12, 8)
    sch = TraceReplayer(func, Postproc.create("llvm"))(design_space(func).trace, 3)
    check_build(sch, func)
    sch = tir.Schedule(conv2d)
    root = sch.get_block("root")
    sch.annotate(root, "meta_schedule.parallel", 16)
    sch.annotate(root, "meta_schedule.vectorize", 8)
    sch.annotate(root, "meta_schedule.unroll_implicit", 16)
    assert TraceReplayer(conv2d, Postproc.create("llvm")).apply_postprocs(sch)
    kinds = {sch.get(lp).kind for lp in sch.get_loops(sch.get_block("conv2d_nhwc_init"))}
    assert ForKind.PARALLEL in kinds
    check_build(sch, conv2d)


def test_a_rejecting_postprocessor_counts_as_a_failure(matmul):
    func = matmul()
    sch = tir.Schedule(func)
    _, j, k = sch.get_loops(sch.get_block("T_matmul_NN"))
    sch.fuse(j, k)
    replay = TraceReplayer(func, Postproc.create("llvm"))
    assert replay(sch.trace, 0) is None
    assert replay.failures == {"RewriteReductionBlock": 1}


@settings(max_examples=20, deadline=None)
@given(
    ti=st.sampled_from([1, 2, 4, 8]),
    tj=st.sampled_from([1, 3, 4, 6]),
    tk=st.sampled_from([1, 2, 8]),
    order=st.permutations(["k0", "i1", "j1", "k1"]),
    parallel=st.integers(1, 64),
    vectorize=st.integers(0, 32),
    unroll=st.sampled_from([None, ("explicit", 16), ("implicit", 64), ("explicit", 0)]),
)
def test_random_tilings_and_hints_keep_the_numbers(ti, tj, tk, order, parallel, vectorize, unroll):
    func = _MATMUL
    sch = tir.Schedule(func)
    block = sch.get_block("T_matmul_NN")
    i, j, k = sch.get_loops(block)
    loops = dict(zip(["i0", "i1"], sch.split(i, [None, ti])))
    loops.update(zip(["j0", "j1"], sch.split(j, [None, tj])))
    loops.update(zip(["k0", "k1"], sch.split(k, [None, tk])))
    sch.reorder(loops["i0"], loops["j0"], *(loops[name] for name in order))
    root = sch.get_block("root")
    sch.annotate(root, "meta_schedule.parallel", parallel)
    sch.annotate(root, "meta_schedule.vectorize", vectorize)
    if unroll is not None:
        sch.annotate(root, f"meta_schedule.unroll_{unroll[0]}", unroll[1])
    assert TraceReplayer(func, Postproc.create("llvm")).apply_postprocs(sch)
    assert "meta_schedule.parallel" not in sch.mod.script()
    assert sch.get(sch.get_block("T_matmul_NN")).init is None
    got = [a.copy() for a in _ARRAYS]
    interpret(sch.mod["main"], *got)
    np.testing.assert_allclose(got[-1], _EXPECTED, rtol=1e-5, atol=1e-5)
