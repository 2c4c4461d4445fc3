"""tune_relax starts each task from its default schedule and from the best traces of its
sibling tasks (WarmStart), and the report shows the model's estimated latency over time."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import metaschedule as ms
from metaschedule import relax_integration as ri
from metaschedule.report import load_run
from metaschedule.report.model_latency import LatencyPoint, model_latency_series
from metaschedule.schedule import Schedule
from metaschedule.search_strategy.base import TraceReplayer, trace_key
from metaschedule.task_scheduler import WarmStart
from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner
from metaschedule.testing.workloads import matmul_chain_model
from metaschedule.tir.structural import structural_equal
from metaschedule.trace_apply import fit_tile, schedule_using_anchor_trace


def chain_model() -> ms.graph.Function:
    """The two-task matmul chain of 3 calls (``testing.workloads.matmul_chain_model``)."""
    return matmul_chain_model(3)


def tune(work_dir, trials=16, **kw):
    """tune_relax on the chain model without a compiler (deterministic dummy times)."""
    args = {
        "max_trials_global": trials,
        "num_trials_per_iter": 4,
        "builder": DummyBuilder(),
        "runner": DummyRunner(),
        "database": "memory",
        "cost_model": "random",
        "strategy": "replay-trace",
        "seed": 0,
        "final_selection_top_k": 0,
    }
    args.update(kw)
    return ri.tune_relax(chain_model(), None, "llvm", str(work_dir), **args)


def records_of(db, mod):
    """The records of workload ``mod``, in commit order."""
    return [r for r in db.get_all_tuning_records() if structural_equal(r.workload.mod, mod)]


def context(task):
    ctx = ms.TuneContext(task.mod, target=task.target, space_generator="post-order-apply")
    ctx.generate_design_space()
    return ctx


@pytest.mark.parametrize("strategy", ["replay-trace", "evolutionary"])
def test_the_default_schedule_is_in_each_task_s_first_batch(tmp_path, strategy):
    if strategy == "evolutionary":
        strategy = ms.search_strategy.EvolutionarySearch(
            population_size=16, init_min_unmeasured=2, genetic_num_iters=1
        )
    db = tune(tmp_path, strategy=strategy, early_stopping_rounds=None)
    for task in ri.extract_tasks(chain_model(), "llvm"):
        default = ri.default_start(context(task), None)[0]
        first = records_of(db, task.mod)[:4]
        replayed = []
        for record in first:
            sch = Schedule(task.mod)
            record.trace.apply_to_schedule(sch, remove_postproc=False)
            replayed.append(sch.mod)
        assert any(structural_equal(m, default.mod) for m in replayed), task.task_name


def test_without_warm_start_the_default_is_not_measured(tmp_path):
    db = tune(tmp_path, warm_start=False, early_stopping_rounds=None)
    for task in ri.extract_tasks(chain_model(), "llvm"):
        default = ri.default_start(context(task), None)[0]
        for record in records_of(db, task.mod):
            sch = Schedule(task.mod)
            record.trace.apply_to_schedule(sch, remove_postproc=False)
            assert not structural_equal(sch.mod, default.mod), task.task_name


def test_a_sibling_s_best_trace_is_tried_with_its_tiles_fitted(tmp_path, caplog):
    """The 4x16x32 matmul gets the best trace of the 4x16x16 one (and back), its tile
    decisions fitted to the other shape; the schedule so made is a record of it."""
    with caplog.at_level(logging.INFO, logger="metaschedule"):
        db = tune(tmp_path, trials=24, early_stopping_rounds=None)
    heavy, light = ri.extract_tasks(chain_model(), "llvm")
    assert any("best trace of sibling task #0" in r.getMessage() for r in caplog.records)
    ctx = context(light)
    replayer = TraceReplayer(light.mod, ctx.space_generator.postprocs)
    expected = set()
    for record in records_of(db, heavy.mod):
        sch = Schedule(light.mod)
        try:
            schedule_using_anchor_trace(sch, record.trace, light.target, adapt_decisions=True)
        except ValueError:
            continue
        replayed = replayer(sch.trace, 0)
        expected.add(trace_key((replayed or sch).trace))
    measured = {trace_key(r.trace) for r in records_of(db, light.mod)}
    assert expected & measured


def test_fit_tile_keeps_inner_factors_that_divide():
    assert fit_tile([2, 1, 1, 8], 32) == [4, 1, 1, 8]
    assert fit_tile([4, 2, 8], 56, max_innermost=16) == [7, 1, 8]
    assert fit_tile([1, 64], 48, max_innermost=16) == [3, 16]
    for factors, extent in (([3, 5, 7], 60), ([1, 1, 1, 1], 17), ([64, 2], 1)):
        assert int(np.prod(fit_tile(factors, extent))) == extent


def test_an_anchor_trace_that_does_not_fit_fails_without_adaptation():
    heavy, light = ri.extract_tasks(chain_model(), "llvm")
    ctx = context(heavy)
    replayer = TraceReplayer(heavy.mod, ctx.space_generator.postprocs)
    traces = [replayer(s.trace, 0) for s in ctx.space_generator.generate_design_space(heavy.mod)]
    trace = next(
        t.trace
        for t in traces
        if t is not None and any(i.kind.name == "SamplePerfectTile" for i in t.trace.insts)
    )
    with pytest.raises(ValueError, match="perfect tiling"):
        schedule_using_anchor_trace(Schedule(light.mod), trace, light.target)
    schedule_using_anchor_trace(Schedule(light.mod), trace, light.target, adapt_decisions=True)


def test_warm_start_arguments_are_checked():
    with pytest.raises(TypeError, match="initial_schedules"):
        WarmStart("default")
    with pytest.raises(ValueError, match="max_share"):
        WarmStart(max_share=0)


def test_a_schedule_of_another_function_is_skipped_with_a_reason(tmp_path, caplog):
    """An initial schedule of another function than the workload (as a default schedule
    whose weights were packed before scheduling would be) is no trace of the workload:
    skipped, and the task's log says why."""
    from metaschedule import te
    from metaschedule.te import ops

    def other_function(ctx):
        a = te.placeholder((2, 2), "float32", "A")
        return [Schedule(te.create_prim_func([a, ops.relu(a)]))]

    scheduler = ms.TaskScheduler.create("round-robin", warm_start=WarmStart(other_function))
    with caplog.at_level(logging.INFO, logger="metaschedule"):
        tune(tmp_path, trials=8, task_scheduler=scheduler)
    assert any("not a trace of the workload" in r.getMessage() for r in caplog.records)


def test_the_model_latency_series_counts_calls_and_defaults():
    log = [
        {"run": 100.0, "time": 110.0, "task_id": 0, "shash": "a", "weight": 3, "latencies": [2.0]},
        {"run": 100.0, "time": 120.0, "task_id": 1, "shash": "b", "weight": 1, "latencies": [None]},
        {"run": 100.0, "time": 130.0, "task_id": 1, "shash": "b", "weight": 1, "latencies": [5.0]},
        {"run": 500.0, "time": 505.0, "task_id": 0, "shash": "a", "weight": 3, "latencies": [1.0]},
    ]
    assert model_latency_series(log) == [
        LatencyPoint(30.0, 3, 3 * 2.0 + 5.0),
        LatencyPoint(35.0, 4, 3 * 1.0 + 5.0),  # the second run's 5 s follow the first's 30
    ]
    series = model_latency_series(log, {"a": 4.0, "b": 4.0})
    assert series[0] == LatencyPoint(0.0, 0, 3 * 4.0 + 4.0)  # untuned: the defaults
    assert series[-1].latency_sec == 3 * 1.0 + 4.0  # the default beats b's tuned 5 s


def test_the_report_shows_model_latency_against_tuning_time(tmp_path):
    pytest.importorskip("matplotlib")
    work = tmp_path / "work"
    tune(work, database="json")
    data = load_run(str(work))
    points = model_latency_series(data.log, data.default_times)
    assert points and points[0].wall_sec == 0.0 and points[0].trials == 0  # the defaults
    assert points[-1].trials == 16 and points[-1].latency_sec <= points[0].latency_sec
    out = tmp_path / "report.html"
    pngs = ms.report.write_report(str(work), str(out))
    page = out.read_text()
    assert "The model" in page and "est. model latency (ms)" in page
    assert any(p.endswith("_model.png") and os.path.getsize(p) > 0 for p in pngs)


@pytest.mark.compiler
def test_warm_start_schedules_build_and_run(tmp_path):
    """The default schedule's trace and the fitted sibling traces are valid programs: the
    records they leave measured without an error."""
    config = ms.runner.EvaluatorConfig(number=1, repeat=1, min_repeat_ms=0)
    with (
        ms.builder.LocalBuilder(max_workers=2, timeout_sec=120) as builder,
        ms.runner.LocalRunner(timeout_sec=30, evaluator_config=config) as runner,
    ):
        db = tune(tmp_path, trials=12, builder=builder, runner=runner)
    heavy, light = ri.extract_tasks(chain_model(), "llvm")
    for task in (heavy, light):
        default = ri.default_start(context(task), None)[0]
        records = records_of(db, task.mod)
        assert records and all(r.is_valid for r in records), task.task_name
        first = []
        for record in records[:4]:
            sch = Schedule(task.mod)
            record.trace.apply_to_schedule(sch, remove_postproc=False)
            first.append(sch.mod)
        assert any(structural_equal(m, default.mod) for m in first), task.task_name


def test_a_conv_default_that_packs_its_weight_is_skipped_with_a_reason(tmp_path, caplog):
    """The default schedule of a convolution packs its weight by rewriting the function,
    which no trace holds: the task starts without it, and its log says why."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((16, 8, 3, 3)).astype("float32"), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 8, 8])],
        [w],
    )
    f = ms.graph.from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    with caplog.at_level(logging.INFO, logger="metaschedule"):
        ri.tune_relax(
            f,
            None,
            "llvm",
            str(tmp_path),
            max_trials_global=8,
            num_trials_per_iter=4,
            builder=DummyBuilder(),
            runner=DummyRunner(),
            database="memory",
            cost_model="random",
            strategy="replay-trace",
            final_selection_top_k=0,
        )
    skipped = [
        r.getMessage() for r in caplog.records if "not a trace of the workload" in r.getMessage()
    ]
    assert skipped and "convolution" in skipped[0]
