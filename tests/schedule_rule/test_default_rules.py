"""The llvm default rules: the design spaces of real operators, and tuning with them."""

import json

import numpy as np
import pytest

import metaschedule as ms
from metaschedule.codegen.build import build
from metaschedule.mutator import Mutator
from metaschedule.schedule import Trace
from metaschedule.schedule_rule import (
    AddRFactor,
    ApplyCustomRule,
    AutoInline,
    MultiLevelTiling,
    MultiLevelTilingWithIntrin,
    PackPanel,
    ParallelizeVectorizeUnroll,
    RandomComputeLocation,
    ReuseType,
    ScheduleRule,
    WindowTiling,
)
from metaschedule.space_generator import PostOrderApply
from metaschedule.tir.structural import structural_equal
from metaschedule.tune_context import TuneContext


def llvm_spaces(ck, func, rand_state=0):
    return ck.spaces(func, ScheduleRule.create("llvm"), rand_state=rand_state)


def test_create_llvm_gives_tvms_default_list():
    """TVM's list, plus WindowTiling for pooling and PackPanel after the tiling (ours: see
    their modules), and the int8 auto-tensorization of TVM's VNNI list (inert on floats)."""
    rules = ScheduleRule.create("llvm")
    assert [type(r) for r in rules] == [
        ApplyCustomRule,
        AutoInline,
        WindowTiling,
        AddRFactor,
        MultiLevelTilingWithIntrin,
        MultiLevelTiling,
        PackPanel,
        ParallelizeVectorizeUnroll,
        RandomComputeLocation,
    ]
    inline, window, rfactor, with_intrin, mlt = rules[1:6]
    pvu = rules[7]
    assert with_intrin.intrin_name == [
        "dot_16x4_vnni",
        "dot_8x4_avxvnni",
        "dot_16x4_avx512_exact",
        "dot_8x4_avx2_exact",
        "dot_4x4_i8i8s32_sdot",
        "dot_4x4_u8u8u32_udot",
    ]
    assert with_intrin.reuse_write == ReuseType("may", [1, 2], "global")
    assert (window.row_tiles, window.max_window) == ([1, 2, 4], 64)
    assert (inline.into_producer, inline.into_consumer, inline.disallow_op) == (
        False,
        True,
        ["tir.exp"],
    )
    assert (rfactor.max_jobs_per_core, rfactor.max_innermost_factor) == (16, 64)
    assert (mlt.structure, mlt.max_innermost_factor) == ("SSRSRS", 64)
    assert mlt.reuse_write == ReuseType("may", [1, 2], "global")
    assert (pvu.max_vectorize_extent, pvu.unroll_max_steps) == (64, [0, 16, 64, 512])
    assert rules[0] is not ScheduleRule.create("llvm")[0]  # a fresh list each time
    assert [type(r) for r in ScheduleRule.create("cpu")] == [type(r) for r in rules]
    with pytest.raises(ValueError, match="llvm"):  # not built here: an error, not []
        ScheduleRule.create("cuda-tensorcore")


def test_post_order_apply_from_target_uses_them(wl):
    space = PostOrderApply(postprocs=[], mutator_probs={})
    ctx = TuneContext(wl.matmul(), target="llvm -num-cores=2", space_generator=space, rand_state=0)
    assert len(ctx.generate_design_space()) == 6  # 3 write-cache choices, B packed or not


@pytest.mark.parametrize(
    "name, count",
    [
        ("matmul", 6),  # no write cache, cache at level 1, at level 2; B packed or not
        ("conv2d", 3),  # the same, and the padding at a sampled location
        ("conv2d_relu", 3),  # bias inlined into relu; relu unmoved or at level 1 or 2
        ("softmax", 9),  # two reductions factored (outer, inner) or not
    ],
)
def test_spaces_of_real_operators_compute_the_same_numbers(ck, wl, name, count):
    func = {
        "matmul": lambda: wl.matmul(8, 4, 16),
        "conv2d": wl.conv2d,
        "conv2d_relu": lambda: wl.conv2d(relu=True),
        "softmax": wl.softmax,
    }[name]()
    spaces = llvm_spaces(ck, func)
    assert len(spaces) == count
    for sch in spaces:
        root = sch.get(sch.get_block("root")).annotations
        assert root["meta_schedule.parallel"] == 2 * 16
        assert root["meta_schedule.vectorize"] == 64
        assert root["meta_schedule.unroll_explicit"] in (0, 16, 64, 512)
    ck.assert_space_correct(func, spaces, replays=1 if name.startswith("conv") else 2)


def test_fused_conv_keeps_the_expected_blocks(ck, wl):
    for sch in llvm_spaces(ck, wl.conv2d(relu=True)):
        names = {i.attrs[0] for i in sch.trace.insts if i.kind.name == "GetBlock"}
        assert {"PaddedInput", "conv2d_nhwc", "T_add", "T_relu", "root"} <= names
        kinds = ck.kinds(sch)
        assert kinds.count("ComputeInline") == 1  # T_add
        assert kinds.count("SamplePerfectTile") == 7
        assert "SampleComputeLocation" in kinds  # the padding


@pytest.mark.parametrize("name", ["matmul", "conv2d_relu", "softmax"])
def test_every_space_has_several_points(ck, wl, name):
    func = {
        "matmul": lambda: wl.matmul(16, 16, 16),
        "conv2d_relu": lambda: wl.conv2d(True),
        "softmax": lambda: wl.softmax(4, 32),
    }[name]()
    for i, sch in enumerate(llvm_spaces(ck, func)):
        points = {ck.decisions(ck.replay(func, sch, seed)) for seed in range(6)}
        assert len(points) >= 3, (i, points)
    firsts = {ck.decisions(llvm_spaces(ck, func, rand_state=s)[0]) for s in range(3)}
    assert len(firsts) == 3


def test_default_mutators_find_decisions_to_mutate(ck, wl):
    func = wl.conv2d(relu=True)
    space = PostOrderApply(sch_rules="llvm", postprocs=[], mutator_probs="llvm")
    ctx = TuneContext(func, target="llvm -num-cores=2", space_generator=space, rand_state=0)
    spaces = ctx.generate_design_space()
    rng = np.random.default_rng(0)
    for mutator in space.mutator_probs:
        mutated = [mutator.apply(s.trace, rng) for s in spaces]
        assert any(m is not None for m in mutated), type(mutator).__name__
        trace = next(m for m in mutated if m is not None)
        sch = ms.tir.Schedule(func, seed=0)
        trace.apply_to_schedule(sch, remove_postproc=True)
        ck.assert_same_numbers(func, sch)
    assert isinstance(space.mutator_probs, dict) and all(
        isinstance(m, Mutator) for m in space.mutator_probs
    )


@pytest.mark.compiler
@pytest.mark.parametrize("name", ["matmul", "conv2d_relu"])
def test_spaces_build_and_run(ck, wl, name):
    func = wl.matmul(16, 16, 16) if name == "matmul" else wl.conv2d(relu=True)
    expected = ck.reference(func)
    for sch in llvm_spaces(ck, func)[:2]:
        arrays = ck.inputs(func)
        build(ck.replay(func, sch, seed=3).mod, "cpu")(*arrays)
        np.testing.assert_allclose(arrays[-1], expected, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------ end to end
@pytest.mark.slow
@pytest.mark.compiler
def test_tune_tir_with_the_default_space_beats_the_unscheduled_matmul(tmp_path, wl):
    from metaschedule.builder import LocalBuilder
    from metaschedule.runner import EvaluatorConfig, LocalRunner
    from metaschedule.search_strategy import EvolutionarySearch
    from metaschedule.tir.function import IRModule
    from metaschedule.tir_integration import compile_tir

    n = 128
    func = wl.matmul(n, n, n)
    config = EvaluatorConfig(number=3, repeat=3, min_repeat_ms=0)
    strategy = EvolutionarySearch(population_size=16, init_min_unmeasured=8, genetic_num_iters=1)
    with (
        LocalBuilder(max_workers=2, timeout_sec=120) as builder,
        LocalRunner(timeout_sec=30, evaluator_config=config) as runner,
    ):
        db = ms.tune_tir(
            func,
            "llvm",
            str(tmp_path),
            16,
            num_trials_per_iter=8,
            strategy=strategy,
            cost_model="random",
            builder=builder,
            runner=runner,
            seed=0,
        )
    records = db.get_all_tuning_records()
    assert len(records) >= 16  # the trials, then the final selection's re-measurements
    records = records[:16]
    assert sum(r.is_valid for r in records) >= 12
    # the candidates come from the multi-level tiling space
    assert all(any(i.kind.name == "SamplePerfectTile" for i in r.trace.insts) for r in records)
    assert len({tuple(map(str, r.trace.as_python())) for r in records}) == 16

    sch = compile_tir(db, func, "llvm")
    rng = np.random.default_rng(1)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    c = np.zeros((n, n), np.float32)
    build(sch.mod, "cpu")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)

    # measured the way the runner measures: the unscheduled function is much slower
    lib = build(func, "cpu")
    timer = lib.time_evaluator(lib.entry_name, number=3, repeat=3, min_repeat_ms=0)
    unscheduled = float(np.mean(timer(a, b, c).results))
    best = db.query_tuning_record(IRModule({"main": func}), "llvm")
    assert best.is_valid and best.mean_run_sec < unscheduled / 2


@pytest.mark.parametrize("name", ["conv2d_relu", "softmax"])
def test_space_traces_round_trip_through_json(ck, wl, name):
    func = wl.conv2d(relu=True) if name == "conv2d_relu" else wl.softmax()
    for sch in llvm_spaces(ck, func):
        trace = Trace.from_json(json.loads(json.dumps(sch.trace.as_json())))
        new = ms.tir.Schedule(func)
        trace.apply_to_schedule(new, remove_postproc=True)
        assert structural_equal(new.mod, sch.mod)
        assert ck.decisions(new) == ck.decisions(sch)
