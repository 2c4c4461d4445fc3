"""schedule_using_anchor_trace: a trace tuned on conv2d + relu reused on conv2d + add + relu."""

from __future__ import annotations

import numpy as np
import pytest

import metaschedule as ms
from metaschedule import te
from metaschedule.schedule import Schedule
from metaschedule.search_strategy.base import TraceReplayer
from metaschedule.te import ops
from metaschedule.tir.interpreter import interpret
from metaschedule.trace_apply import schedule_using_anchor_trace

TARGET = ms.Target("llvm -num-cores 2")


def _conv(epilogue: str):
    a = te.placeholder((1, 6, 6, 8), "float32", "A")
    w = te.placeholder((3, 3, 8, 8), "float32", "W")
    conv = ops.conv2d_nhwc(a, w, padding=1)
    args = [a, w]
    if epilogue == "add_relu":
        bias = te.placeholder((1, 6, 6, 8), "float32", "bias")
        args.append(bias)
        out = ops.relu(ops.add(conv, bias))
    elif epilogue == "relu":
        out = ops.relu(conv)
    else:
        out = ops.add(conv, te.placeholder((1, 6, 6, 8), "float32", "bias"))
        args.append(out.op.input_tensors[1])
    return te.create_prim_func([*args, out])


def _anchor_traces(n: int) -> list:
    """Post-processed traces of the default llvm space for conv2d + relu."""
    func = _conv("relu")
    ctx = ms.TuneContext(
        mod=func,
        target=TARGET,
        space_generator="post-order-apply",
        search_strategy="replay-trace",
        task_name="anchor",
        rand_state=0,
    )
    spaces = ctx.space_generator.generate_design_space(ctx.mod)
    replayer = TraceReplayer(ctx.mod, ctx.space_generator.postprocs)
    traces = []
    seed = 0
    while len(traces) < n and seed < 20 * n:
        sch = replayer(spaces[seed % len(spaces)].trace, seed)
        seed += 1
        if sch is not None:
            traces.append(sch.trace)
    assert traces, replayer.summary()
    return traces


def _reference(args: list[np.ndarray], relu: bool = True) -> np.ndarray:
    a, w, bias = args[0], args[1], args[2]
    padded = np.pad(a, ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((1, 6, 6, 8), "float32")
    for ry in range(3):
        for rx in range(3):
            out += np.einsum("nhwc,cf->nhwf", padded[:, ry : ry + 6, rx : rx + 6, :], w[ry, rx])
    return np.maximum(out + bias, 0) if relu else out + bias


def _inputs(rng) -> list[np.ndarray]:
    return [
        rng.standard_normal(s).astype("float32") for s in ((1, 6, 6, 8), (3, 3, 8, 8), (1, 6, 6, 8))
    ]


def test_anchor_trace_transfers_to_another_epilogue():
    target_func = _conv("add_relu")
    rng = np.random.default_rng(0)
    for trace in _anchor_traces(4):
        sch = Schedule(target_func)
        schedule_using_anchor_trace(sch, trace, TARGET)
        args = _inputs(rng)
        out = np.zeros((1, 6, 6, 8), "float32")
        interpret(sch.mod, *ms.pack_weights(sch, [*args, out]))  # W may be re-laid out
        np.testing.assert_allclose(out, _reference(args), rtol=1e-4, atol=1e-4)
        # the anchor block was scheduled like the trace: its loop nest was tiled
        conv_loops = sch.get_loops(sch.get_block("conv2d_nhwc"))
        assert len(conv_loops) > 7


@pytest.mark.compiler
def test_anchor_trace_result_builds_and_runs():
    target_func = _conv("add_relu")
    sch = Schedule(target_func)
    schedule_using_anchor_trace(sch, _anchor_traces(1)[0], TARGET)
    lib = ms.build(sch.mod, TARGET)
    args = _inputs(np.random.default_rng(1))
    out = np.zeros((1, 6, 6, 8), "float32")
    lib(*lib.pack_weights(*args, out))
    np.testing.assert_allclose(out, _reference(args), rtol=1e-4, atol=1e-4)


def test_uncovered_output_block_is_parallelized():
    """conv2d + add has no relu: the trace's relu steps are skipped, add gets a default."""
    a = te.placeholder((1, 6, 6, 8), "float32", "A")
    w = te.placeholder((3, 3, 8, 8), "float32", "W")
    bias = te.placeholder((1, 6, 6, 8), "float32", "bias")
    func = te.create_prim_func([a, w, bias, ops.add(ops.conv2d_nhwc(a, w, padding=1), bias)])
    sch = Schedule(func)
    schedule_using_anchor_trace(sch, _anchor_traces(1)[0], TARGET)
    args = _inputs(np.random.default_rng(2))
    out = np.zeros((1, 6, 6, 8), "float32")
    interpret(sch.mod, *ms.pack_weights(sch, [*args, out]))  # W may be re-laid out
    np.testing.assert_allclose(out, _reference(args, relu=False), rtol=1e-4, atol=1e-4)
    kinds = {str(sch.get(l).kind) for l in sch.get_loops(sch.get_block("T_add"))}
    assert any("parallel" in k.lower() for k in kinds), kinds


def test_trace_without_the_anchor_is_rejected():
    a = te.placeholder((16, 16), "float32", "A")
    b = te.placeholder((16, 16), "float32", "B")
    func = te.create_prim_func([a, b, ops.matmul(a, b)])
    with pytest.raises(ValueError, match="anchor block"):
        schedule_using_anchor_trace(Schedule(func), _anchor_traces(1)[0], TARGET)


def test_anchor_block_database_schedules_a_sibling_module():
    """A record tuned on conv2d + relu answers a query for conv2d + add + relu."""
    relu_func, sibling = _conv("relu"), _conv("add_relu")
    db = ms.Database.create("memory", module_equality="anchor-block")
    workload = db.commit_workload(ms.tir.IRModule({"main": relu_func}))
    trace = _anchor_traces(1)[0]
    db.commit_tuning_record(ms.database.TuningRecord(trace, workload, [1e-3], TARGET))
    sch = db.query_schedule(ms.tir.IRModule({"main": sibling}), TARGET)
    assert sch is not None
    args = _inputs(np.random.default_rng(3))
    out = np.zeros((1, 6, 6, 8), "float32")
    interpret(sch.mod, *ms.pack_weights(sch, [*args, out]))  # W may be re-laid out
    np.testing.assert_allclose(out, _reference(args), rtol=1e-4, atol=1e-4)
    # a structural database does not confuse the two
    plain = ms.Database.create("memory")
    w2 = plain.commit_workload(ms.tir.IRModule({"main": relu_func}))
    plain.commit_tuning_record(ms.database.TuningRecord(trace, w2, [1e-3], TARGET))
    assert plain.query_schedule(ms.tir.IRModule({"main": sibling}), TARGET) is None
