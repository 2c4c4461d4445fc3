"""The GPU schedule rules: AutoBind, CrossThreadReduction, MultiLevelTiling's GPU form, and
the "cuda" default list."""

from __future__ import annotations

import numpy as np
import pytest

import metaschedule as ms
from metaschedule import te
from metaschedule.postproc import VerifyGPUCode
from metaschedule.schedule_rule import (
    AutoBind,
    AutoInline,
    CrossThreadReduction,
    MultiLevelTiling,
    ParallelizeVectorizeUnroll,
    ReuseType,
)
from metaschedule.te.ops.reduce import reduce
from metaschedule.tir import ForKind
from metaschedule.tir.interpreter import interpret
from metaschedule.tir.transform.cross_thread_reduction import has_cross_thread_reduction

TARGET = "cuda -arch=sm_80"


def _ctx(func, rules):
    space = ms.space_generator.PostOrderApply(sch_rules=rules, postprocs=[], mutator_probs={})
    return ms.TuneContext(func, target=TARGET, space_generator=space, rand_state=0)


def _bindings(sch, block_name):
    loops = sch.get_loops(sch.get_block(block_name))
    return [
        sch.get(lp).thread_binding for lp in loops if sch.get(lp).kind is ForKind.THREAD_BINDING
    ]


def _elementwise(n=64, m=100):
    a = te.placeholder((n, m), "float32", "A")
    return te.create_prim_func([a, te.compute((n, m), lambda i, j: a[i, j] * 2, name="B")])


def _row_sum(n=8, k=256):
    x = te.placeholder((n, k), "float32", "X")
    return te.create_prim_func([x, reduce(x, "sum", [1])])


def test_cuda_defaults_follow_tvm():
    rules = ms.ScheduleRule.create("cuda")
    kinds = [type(r).__name__ for r in rules]
    assert kinds == [
        "ApplyCustomRule",
        "MultiLevelTiling",
        "AutoInline",
        "CrossThreadReduction",
        "ParallelizeVectorizeUnroll",
        "AutoBind",
    ]
    mlt = rules[1]
    assert (mlt.structure, mlt.tile_binds) == (
        "SSSRRSRS",
        ["blockIdx.x", "vthread.x", "threadIdx.x"],
    )
    assert mlt.reuse_read == ReuseType("must", [4], "shared")
    assert mlt.reuse_write == ReuseType("must", [3], "local")
    assert mlt.vector_load_lens == [1, 2, 3, 4, 8, 16]
    assert rules[3].thread_extents == [4, 8, 16, 32, 64, 128, 256, 512]
    pvu = rules[4]
    assert (pvu.max_jobs_per_core, pvu.max_vectorize_extent) == (-1, -1)
    assert pvu.unroll_max_steps == [0, 16, 64, 512, 1024]
    assert rules[5].max_threadblocks == 256
    assert rules[5].thread_extents == [32, 64, 128, 256, 512, 1024]
    post = [type(p).__name__ for p in ms.Postproc.create("cuda")]
    assert post == [
        "DisallowDynamicLoop",
        "RewriteCooperativeFetch",
        "RewriteUnboundBlock",
        "RewriteParallelVectorizeUnroll",
        "RewriteReductionBlock",
        "VerifyGPUCode",
    ]
    muts = {type(m).__name__: p for m, p in ms.Mutator.create("cuda").items()}
    assert muts == {"MutateTileSize": 0.9, "MutateUnroll": 0.08, "MutateThreadBinding": 0.02}
    for kind in ("hexagon", "cuda-tensorcore"):
        with pytest.raises(ValueError, match="expected one of: cpu, cuda, llvm"):
            ms.ScheduleRule.create(kind)


def test_auto_bind_fuses_splits_and_samples_the_threads():
    ctx = _ctx(_elementwise(), [AutoBind(max_threadblocks=256)])
    (sch,) = ctx.generate_design_space()
    assert _bindings(sch, "B") == ["blockIdx.x", "threadIdx.x"]
    samples = [i for i in sch.trace.insts if i.kind.name == "SampleCategorical"]
    assert len(samples) == 1 and list(samples[0].attrs[0]) == [32, 64, 128, 256, 512, 1024]
    threads = sch.get(sch.get_loops(sch.get_block("B"))[-1]).extent.value
    assert threads in (32, 64, 128, 256, 512, 1024)
    a = np.random.default_rng(0).random((64, 100), dtype=np.float32)
    b = np.zeros_like(a)
    interpret(sch.mod, a, b)  # 6400 is not a multiple of most thread counts: a predicate
    np.testing.assert_array_equal(b, a * 2)


def test_auto_bind_limits_the_grid_and_skips_bound_blocks():
    rule = AutoBind(max_threadblocks=4, thread_extents=[32])
    ctx = _ctx(_elementwise(64, 100), [rule])
    (sch,) = ctx.generate_design_space()
    loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block("B"))]
    assert [lp.kind for lp in loops] == [
        ForKind.SERIAL,
        ForKind.THREAD_BINDING,
        ForKind.THREAD_BINDING,
    ]
    assert (loops[1].extent.value, loops[2].extent.value) == (4, 32)
    again = rule.apply(sch, sch.get_block("B"))[0]  # already bound: unchanged
    assert len(again.get_loops(again.get_block("B"))) == 3
    with pytest.raises(ValueError, match="max_threadblocks"):
        AutoBind(max_threadblocks=0)


def test_cross_thread_reduction_adds_a_thread_bound_space():
    ctx = _ctx(_row_sum(), [CrossThreadReduction([16, 64]), AutoBind()])
    spaces = ctx.generate_design_space()
    assert len(spaces) == 2
    shared = [s for s in spaces if has_cross_thread_reduction(s.mod["main"])]
    assert len(shared) == 1
    x = np.random.default_rng(1).random((8, 256), dtype=np.float32)
    for sch in spaces:
        out = np.zeros(8, np.float32)
        interpret(sch.mod, x, out)  # emulated: the tree in shared memory, barriers checked
        np.testing.assert_allclose(out, x.sum(1), rtol=1e-5)
    # short reductions (at most a warp) stay one thread per output, as in TVM
    short = _ctx(_row_sum(8, 16), [CrossThreadReduction([16])]).generate_design_space()
    assert len(short) == 1
    # without a cuda target the rule does nothing
    cpu = ms.TuneContext(
        _row_sum(),
        target="llvm -num-cores=2",
        space_generator=ms.space_generator.PostOrderApply(
            sch_rules=[CrossThreadReduction([16])], postprocs=[], mutator_probs={}
        ),
    )
    assert len(cpu.generate_design_space()) == 1


def test_cross_thread_reduction_fuses_into_the_consumer():
    x = te.placeholder((4, 64), "float32", "X")
    s = reduce(x, "sum", [1])
    y = te.compute((4, 64), lambda i, j: x[i, j] / s[i], name="Y")
    func = te.create_prim_func([x, y])
    ctx = _ctx(func, [CrossThreadReduction([32]), AutoBind()])
    fused = next(
        s for s in ctx.generate_design_space() if has_cross_thread_reduction(s.mod["main"])
    )
    # one kernel: the row's blockIdx loop holds both blocks; the sum lives in shared memory
    assert _bindings(fused, "T_reduce_sum") == ["blockIdx.x", "threadIdx.x"]
    assert _bindings(fused, "Y") == ["blockIdx.x", "threadIdx.x"]
    root = fused.mod["main"].body.block
    assert [b.scope for b in root.alloc_buffers] == ["shared"]
    data = np.random.default_rng(2).random((4, 64), dtype=np.float32) + 0.5
    out = np.zeros_like(data)
    interpret(fused.mod, data, out)
    np.testing.assert_allclose(out, data / data.sum(1, keepdims=True), rtol=1e-5)


def test_gpu_tiling_annotates_thread_bounds_that_verify_gpu_code_enforces():
    a = te.placeholder((64, 64), "float32", "A")
    b = te.placeholder((64, 64), "float32", "B")
    func = te.create_prim_func([a, b, ms.te.ops.matmul(a, b)])
    mlt = MultiLevelTiling(
        structure="SSSRRSRS",
        tile_binds=["blockIdx.x", "vthread.x", "threadIdx.x"],
        reuse_write=ReuseType("must", [3], "local"),
    )
    (sch,) = _ctx(func, [mlt]).generate_design_space()
    ann = sch.get(sch.get_block("T_matmul_NN")).annotations
    # 4096 outputs > two warps: at least a warp of threads, at most the target's limit
    assert ann["meta_schedule.thread_extent_low_inclusive"] == 32
    assert ann["meta_schedule.thread_extent_high_inclusive"] == 1024
    threads = next(
        sch.get(lp).extent.value
        for lp in sch.get_loops(sch.get_block("T_matmul_NN"))
        if sch.get(lp).thread_binding == "threadIdx.x"
    )
    assert VerifyGPUCode().apply(sch) == (32 <= threads <= 1024)
    sch.unannotate(sch.get_block("T_matmul_NN"), "meta_schedule.thread_extent_low_inclusive")
    sch.annotate(sch.get_block("T_matmul_NN"), "meta_schedule.thread_extent_low_inclusive", 2048)
    assert not VerifyGPUCode().apply(sch)


def test_shared_cache_under_a_thread_loop_holds_every_threads_tile():
    """compute_at of a shared cache relaxes over thread-bound loops (TVM's rule)."""
    a = te.placeholder((16, 16), "float32", "A")
    b = te.compute((16, 16), lambda i, j: a[i, j] + 1, name="B")
    sch = ms.tir.Schedule(te.create_prim_func([a, b]))
    blk = sch.get_block("B")
    i, j = sch.get_loops(blk)
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    shared = sch.cache_read(blk, 0, "shared")
    sch.compute_at(shared, j)
    local = sch.cache_read(blk, 0, "local")
    sch.compute_at(local, j)
    extents = lambda name: [sch.get(lp).extent.value for lp in sch.get_loops(sch.get_block(name))]  # noqa: E731
    assert extents("A_shared")[2:] == [16]  # the whole row the block's threads read
    assert extents("A_shared_local")[2:] == []  # only this thread's element


def test_rules_reject_bad_arguments():
    with pytest.raises(ValueError, match="thread_extents"):
        CrossThreadReduction([])
    with pytest.raises(ValueError, match="max_threads_per_block"):
        AutoBind(max_threads_per_block=0)
    assert "AutoBind(max_threadblocks=256" in repr(AutoBind())
    assert isinstance(AutoInline(True, True, True, False, False, False, None), AutoInline)
    assert ParallelizeVectorizeUnroll(-1, -1, [0, 16]).max_jobs_per_core == -1
