"""WindowTiling: a register tile of output rows for pooling, offered beside TVM's space."""

import re

import numpy as np
import pytest

from metaschedule import te
from metaschedule.codegen import build, codegen_c
from metaschedule.postproc import Postproc
from metaschedule.schedule import Schedule, Trace
from metaschedule.schedule_rule import WindowTiling
from metaschedule.schedule_rule.window_tiling import plan_window, tile_window
from metaschedule.search_strategy.base import TraceReplayer
from metaschedule.space_generator import PostOrderApply
from metaschedule.te import ops
from metaschedule.te.ops.nchw import max_pool2d_nchw
from metaschedule.tir.interpreter import interpret
from metaschedule.tir.transform import lower
from metaschedule.tune_context import TuneContext

TARGET = "llvm -num-cores 2"


def _max_pool(h=12, c=32, pad=0):
    x = te.placeholder((1, h, h, c), "float32", "x")
    return te.create_prim_func([x, ops.max_pool2d(x, 3, 2, padding=pad)])


def _avg_pool(h=12, c=32):
    x = te.placeholder((1, h, h, c), "float32", "x")
    return te.create_prim_func([x, ops.avg_pool2d(x, 3, 2, padding=1)])


def _global_pool():
    x = te.placeholder((1, 7, 7, 32), "float32", "x")
    return te.create_prim_func([x, ops.global_avg_pool2d(x)])


def _args(func, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(p.static_shape()).astype("float32") for p in func.params]


def test_plan_finds_the_row_and_channel_loops_of_an_nhwc_pool():
    sch = Schedule(_max_pool())
    plan = plan_window(sch, sch.get_block("pool_max"), 16)
    assert plan is not None
    assert (plan.row, plan.channel, plan.reductions, plan.vector) == (1, 3, (4, 5), 16)


def test_other_reductions_are_left_alone(ck, wl):
    x = te.placeholder((1, 32, 12, 12), "float32", "x")
    nchw = te.create_prim_func([x, max_pool2d_nchw(x, (3, 3), (2, 2))])
    cases = [
        (wl.matmul(), "T_matmul_NN"),  # reuse: MultiLevelTiling's
        (nchw, "pool_max"),  # channels not last
        (_global_pool(), "adaptive_pool_sum"),  # no sliding row (extent 1)
        (_max_pool(c=12), "pool_max"),  # channels not a multiple of the vector
    ]
    for func, name in cases:
        sch = Schedule(func)
        assert plan_window(sch, sch.get_block(name), 16) is None, name
        (only,) = ck.spaces(func, [WindowTiling()])
        assert "Reorder" not in ck.kinds(only)


def test_the_rule_offers_the_tiled_sketch_and_the_original(ck):
    func = _max_pool()
    spaces = ck.spaces(func, [WindowTiling(row_tiles=[1, 2, 4])])
    assert len(spaces) == 2
    (tiled,) = [s for s in spaces if "Vectorize" in ck.kinds(s)]
    (original,) = [s for s in spaces if s is not tiled]
    assert "SampleCategorical" in ck.kinds(tiled)
    assert ck.kinds(original).count("Split") == 0
    # row tiles beyond the rows are dropped: 5 output rows keep 1, 2 and 4
    (inst,) = [i for i in tiled.trace.insts if i.kind.name == "SampleCategorical"]
    assert list(inst.attrs[0]) == [1, 2, 4]
    for seed in range(3):  # every decision computes the pool
        ck.assert_same_numbers(func, ck.replay(func, tiled, seed))


def test_an_elementwise_consumer_is_also_offered_fused_into_the_tile(ck):
    """An average pool's ``sum / 9``: a third sketch computes it under the tile's channel
    loop, vectorized, so the pool is one loop nest (one parallel region, not two)."""
    func = _avg_pool()
    spaces = ck.spaces(func, [WindowTiling(row_tiles=[2])])
    assert len(spaces) == 3
    (fused,) = [s for s in spaces if "ReverseComputeAt" in ck.kinds(s)]
    assert ck.kinds(fused).count("Vectorize") == 2  # the tile's channels, the consumer's
    sch = fused.copy()
    avg_loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block("pool_avg"))]
    tile_loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block("pool_sum"))]
    assert avg_loops[:4] == tile_loops[:4]  # under the tile's batch, row, pixel, channel
    ck.assert_same_numbers(func, fused)


def test_no_fusion_without_a_single_elementwise_consumer(ck):
    func = _max_pool()  # pool_max is the output: no consumer
    assert all("ReverseComputeAt" not in ck.kinds(s) for s in ck.spaces(func, [WindowTiling()]))


@pytest.mark.compiler
@pytest.mark.parametrize(
    "make", [_max_pool, lambda: _max_pool(h=11, pad=1), _avg_pool], ids=["max", "max-pad", "avg"]
)
def test_every_sampled_schedule_of_the_pool_space_computes_numpy(make):
    """The default llvm space of a small pool: every sketch with every row tile and unroll
    step, postprocessed and compiled, computes the unscheduled function's result."""
    func = make()
    args = _args(func)
    want = [a.copy() for a in args]
    interpret(func, *want)
    ctx = TuneContext(func, target=TARGET, space_generator=PostOrderApply(), rand_state=0)
    spaces = ctx.generate_design_space()
    assert any("meta_schedule.window_tiling" in str(s.trace) for s in spaces)
    if make is _avg_pool:  # the sum / 9 fused into the tile is in the space too
        assert any("reverse_compute_at" in str(s.trace) for s in spaces)
    replay = TraceReplayer(ctx.mod, Postproc.create("llvm"))
    checked = 0
    for i, space in enumerate(spaces):
        for seed in range(4):
            sch = replay(space.trace, 11 * i + seed)
            if sch is None:
                continue
            got = [a.copy() for a in args]
            build(sch.mod, TARGET)(*got)
            np.testing.assert_allclose(got[-1], want[-1], rtol=1e-5, atol=1e-5)
            checked += 1
    assert checked >= len(spaces)


def _braced(code, start):
    """The text of the ``{ ... }`` block opening at ``start``."""
    depth = 0
    for i in range(start, len(code)):
        depth += {"{": 1, "}": -1}.get(code[i], 0)
        if depth == 0:
            return code[start : i + 1]
    raise AssertionError("unbalanced braces")


def _tiled_c(func, rows, target="llvm -num-cores 2 -mcpu=skylake-avx512"):
    sch = Schedule(func)
    block = sch.get_block("pool_max")
    plan = plan_window(sch, block, 16)
    tile_window(sch, block, plan, rows)
    loops = sch.get_loops(block)
    sch.parallel(sch.fuse(loops[0], loops[1]))
    sch.decompose_reduction(block, loops[4])
    return sch, codegen_c(lower(sch.mod["main"]), target).code


@pytest.mark.compiler
def test_the_window_stays_in_registers_and_each_output_is_stored_once():
    """Two output rows of 16 channels: two vector accumulators across the 3x3 window,
    written out as straight-line code; the 15 distinct input vectors of the two windows
    (3 rows of 3 columns, the middle row shared) are loaded once each; the output is
    stored once per window (plus the init the accumulators start from), and the vector
    max is one vmaxps (a builtin), not a compare and select."""
    func = _max_pool(h=13)  # 6 output rows: tiles of 2 divide them
    sch, code = _tiled_c(func, 2)
    assert "pool_max kept in 2 accumulators of 16 lanes across loops" in code
    window = _braced(code, code.index("{ // pool_max kept in 2 accumulators"))
    loads = re.findall(r"ms_load_f32x16\(&x\[", window)
    assert len(loads) == 15
    assert "for (" not in window  # straight-line: no loop over the window
    stores = re.findall(r"ms_store_f32x16\(&pool_max\[", window)
    assert len(stores) == 2
    assert "__builtin_ia32_maxps512" in code
    args = _args(func)
    want = [a.copy() for a in args]
    interpret(func, *want)
    build(sch.mod, TARGET)(*args)
    np.testing.assert_array_equal(args[-1], want[-1])


@pytest.mark.compiler
def test_an_imperfect_row_tile_keeps_registers_only_where_every_row_exists():
    """5 output rows in tiles of 2: the interior copy keeps its tile in registers, the
    last (guarded) tile does not load or store a sixth row outside the output."""
    func = _max_pool(h=11)  # 5 output rows
    sch, code = _tiled_c(func, 2)
    assert code.count("kept in 2 accumulators") == 1  # the unguarded copy only
    args = _args(func)
    want = [a.copy() for a in args]
    interpret(func, *want)
    build(sch.mod, TARGET)(*args)
    np.testing.assert_array_equal(args[-1], want[-1])


def test_trace_round_trips_with_the_row_tile_decision(ck):
    func = _max_pool()
    (tiled,) = [
        s for s in ck.spaces(func, [WindowTiling(row_tiles=[2])]) if "Vectorize" in ck.kinds(s)
    ]
    again = Schedule(func)
    Trace(tiled.trace.insts, tiled.trace.decisions).apply_to_schedule(again, False)
    assert again.mod["main"].body is not None
    ck.assert_same_numbers(func, again)


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="row_tiles"):
        WindowTiling(row_tiles=[0])
    with pytest.raises(ValueError, match="max_window"):
        WindowTiling(max_window=0)
