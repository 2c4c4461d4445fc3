"""MultiLevelTilingWithIntrin and tile_with_tensor_intrin: int8 products tiled around a
dot-product intrinsic, the intrinsic chosen by the target, tensorized after sampling,
integers equal to numpy (interpreter always; compiled where the host runs the ISA);
float workloads keep the design space they had."""

from __future__ import annotations

import json
import pickle
import re

import numpy as np
import pytest

import metaschedule as ms
from metaschedule import te, tir
from metaschedule.codegen import build
from metaschedule.codegen.c_intrin import usable_tensor_intrins
from metaschedule.codegen.isa import host_arch
from metaschedule.postproc import Postproc, RewriteReductionBlock, RewriteTensorize
from metaschedule.schedule import Trace
from metaschedule.schedule_rule import (
    MultiLevelTiling,
    MultiLevelTilingWithIntrin,
    ReuseType,
    ScheduleRule,
    tile_with_tensor_intrin,
)
from metaschedule.schedule_rule.tile_with_tensor_intrin import find_intrin_tiling
from metaschedule.search_strategy.base import TraceReplayer
from metaschedule.target import Target
from metaschedule.te import ops
from metaschedule.tir.interpreter import interpret
from metaschedule.tune_context import TuneContext

AUTO = "meta_schedule.auto_tensorize"
HOST = "llvm -num-cores=2"
#: a CPU per x86 intrinsic
BY_CPU = {
    "icelake-server": "dot_16x4_vnni",
    "skylake-avx512": "dot_16x4_avx512",
    "alderlake": "dot_8x4_avxvnni",
    "haswell": "dot_8x4_avx2",
}
SATURATING = ("dot_16x4_avx512", "dot_8x4_avx2")  # exact for activations below 128
#: the one create("llvm") picks there: only an exact one (scheduling never changes results)
DEFAULT_BY_CPU = {cpu: (f"{i}_exact" if i in SATURATING else i) for cpu, i in BY_CPU.items()}


def rules_with(intrin: str) -> list:
    """create("llvm")'s rules with the tiling for ``intrin`` named (as a user opts in to a
    saturating one)."""
    return [
        MultiLevelTilingWithIntrin(intrin, reuse_write=r.reuse_write)
        if isinstance(r, MultiLevelTilingWithIntrin)
        else r
        for r in ScheduleRule.create("llvm")
    ]


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


def int8_dense(m=32, n=64, k=64, a_dtype="uint8", w_dtype="int8"):
    a = te.placeholder((m, k), a_dtype, name="A")
    w = te.placeholder((n, k), w_dtype, name="W")
    return te.create_prim_func([a, w, ops.quantized_dense(a, w)])


def int8_matmul(m=32, n=64, k=64):
    a = te.placeholder((m, k), "uint8", name="A")
    b = te.placeholder((k, n), "int8", name="B")
    return te.create_prim_func([a, b, ops.quantized_matmul(a, b)])


def operands(func, seed=0, a_high=256):
    """Inputs over the dtypes' ranges (activations below ``a_high``), a zero output and
    numpy's int32 result (``func`` is a dense ``[n, k]`` or matmul ``[k, n]`` weight)."""
    rng = np.random.default_rng(seed)
    a_buf, w_buf, c_buf = func.params
    a = rng.integers(0, a_high, a_buf.static_shape()).astype("uint8")
    w = rng.integers(-128, 128, w_buf.static_shape()).astype("int8")
    wt = w.astype(np.int64).T if w_buf.name == "W" else w.astype(np.int64)
    want = (a.astype(np.int64) @ wt).astype(np.int32)
    return a, w, np.zeros(c_buf.static_shape(), np.int32), want


def spaces(func, rules, target=HOST, postprocs=()):
    space = ms.space_generator.PostOrderApply(
        sch_rules=list(rules), postprocs=list(postprocs), mutator_probs={}
    )
    ctx = TuneContext(func, target=target, space_generator=space, rand_state=0)
    return ctx, ctx.generate_design_space()


def finished(ctx, sch, seed=1, postprocs=None):
    """A point of the design space ``sch``, post-processed as the search does."""
    replay = TraceReplayer(ctx.mod, postprocs or Postproc.create("llvm"))
    out = replay(Trace(sch.trace.insts, {}), seed)
    assert out is not None
    return out


def annotated(sch) -> list[str]:
    found = []
    tir.functor.post_order_visit(
        sch.mod["main"].body,
        lambda n: (
            found.append(n.annotations[AUTO])
            if isinstance(n, tir.Block) and AUTO in n.annotations
            else None
        ),
    )
    return found


def run_interpreted(sch, func, a, w, c):
    args = ms.pack_weights(sch, [a, w, c])
    interpret(sch.mod["main"], *args)
    return args[-1]


# ----------------------------------------------------------------------------- the rule


def test_public_names_and_defaults():
    rule = MultiLevelTilingWithIntrin("dot_16x4_vnni")
    assert isinstance(rule, MultiLevelTiling)
    assert (rule.intrin_name, rule.structure, rule.max_innermost_factor) == (
        "dot_16x4_vnni",
        "SSRSRS",
        64,
    )
    assert (rule.tile_binds, rule.vector_load_lens) == ([], [])
    assert rule.reuse_read == rule.reuse_write == ReuseType("no")
    assert ms.schedule_rule.MultiLevelTilingWithIntrin is MultiLevelTilingWithIntrin
    assert "dot_16x4_vnni" in repr(rule)
    copy = pickle.loads(pickle.dumps(rule))
    assert copy.intrin_name == "dot_16x4_vnni" and type(rule.clone()) is type(rule)
    with pytest.raises(ValueError, match="no tensor intrinsic named nope; registered: .*dot_"):
        MultiLevelTilingWithIntrin("nope")
    with pytest.raises(TypeError, match="intrin_name"):
        MultiLevelTilingWithIntrin(3)  # type: ignore[arg-type]


def test_tile_with_tensor_intrin_splits_and_moves_the_intrinsics_loops_innermost():
    func = int8_dense()
    sch = tir.Schedule(func)
    block = sch.get_block("T_qdense")
    loop = tile_with_tensor_intrin(sch, block, "dot_16x4_vnni")
    assert loop is not None
    assert [sch.get(lp).extent.value for lp in sch.get_loops(block)] == [32, 4, 16, 16, 4]
    assert sch.get(loop).extent.value == 16  # the first of the intrinsic's loops
    # the schedule is then one decompose_reduction away from tensorize
    sch.decompose_reduction(block, sch.get_loops(block)[2])
    sch.tensorize(loop, "dot_16x4_vnni")
    a, w, c, want = operands(func)
    interpret(sch.mod["main"], a, w, c)
    np.testing.assert_array_equal(c, want)


def test_a_crosswise_operand_is_copied_into_packed_tiles():
    """quantized_matmul reads B[k, j]: the 4 k of a row are n apart, which the
    intrinsic cannot take; B is copied to B[j // 16, k // 4, j % 16, k % 4]."""
    func = int8_matmul()
    sch = tir.Schedule(func)
    block = sch.get_block("T_qmatmul")
    plan = find_intrin_tiling(sch, block, "dot_16x4_vnni")
    assert plan is not None and plan.relayouts == ((1, (1, 0), (16, 4)),)
    assert tile_with_tensor_intrin(sch, block, "dot_16x4_vnni") is not None
    cache = sch.get(sch.get_block("B_global"))
    assert cache.writes[0].buffer.static_shape() == (4, 16, 16, 4)


@pytest.mark.parametrize(
    "func, intrin",
    [
        (int8_dense(a_dtype="int8"), "dot_16x4_vnni"),  # s8 x s8: VNNI takes u8 x s8
        (int8_dense(n=40), "dot_16x4_vnni"),  # 40 outputs: not a multiple of 16
        (int8_dense(k=62), "dot_16x4_vnni"),  # 62 products: not a multiple of 4
        (int8_dense(a_dtype="int8"), "dot_4x4_i8i8s32_sdot"),  # fits (contrast)
    ],
    ids=["dtypes", "lanes", "reduce", "sdot"],
)
def test_blocks_the_intrinsic_does_not_fit_are_left_alone(func, intrin):
    sch = tir.Schedule(func)
    block = sch.get_block("T_qdense")
    before = sch.mod
    got = tile_with_tensor_intrin(sch, block, intrin)
    if intrin.endswith("sdot"):
        assert got is not None
    else:
        assert got is None and sch.mod is before


def test_design_space_of_an_int8_dense_holds_a_tensorized_block():
    func = int8_dense()
    rule = MultiLevelTilingWithIntrin(
        "dot_16x4_vnni", reuse_write=ReuseType("may", [1, 2], "global")
    )
    ctx, found = spaces(func, [rule])
    assert len(found) == 3  # no write cache, or one at tile level 1 or 2
    a, w, c, want = operands(func)
    for sch in found:
        assert annotated(sch) == ["dot_16x4_vnni"]
        loops = sch.get_loops(sch.get_block("T_qdense"))
        assert [sch.get(lp).extent.value for lp in loops[-2:]] == [16, 4]
        assert len(loops) == 4 + 4 + 2 + 2  # i, j (4 tiles), k (2) tiled "SSRSRS", then 16 x 4
        post = finished(ctx, sch, postprocs=[RewriteReductionBlock(), RewriteTensorize()])
        assert "T.ms_dot_16x4_vnni(" in post.mod.script() and annotated(post) == []
        np.testing.assert_array_equal(run_interpreted(post, func, a, w, c.copy()), want)


def test_the_trace_replays_through_json():
    func = int8_matmul()
    ctx, found = spaces(func, ScheduleRule.create("llvm"))
    post = finished(ctx, found[0])
    trace = Trace.from_json(json.loads(json.dumps(post.trace.as_json())))
    fresh = tir.Schedule(func)
    trace.apply_to_schedule(fresh, remove_postproc=False)
    assert tir.structural_equal(fresh.mod, post.mod)
    kinds = [i.kind.name for i in trace.insts]
    assert kinds.index("EnterPostproc") < kinds.index("Tensorize")


# ----------------------------------------------------------------------------- the defaults


@pytest.mark.parametrize("cpu", sorted(BY_CPU))
def test_create_llvm_picks_the_exact_intrinsic_the_target_runs(cpu):
    target = f"llvm -mcpu={cpu} -num-cores=2"
    assert BY_CPU[cpu] in usable_tensor_intrins(target)
    expected = DEFAULT_BY_CPU[cpu]
    _, found = spaces(int8_dense(), ScheduleRule.create("llvm"), target=target)
    assert found and all(annotated(sch) == [expected] for sch in found)
    # a saturating one is used where it is named
    _, found = spaces(int8_dense(), rules_with(BY_CPU[cpu]), target=target)
    assert found and all(annotated(sch) == [BY_CPU[cpu]] for sch in found)


def test_create_llvm_on_aarch64_uses_sdot_for_s8_and_nothing_without_dotprod():
    func = int8_dense(a_dtype="int8")
    n1 = "llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1 -num-cores=2"
    _, found = spaces(func, ScheduleRule.create("llvm"), target=n1)
    assert all(annotated(sch) == ["dot_4x4_i8i8s32_sdot"] for sch in found)
    plain = "llvm -mtriple=aarch64-linux-gnu -num-cores=2"
    _, found = spaces(func, ScheduleRule.create("llvm"), target=plain)
    assert all(annotated(sch) == [] for sch in found)


def test_a_target_without_int8_dot_products_gets_plain_tiling():
    target = "llvm -mcpu=x86-64 -num-cores=2"  # SSE2 only
    assert not usable_tensor_intrins(target)
    _, found = spaces(int8_dense(), ScheduleRule.create("llvm"), target=target)
    assert found and all(annotated(sch) == [] for sch in found)
    assert all("meta_schedule.tiling_structure" in sch.mod.script() for sch in found)


def test_without_a_context_the_list_form_does_nothing():
    rule = MultiLevelTilingWithIntrin(["dot_16x4_vnni", "dot_8x4_avx2"])
    sch = tir.Schedule(int8_dense())
    assert rule.apply(sch, sch.get_block("T_qdense")) == [sch]
    assert annotated(sch) == []


@pytest.mark.parametrize("target", [HOST, "llvm -mcpu=haswell -num-cores=2"])
def test_a_float_matmuls_design_space_is_unchanged(target):
    a = te.placeholder((64, 64), "float32", "A")
    b = te.placeholder((64, 64), "float32", "B")
    func = te.create_prim_func([a, b, ops.matmul(a, b)])
    with_intrin = ScheduleRule.create("llvm")
    without = [r for r in with_intrin if not isinstance(r, MultiLevelTilingWithIntrin)]
    _, got = spaces(func, with_intrin, target=target)
    _, want = spaces(func, without, target=target)
    assert len(got) == len(want) == 6
    for g, w in zip(got, want):
        assert tir.structural_equal(g.mod, w.mod)
        assert g.trace.as_python() == w.trace.as_python()
        assert g.trace.decisions.values() and list(g.trace.decisions.values()) == list(
            w.trace.decisions.values()
        )


# ----------------------------------------------------------------------------- compiled


def _runnable(intrin: str) -> None:
    if host_arch() != "x86_64" or intrin not in usable_tensor_intrins(Target(HOST)):
        pytest.skip(f"the host cannot run {intrin}")


@pytest.mark.compiler
@pytest.mark.parametrize("cpu", ["icelake-server", "skylake-avx512", "haswell"])
@pytest.mark.parametrize("make", [int8_dense, int8_matmul], ids=["dense", "matmul"])
def test_built_kernels_equal_numpy(cpu, make):
    intrin = BY_CPU[cpu]
    _runnable(intrin)
    target = f"llvm -mcpu={cpu} -num-cores=2"
    func = make()
    ctx, found = spaces(func, rules_with(intrin), target=target)
    a, w, c, want = operands(func, seed=2, a_high=128 if intrin in SATURATING else 256)
    for i, sch in enumerate(found):
        post = finished(ctx, sch, seed=i)
        lib = build(post.mod, target)
        assert re.search(rf"ms_{intrin}(_acc)?\(", lib.get_source())  # _acc: in registers
        args = ms.pack_weights(post, [a, w, c.copy()])
        lib(*args)
        np.testing.assert_array_equal(args[-1], want)


@pytest.mark.slow
@pytest.mark.compiler
@pytest.mark.parametrize("cpu", [None, "haswell"], ids=["host", "haswell"])
def test_tune_tir_tensorizes_an_int8_matmul(tmp_path, cpu):
    from metaschedule.builder import LocalBuilder
    from metaschedule.runner import EvaluatorConfig, LocalRunner
    from metaschedule.search_strategy import EvolutionarySearch
    from metaschedule.tir_integration import compile_tir

    target = Target(HOST if cpu is None else f"llvm -mcpu={cpu} -num-cores=2")
    usable = usable_tensor_intrins(target)
    intrin = next((n for n in DEFAULT_BY_CPU.values() if n in usable), None)
    if intrin is None:
        pytest.skip("the host has no x86 int8 dot product")
    _runnable(intrin)
    func = int8_matmul(32, 64, 64)
    strategy = EvolutionarySearch(population_size=8, init_min_unmeasured=4, genetic_num_iters=1)
    config = EvaluatorConfig(number=2, repeat=1, min_repeat_ms=0)
    with (
        LocalBuilder(max_workers=2, timeout_sec=120) as builder,
        LocalRunner(timeout_sec=30, evaluator_config=config) as runner,
    ):
        db = ms.tune_tir(
            func,
            target,
            str(tmp_path),
            4,
            num_trials_per_iter=4,
            strategy=strategy,
            cost_model="random",
            builder=builder,
            runner=runner,
            seed=0,
            final_selection_top_k=1,
        )
    assert sum(r.is_valid for r in db.get_all_tuning_records()) >= 1
    sch = compile_tir(db, func, target)
    lib = build(sch.mod, target)
    assert re.search(rf"ms_{intrin}(_acc)?\(", lib.get_source())
    a, w, c, want = operands(func, seed=4)  # full-range activations: the default is exact
    args = ms.pack_weights(sch, [a, w, c])
    lib(*args)
    np.testing.assert_array_equal(args[-1], want)


def test_every_sampled_int8_conv_is_tensorized_its_padding_a_stage_of_its_own():
    """The padding of an int8 convolution is never inlined into (or computed inside) the
    block the intrinsic replaces: every sample of the default space is tensorized."""
    x = te.placeholder((1, 8, 8, 16), "uint8", name="X")
    w = te.placeholder((3, 3, 16, 32), "int8", name="W")
    func = te.create_prim_func([x, w, ops.quantized_conv2d_nhwc(x, w, padding=1)])
    target = "llvm -num-cores=2 -mcpu=icelake-server"
    ctx = TuneContext(func, target=target, space_generator="post-order-apply", rand_state=0)
    replay = TraceReplayer(ctx.mod, Postproc.create("llvm"))
    for space in ctx.generate_design_space():  # three write-cache choices
        for seed in range(30):  # without the rule: 12 of these 90 were not tensorized
            post = replay(Trace(space.trace.insts, {}), seed)
            assert post is not None
            assert "T.ms_dot_16x4_vnni(" in post.mod.script(), seed
