"""AnalyticPrior on the depthwise convolution of the suite (``dep``): the schedules the
code generator runs fastest are those it ranks first.

Measured on this 2-core Zen 4 (``chrt -f 5``, best of 5 interleaved rounds, 1x112x112x32,
3x3, pad 1; TVM 0.27's best 64-trial kernel ran 54-60 us in the same rounds):

* ``FAST``: the padding inlined (its guards versioned away in the interior), the 3x3
  window inside a tile of 4 rows x 16 channels (4 accumulators), the weight packed to
  ``[2, 3, 3, 16]``: 44 us;
* ``SLOW_AT``: the padding computed per tile, a 16 x 16-channel tile split out of 14 rows
  (the best of a 64-trial search before): 79 us;
* ``SLOW_WIDE``: the padding per row block, 8 rows x 32 channels (16 accumulators and 18
  weight vectors): 79 us;
* ``SLOW_GUARDED``: the padding inlined into a tile too large to version (16 pixels x 16
  channels across the window: 144 updates per test), every load guarded: 94 us.

The decisions are those of the default llvm space, in the order of its sampling
instructions: the tiles of n, h, w, c, the window's rows and columns, the unroll, the
padding's compute location (-2: inlined).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from metaschedule import te
from metaschedule.codegen import build
from metaschedule.cost_model.prior import AnalyticPrior, Machine, register_tiles
from metaschedule.postproc import Postproc
from metaschedule.schedule import Schedule
from metaschedule.schedule.trace import Trace
from metaschedule.search_strategy.base import TraceReplayer
from metaschedule.space_generator import PostOrderApply
from metaschedule.te import ops
from metaschedule.testing.hosts import ZEN4, native_target
from metaschedule.tune_context import TuneContext

FAST = [[1, 1, 1, 1], [28, 1, 1, 4], [1, 14, 8, 1], [1, 2, 1, 16], [1, 3], [1, 3], 3, -2]
SLOW_AT = [[1, 1, 1, 1], [2, 4, 1, 14], [7, 1, 1, 16], [2, 1, 1, 16], [3, 1], [3, 1], 0, 6]
SLOW_WIDE = [[1, 1, 1, 1], [7, 2, 1, 8], [1, 14, 8, 1], [1, 1, 1, 32], [1, 3], [1, 3], 3, 4]
SLOW_GUARDED = [[1, 1, 1, 1], [4, 1, 2, 14], [7, 1, 1, 16], [2, 1, 1, 16], [1, 3], [1, 3], 1, -2]
# FAST with 8 rows in the tile (8 accumulators): 55 us, against 44 us for FAST and for 8
# pixels along the row (PIXELS_8)
ROWS_8 = [[1, 1, 1, 1], [14, 1, 1, 8], [1, 14, 8, 1], [1, 2, 1, 16], [1, 3], [1, 3], 3, -2]
PIXELS_8 = [[1, 1, 1, 1], [28, 1, 4, 1], [1, 14, 1, 8], [1, 2, 1, 16], [1, 3], [1, 3], 3, -2]

#: the Zen 4 these schedules were measured on (16 lanes on a 256-bit datapath, L1D 8-way)
CPU64 = native_target(ZEN4)


def _depthwise(h: int, w: int, c: int = 32):
    data = te.placeholder((1, h, w, c), "float32", "data")
    kernel = te.placeholder((3, 3, c), "float32", "kernel")
    return te.create_prim_func([data, kernel, ops.depthwise_conv2d_nhwc(data, kernel, padding=1)])


def _schedule(func, decisions) -> Schedule:
    """The default llvm space's schedule (the design without a write cache) with these
    decisions, post-processed."""
    ctx = TuneContext(func, target="llvm", space_generator=PostOrderApply(), rand_state=0)
    (space,) = [
        s
        for s in ctx.generate_design_space()
        if not any(i.kind.name == "CacheWrite" for i in s.trace.insts)
    ]
    trace = Trace(space.trace.insts, {})
    samples = [i for i in trace.insts if i.kind.name.startswith("Sample")]
    assert len(samples) == len(decisions)
    for inst, decision in zip(samples, decisions):
        trace = trace.with_decision(inst, decision, remove_postproc=True)
    sch = TraceReplayer(ctx.mod, Postproc.create("llvm"))(trace, 0)
    assert sch is not None, decisions
    return sch


@pytest.fixture(scope="module")
def scores():
    func = _depthwise(112, 112)
    machine = Machine.of_target(CPU64, host=ZEN4)
    prior = AnalyticPrior()
    named = {"fast": FAST, "at": SLOW_AT, "wide": SLOW_WIDE, "guarded": SLOW_GUARDED}
    return {k: prior.score_mod(_schedule(func, d).mod, machine) for k, d in named.items()}


def test_the_fast_depthwise_schedule_ranks_first(scores):
    assert scores["fast"] > 1.2 * max(scores["at"], scores["wide"], scores["guarded"]), scores


def test_a_wide_vector_halves_the_fma_and_load_rates_of_a_256_bit_datapath():
    zen4 = Machine.of_target(CPU64, host=ZEN4)
    assert (zen4.lanes, zen4.fma_ports, zen4.loads_per_cycle) == (16, 1.0, 1.0)
    avx2 = Machine.of_target(native_target(ZEN4, vector_width=32), host=ZEN4)
    assert (avx2.lanes, avx2.fma_ports, avx2.loads_per_cycle) == (8, 2.0, 2.0)
    wide = Machine.of_target(CPU64, datapath_bits=512, host=ZEN4)
    assert wide.fma_ports == 2.0


def test_a_weight_packed_by_channel_blocks_is_read_contiguously():
    # the packed weight [c // 16, ry, rx, c % 16] steps by 1 along the vector loop: no
    # gather, so the register tile is the 4 accumulators the code generator keeps
    sch = _schedule(_depthwise(112, 112), FAST)
    (func,) = sch.mod.functions.values()
    assert [int(d) for d in func.params[1].shape] == [2, 3, 3, 16]
    machine = Machine(lanes=16, cores=2)
    assert register_tiles(sch.mod, machine) == [4]
    guarded = _schedule(_depthwise(112, 112), SLOW_GUARDED)
    assert AnalyticPrior().score_mod(sch.mod, machine) > 1.5 * AnalyticPrior().score_mod(
        guarded.mod, machine
    )


def test_a_tile_of_rows_crowding_two_cache_sets_ranks_below_four_rows_and_eight_pixels():
    # rows of the 112 x 32 image are 14 KiB apart: the 10 input rows of an 8-row window
    # and its 8 output rows fall in two L1 set groups, 9 lines in a set of 8 ways: the
    # line beyond the ways comes from L2 on every entry into the tile's region
    func = _depthwise(112, 112)
    zen4 = Machine.of_target(CPU64, host=ZEN4)
    prior = AnalyticPrior()
    rows, pixels, fast = (_schedule(func, d).mod for d in (ROWS_8, PIXELS_8, FAST))
    assert prior.score_mod(fast, zen4) > 1.1 * prior.score_mod(rows, zen4)
    assert prior.score_mod(pixels, zen4) > 1.02 * prior.score_mod(rows, zen4)
    # with 16 ways (the same 64 sets) their lines fit: the 8 rows lose nothing to the pixels
    roomy = dataclasses.replace(zen4, l1_ways=16, l1_bytes=64 * 1024)
    assert prior.score_mod(rows, roomy) >= 0.99 * prior.score_mod(pixels, roomy)


def test_the_window_written_out_loads_each_input_vector_once():
    # the code generator writes the 3x3 window over FAST's 4 rows out step by step and
    # loads each of its 6 x 3 input vectors once (c_accumulate.straight_line), kept in
    # registers; without the registers for them every step loads its own 4
    func = _depthwise(112, 112)
    zen4 = Machine.of_target(CPU64, host=ZEN4)
    few = dataclasses.replace(zen4, vector_registers=16)
    fast = _schedule(func, FAST).mod
    assert AnalyticPrior().score_mod(fast, zen4) > 1.1 * AnalyticPrior().score_mod(fast, few)


@pytest.mark.compiler
@pytest.mark.parametrize("decisions", [FAST, SLOW_GUARDED], ids=["fast", "guarded"])
def test_the_ranked_structures_compile_to_the_numpy_result(decisions, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # never the user's kernel cache
    # the same structures on a small image (the tile factors divide 28 x 28)
    small = [list(d) if isinstance(d, list) else d for d in decisions]
    small[1] = [7, 1, 1, 4] if decisions is FAST else [1, 1, 2, 14]
    small[2] = [1, 7, 4, 1] if decisions is FAST else [7, 1, 1, 4]
    func = _depthwise(28, 28)
    sch = _schedule(func, small)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 28, 28, 32)).astype("float32")
    k = rng.standard_normal((3, 3, 32)).astype("float32")
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = sum(xp[:, i : i + 28, j : j + 28, :] * k[i, j] for i in range(3) for j in range(3))
    lib = build(sch.mod, CPU64)
    out = np.full(want.shape, np.nan, "float32")
    lib(*lib.pack_weights(x, k, out)[:-1], out)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
