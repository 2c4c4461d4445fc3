"""AnalyticPrior: hand-written schedules ranked as a CPU runs them, no data needed."""

import functools

import numpy as np
import pytest

from metaschedule import te
from metaschedule.codegen import c_accumulate, c_invariant, c_vector
from metaschedule.cost_model.prior import AnalyticPrior, Machine
from metaschedule.schedule import Schedule
from metaschedule.te.ops.conv import conv2d_nhwc
from metaschedule.testing.hosts import INTEL_AVX512, UNKNOWN, ZEN4, ZEN5, native_target
from metaschedule.testing.isas import AVX512
from metaschedule.testing.tuning_records import matmul

MACHINE = Machine(lanes=8, cores=2)


def good_matmul(n=64):
    """A 4x16 register tile under the reduction, vectorized over j, parallel over i."""
    sch = Schedule(matmul(n))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i0, j0, k, i1, j1)
    sch.vectorize(j1)
    sch.parallel(i0)
    return sch


def bad_matmul(n=64):
    """The reduction outermost, i innermost: every access strides by n, nothing is
    vectorized, no parallel loop."""
    sch = Schedule(matmul(n))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    sch.reorder(k, j, i)
    return sch


def conv(n=1, hw=16, c=16, f=16):
    x = te.placeholder((n, hw, hw, c), "float32", name="X")
    w = te.placeholder((3, 3, c, f), "float32", name="W")
    y = conv2d_nhwc(x, w, 1, 1)
    return te.create_prim_func([x, w, y])


def conv_schedule(good: bool):
    sch = Schedule(conv())
    pad = sch.get_block("PaddedInput") if _has(sch, "PaddedInput") else None
    if pad is not None:
        sch.compute_inline(pad)
    block = sch.get_block("conv2d_nhwc")
    nn, yy, xx, ff, ry, rx, rc = sch.get_loops(block)
    if good:  # 4 output pixels x 16 channels in registers, f vectorized, y parallel
        x0, x1 = sch.split(xx, [None, 4])
        sch.reorder(nn, yy, x0, ry, rx, rc, x1, ff)
        sch.vectorize(ff)
        sch.parallel(yy)
    else:  # channels outermost, the output pixel innermost and strided, serial
        sch.reorder(ff, rc, ry, rx, nn, yy, xx)
    return sch


def _has(sch, name):
    try:
        sch.get_block(name)
    except Exception:  # noqa: BLE001 - no such block in this workload
        return False
    return True


def test_a_good_matmul_schedule_ranks_far_above_a_bad_one():
    prior = AnalyticPrior()
    good = prior.score_mod(good_matmul().mod, MACHINE)
    bad = prior.score_mod(bad_matmul().mod, MACHINE)
    assert good > 10 * bad > 0


def test_a_good_conv_schedule_ranks_far_above_a_bad_one():
    prior = AnalyticPrior()
    good = prior.score_mod(conv_schedule(True).mod, MACHINE)
    bad = prior.score_mod(conv_schedule(False).mod, MACHINE)
    assert good > 10 * bad > 0


def test_each_ingredient_counts():
    """Vectorizing, parallelizing and a register tile each improve the estimate."""
    prior = AnalyticPrior()

    def scored(vectorize, parallel, tile):
        sch = Schedule(matmul(64))
        i, j, k = sch.get_loops(sch.get_block("C"))
        i0, i1 = sch.split(i, [None, 4])
        j0, j1 = sch.split(j, [None, 16])
        if tile:
            sch.reorder(i0, j0, k, i1, j1)
        else:
            sch.reorder(i0, j0, i1, j1, k)  # the reduction innermost: a memory round trip
        if vectorize and tile:
            sch.vectorize(j1)
        if parallel:
            sch.parallel(i0)
        return prior.score_mod(sch.mod, MACHINE)

    best = scored(True, True, True)
    assert best > scored(False, True, True)
    assert best > scored(True, False, True)
    assert scored(False, False, True) > scored(False, False, False)


def test_parallel_balance_against_the_cores():
    """Three jobs on two cores idle one core half the time: worse than two or four."""
    prior = AnalyticPrior()

    def with_jobs(jobs):
        sch = Schedule(matmul(48, 48, 48))
        i, j, k = sch.get_loops(sch.get_block("C"))
        i0, _ = sch.split(i, [jobs, None])
        sch.parallel(i0)
        return prior.score_mod(sch.mod, MACHINE)

    assert with_jobs(2) > with_jobs(3) and with_jobs(4) > with_jobs(3)
    assert with_jobs(2) > 1.5 * with_jobs(1)


def test_predict_is_a_cost_model_and_deterministic():
    from metaschedule.arg_info import ArgInfo
    from metaschedule.measure_candidate import MeasureCandidate
    from metaschedule.target import Target
    from metaschedule.tune_context import TuneContext

    ctx = TuneContext(matmul(64), target=Target("llvm -num-cores 2"))
    cands = [
        MeasureCandidate(s, ArgInfo.from_entry_func(s.mod)) for s in (good_matmul(), bad_matmul())
    ]
    a = AnalyticPrior().predict(ctx, cands)
    b = AnalyticPrior().predict(ctx, cands)
    assert a.shape == (2,) and np.array_equal(a, b) and a[0] > a[1]
    AnalyticPrior().update(ctx, cands, [])  # learns nothing, accepts anything


def test_the_prior_only_scores():
    """The warm-up settings it took are the search's (search_strategy.WarmUpPolicy): an
    error says where they went."""
    for moved in ("oversample", "random_share", "refine_rounds"):
        with pytest.raises(TypeError, match=f"{moved} moved to the search.*WarmUpPolicy"):
            AnalyticPrior(**{moved: 1})
    with pytest.raises(TypeError, match="unexpected keyword argument 'lanes'"):
        AnalyticPrior(lanes=8)
    assert str(AnalyticPrior()) == "AnalyticPrior()"


# ------------------------------------------------------------------ the default space
def _space_samples(func, n, seed=0, target="llvm"):
    """``n`` random schedules of the default space of ``func`` for ``target``,
    postprocessed."""
    from metaschedule.schedule.trace import Trace
    from metaschedule.space_generator import PostOrderApply
    from metaschedule.tune_context import TuneContext

    ctx = TuneContext(func, target=target, space_generator=PostOrderApply(), rand_state=seed)
    spaces, post = ctx.generate_design_space(), ctx.space_generator.postprocs
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        space = spaces[int(rng.integers(len(spaces)))]
        sch = Schedule(ctx.mod, seed=int(rng.integers(2**31)), error_render_level="none")
        Trace(space.trace.insts, {}).apply_to_schedule(sch, remove_postproc=True)
        sch.enter_postproc()
        if all(p.apply(sch) for p in post):
            out.append(sch)
    return out


def test_one_prior_estimates_every_candidate_as_a_fresh_one(monkeypatch):
    """The prior remembers the simplified indices of the stores it estimated (by their
    loops' positions and extents): sampled schedules of a convolution, whose packed weight
    and fused loops are read through ``//`` and ``%``, get the estimates of a new prior."""
    from metaschedule.cost_model.prior import access
    from metaschedule.tir.arith.analyzer import Analyzer

    shared = AnalyticPrior()
    schs = _space_samples(conv(hw=14, c=32, f=32), 12, seed=4)
    for sch in schs:
        assert shared.estimate_cycles(sch.mod, Machine()) == AnalyticPrior().estimate_cycles(
            sch.mod, Machine()
        )
    assert shared._indices
    calls = []

    class Counting(Analyzer):  # the prior's own simplifications (not the lowering's)
        def simplify(self, e):
            calls.append(e)
            return super().simplify(e)

    monkeypatch.setattr(access, "Analyzer", Counting)
    shared.estimate_cycles(schs[0].mod, Machine())  # every index remembered
    assert not calls


def test_an_init_folded_into_a_register_tile_is_not_estimated(monkeypatch):
    """The init of a reduction kept in registers costs nothing (the tile starts from it):
    it is not estimated at all; without a tile it is, and counts."""
    from metaschedule.codegen import c_codegen
    from metaschedule.cost_model.prior import model as prior_model
    from metaschedule.cost_model.prior.access import is_init

    estimated = []
    store_cycles = prior_model.store_cycles

    def counted(st, *args):
        estimated.append(is_init(st))
        return store_cycles(st, *args)

    monkeypatch.setattr(prior_model, "store_cycles", counted)
    # the code generator would give the bad schedule's j loop vector lanes (c_autovector)
    monkeypatch.setattr(c_codegen, "AUTO_VECTORIZE", False)
    for sch, tiled in ((good_matmul(), True), (bad_matmul(256), False)):  # 256 x 256: no tile
        sch.decompose_reduction(sch.get_block("C"), sch.get_loops(sch.get_block("C"))[0])
        estimated.clear()
        AnalyticPrior().estimate_cycles(sch.mod, Machine())
        assert estimated.count(True) == (0 if tiled else 1) and estimated.count(False) == 1


def _with_decisions(func, decisions):
    """The first design space of ``func`` with its sampling decisions replaced, in order."""
    from metaschedule.schedule.trace import Trace
    from metaschedule.space_generator import PostOrderApply
    from metaschedule.tune_context import TuneContext

    ctx = TuneContext(func, target="llvm", space_generator=PostOrderApply(), rand_state=0)
    space = ctx.generate_design_space()[-1]  # no write cache: the tile's loops only
    sampled = [inst for inst in space.trace.insts if inst in space.trace.decisions]
    chosen = dict(space.trace.decisions)
    chosen.update(zip(sampled, decisions))
    sch = Schedule(ctx.mod, seed=0)
    Trace(space.trace.insts, chosen).apply_to_schedule(sch, remove_postproc=True)
    sch.enter_postproc()
    assert all(p.apply(sch) for p in ctx.space_generator.postprocs)
    return sch


def test_the_register_tiles_are_the_code_generators():
    """On random points of the default space, the prior's register tiles are those the C
    code generator emits, including reduction loops hoisted out of the tile and serial
    rows over a reduction made vector code (c_vector.vectorize_outputs)."""
    import re

    from metaschedule.codegen import c_vector
    from metaschedule.codegen.c_codegen import codegen_c
    from metaschedule.cost_model.prior import register_tiles
    from metaschedule.target import Target
    from metaschedule.tir.function import IRModule
    from metaschedule.tir.transform import lower

    assert c_vector.VECTORIZE_OUTPUTS
    target = Target("cpu")
    machine = Machine.of_target(target)
    hoisted = 0
    for func in (matmul(64), conv()):
        for sch in _space_samples(func, 20):
            lowered = IRModule({name: lower(f) for name, f in sch.mod.items()})
            code = codegen_c(lowered, target).code
            emitted = sorted(int(x) for x in re.findall(r"kept in (\d+) accumulator", code))
            assert sorted(register_tiles(sch.mod, machine)) == emitted, str(sch.trace)
            hoisted += bool(re.search(r"accumulators? (of \d+ lanes )?across loops \w+, ", code))
    assert hoisted  # some tiles span two reduction loops


@functools.cache
def _wide_matmul_samples() -> tuple:
    """40 random schedules of a 127 x 511 x 255 matmul's default AVX-512 space, each with
    the C the code generator emits for it (its default switches): sampled and emitted once,
    for the two tests below that hold the prior to that C."""
    target = AVX512  # the code generator's and the prior's ISA, whatever the host's
    samples = _space_samples(matmul(127, 255, 511), 40, seed=1, target=target)
    return tuple((sch, _emitted_c(sch, target)) for sch in samples)


def test_merged_register_tiles_are_the_code_generators(monkeypatch):
    """Tile loops whose points lie side by side along the vector loop are merged into it
    (c_accumulate.MERGE_CONTIGUOUS): a 127 x 511 x 255 matmul's rows of 5 x 51 lanes are
    one 255-lane run of 19 vectors, not 5 x 5. The prior counts the tiles so, serial rows
    over a reduction made vector code (c_vector.vectorize_outputs) included."""
    import re

    from metaschedule.cost_model.prior import register_tiles

    assert c_accumulate.MERGE_CONTIGUOUS and c_vector.VECTORIZE_OUTPUTS  # (the prior reads them)
    machine = Machine.of_target(AVX512)
    merged = 0
    for sch, code in _wide_matmul_samples():
        emitted = sorted(int(x) for x in re.findall(r"kept in (\d+) accumulator", code))
        tiles = sorted(register_tiles(sch.mod, machine))
        assert tiles == emitted, str(sch.trace)
        monkeypatch.setattr(c_accumulate, "MERGE_CONTIGUOUS", False)
        merged += sorted(register_tiles(sch.mod, machine)) != tiles
        monkeypatch.setattr(c_accumulate, "MERGE_CONTIGUOUS", True)
    assert merged  # some tiles are merged


def _serial_row_matmul(tj=17, tk=7, unroll=64):
    """TVM's best structure for a 127 x 511 x 255 matmul, smaller (as
    tests/codegen/test_odd_rows.py builds it): ``j0 | k0 | i (9) | j1 (tj, left serial) |
    k1 (tk)``, the nest under ``j0`` unrolled explicitly up to ``unroll`` steps."""
    from metaschedule.te import ops

    a = te.placeholder((9, 3 * tk), "float32", "A")
    b = te.placeholder((3 * tk, 2 * tj), "float32", "B")
    sch = Schedule(te.create_prim_func([a, b, ops.matmul(a, b)]))
    block = sch.get_block("T_matmul_NN")
    i, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, [None, tj])
    k0, k1 = sch.split(k, [None, tk])
    sch.reorder(j0, k0, i, j1, k1)
    sch.decompose_reduction(block, k0)
    if unroll:
        sch.annotate(j0, "pragma_auto_unroll_max_step", unroll)
        sch.annotate(j0, "pragma_unroll_explicit", 1)
    return sch


def _emitted_c(sch, target):
    from metaschedule.codegen.c_codegen import codegen_c
    from metaschedule.tir.function import IRModule
    from metaschedule.tir.transform import lower

    return codegen_c(IRModule({name: lower(f) for name, f in sch.mod.items()}), target).code


def test_a_serial_row_over_a_reduction_is_a_tile_of_vectors(monkeypatch):
    """The code generator makes the 17 serial columns ``j1`` over the reduction ``k1``
    vector code (c_vector.vectorize_outputs): a tile of 2 vector accumulators (16 lanes
    and 1), not 1 scalar. The prior counts the tile it emits, and estimates the row as
    the vector code it is."""
    import re

    from metaschedule.cost_model.prior import register_tiles
    from metaschedule.target import Target

    target = Target("llvm -mcpu=x86-64-v4 -num-cores=2")
    machine = Machine.of_target(target)
    sch = _serial_row_matmul()
    code = _emitted_c(sch, target)
    assert re.findall(r"kept in (\d+) accumulators of 16/1 lanes", code) == ["2"]
    assert register_tiles(sch.mod, machine) == [2]
    vector = AnalyticPrior().estimate_cycles(sch.mod, machine)
    monkeypatch.setattr(c_vector, "VECTORIZE_OUTPUTS", False)  # the prior as it was
    assert register_tiles(sch.mod, machine) == [1]
    assert AnalyticPrior().estimate_cycles(sch.mod, machine) > 1.5 * vector


def test_loads_invariant_in_the_row_loop_are_counted_once_per_entry(monkeypatch):
    """Written out, the 7 steps of the 17-column row read a 7 x 17 panel of ``B`` that
    the row loop ``i`` does not move: the code generator loads its 14 values (7 vectors,
    7 scalars) once before ``i`` (c_invariant). The prior counts those 14 loads saved on
    each of the other 8 rows, for each of the 2 x 3 entries into ``i``; not when ``k1``
    stays a C loop (no unrolling), where ``B`` moves with it."""
    from metaschedule.cost_model.prior import stores as prior_stores
    from metaschedule.target import Target

    target = Target("llvm -mcpu=x86-64-v4 -num-cores=2")
    machine = Machine.of_target(target)
    saved = []
    count = prior_stores.invariant_loads
    monkeypatch.setattr(
        prior_stores, "invariant_loads", lambda *a: saved.append(count(*a)) or saved[-1]
    )
    sch = _serial_row_matmul()
    assert "14 loads invariant in loop i, in registers" in _emitted_c(sch, target)
    hoisted = AnalyticPrior().estimate_cycles(sch.mod, machine)
    assert saved == [pytest.approx(2 * 3 * 8 * 14 / machine.loads_per_cycle)]
    monkeypatch.setattr(c_invariant, "HOIST_INVARIANT_LOADS", False)
    assert AnalyticPrior().estimate_cycles(sch.mod, machine) > hoisted

    saved.clear()
    monkeypatch.setattr(c_invariant, "HOIST_INVARIANT_LOADS", True)
    sch = _serial_row_matmul(unroll=0)
    assert "invariant in loop" not in _emitted_c(sch, target)
    AnalyticPrior().estimate_cycles(sch.mod, machine)
    assert saved == [0.0]


def test_the_prior_hoists_invariant_loads_where_the_code_generator_does(monkeypatch):
    """On random 127 x 511 x 255 matmul schedules, the prior saves loads before the loop
    around a register tile exactly where the generated C makes them there
    (c_invariant), rows made vector code (c_vector.vectorize_outputs) included."""
    from metaschedule.cost_model.prior import register_tiles
    from metaschedule.cost_model.prior import stores as prior_stores

    machine = Machine.of_target(AVX512)
    saved = []
    count = prior_stores.invariant_loads
    monkeypatch.setattr(
        prior_stores, "invariant_loads", lambda *a: saved.append(count(*a)) or saved[-1]
    )
    hoisted = 0
    for sch, code in _wide_matmul_samples():
        saved.clear()
        register_tiles(sch.mod, machine)
        emitted = "loads invariant in loop" in code
        assert any(x > 0 for x in saved) == emitted, str(sch.trace)
        hoisted += emitted
    assert hoisted >= 3


def test_a_tile_over_hoisted_reductions_ranks_above_a_small_tile():
    """SSRSRS tiles ``i2 j2 | k1 | i3 j3``: the code generator hoists ``k1`` and keeps
    ``i2 j2 i3 j3`` (8 rows x 4 vectors) in registers, measured 1.6x faster here than an
    8 x 1 vector tile reloaded every 64 steps; the prior used to see a 2 x 1 tile."""
    from metaschedule.cost_model.prior import register_tiles

    machine = Machine(lanes=16, cores=2)
    wide = _with_decisions(matmul(1024), [[4, 32, 4, 2], [8, 2, 4, 16], [64, 16], 0])
    narrow = _with_decisions(matmul(1024), [[4, 2, 16, 8], [2, 16, 2, 16], [16, 64], 0])
    assert register_tiles(wide.mod, machine) == [32]
    assert register_tiles(narrow.mod, machine) == [8]
    prior = AnalyticPrior()
    assert prior.score_mod(wide.mod, machine) > 1.1 * prior.score_mod(narrow.mod, machine)


def test_rows_sharing_a_cache_set_cost_l2_fetches():
    """A 16-row tile of a matrix 1024 floats wide (rows 4 KiB apart: one L1 set, 8 ways)
    refetches its rows every step; 8 rows, or rows 1040 floats apart, do not."""

    def per_flop(k, rows):
        sch = Schedule(matmul(64, 64, k))
        i, j, r = sch.get_loops(sch.get_block("C"))
        i0, i1 = sch.split(i, [None, rows])
        j0, j1 = sch.split(j, [None, 16])
        sch.reorder(i0, j0, r, i1, j1)
        sch.vectorize(j1)
        cycles = AnalyticPrior().estimate_cycles(sch.mod, Machine(lanes=16))
        return cycles / k

    assert per_flop(1024, 16) > 1.5 * per_flop(1040, 16)
    assert per_flop(1024, 8) < 1.1 * per_flop(1040, 8)


def test_rows_crowding_two_cache_sets_cost_l2_fetches():
    """Rows 6 KiB apart (96 lines: ``gcd(96, 64) = 32``) fall into 2 of the 64 L1 sets:
    a 32-row tile puts 16 lines in each of them (8 ways) and refetches them every step,
    16 rows fit, and rows 97 lines apart spread over every set. (Measured on a 1x1
    convolution whose 28-row tile read rows 14 KiB apart, 2 sets: 111 GFLOPS against 200
    for the same tile along a row.)"""

    def per_flop(k, rows):
        sch = Schedule(matmul(64, 64, k))
        i, j, r = sch.get_loops(sch.get_block("C"))
        i0, i1 = sch.split(i, [None, rows])
        j0, j1 = sch.split(j, [None, 16])
        sch.reorder(i0, j0, r, i1, j1)
        sch.vectorize(j1)
        cycles = AnalyticPrior().estimate_cycles(sch.mod, Machine(lanes=16))
        return cycles / k

    assert per_flop(1536, 32) > 1.5 * per_flop(1552, 32)
    assert per_flop(1536, 16) < 1.1 * per_flop(1552, 16)


def test_a_panel_reused_by_every_row_block_is_loaded_once(monkeypatch):
    """The hand-written matmul (a packed 1024 x 32 panel of B swept by 64 row blocks) is
    bound by its FMAs: its panel stays in L2 across the row blocks, so no memory term
    exceeds the FMA time (the estimate without the share of the smaller terms)."""
    from metaschedule.cost_model.prior import stores as prior_stores
    from metaschedule.target import Target

    monkeypatch.setattr(prior_stores, "PARTIAL_OVERLAP", 0.0)
    from metaschedule.testing.schedules import matmul_schedule

    target = Target("llvm -mcpu=x86-64-v4 -num-cores=2")
    machine = Machine(lanes=16, cores=2)
    sch = Schedule(matmul(1024))
    matmul_schedule(sch, target, block="C")
    fma_bound = 1024**3 / 16 / machine.fma_ports / machine.cores
    assert AnalyticPrior().estimate_cycles(sch.mod, machine) < 1.15 * fma_bound


def test_a_packed_panel_ranks_above_rows_4_kib_apart():
    """Unpacked, the 1024 x 32 panel of B a row block sweeps has its rows 4 KiB apart:
    they crowd a few L2 sets and come from L3 for every row block (measured here: the
    packed hand-written kernel 16% faster per core)."""
    from metaschedule.target import Target
    from metaschedule.testing.schedules import matmul_schedule

    target = Target("llvm -mcpu=x86-64-v4 -num-cores=2")
    machine = Machine(lanes=16, cores=2)
    scores = []
    for pack in (True, False):
        sch = Schedule(matmul(1024))
        matmul_schedule(sch, target, block="C", pack_b=pack)
        scores.append(AnalyticPrior().score_mod(sch.mod, machine))
    assert scores[0] > 1.2 * scores[1]


def test_a_register_tile_beyond_the_register_file_ranks_below_one_that_fits():
    """A sampled SSRSRS matmul schedule whose tile is 12 rows x 4 vectors: the C code
    generator keeps 48 accumulators, more than the 32 vector registers, and the C
    compiler spills the 20 beyond the 28 the operands leave (a reload and a store of
    each at every update). The same work in a 6 x 4 tile (24 accumulators) must rank
    above it."""
    import re

    from metaschedule.codegen.c_codegen import codegen_c
    from metaschedule.cost_model.prior import register_tiles
    from metaschedule.target import Target
    from metaschedule.tir.function import IRModule
    from metaschedule.tir.transform import lower

    target = Target("llvm -mcpu=x86-64-v4 -num-cores=2")
    machine = Machine(lanes=16, cores=2, vector_registers=32)
    j_tiles, k_tiles = [8, 2, 4, 16], [64, 4]
    spilled = _with_decisions(matmul(96, 1024, 256), [[2, 4, 3, 4], j_tiles, k_tiles, 0])
    fits = _with_decisions(matmul(96, 1024, 256), [[2, 8, 3, 2], j_tiles, k_tiles, 0])
    for sch, vectors in ((spilled, 48), (fits, 24)):
        assert register_tiles(sch.mod, machine) == [vectors]
        lowered = IRModule({name: lower(f) for name, f in sch.mod.items()})
        code = codegen_c(lowered, target).code
        assert re.findall(r"kept in (\d+) accumulators of 16 lanes", code) == [str(vectors)]
    prior = AnalyticPrior()
    assert prior.score_mod(fits.mod, machine) > 1.2 * prior.score_mod(spilled.mod, machine)
    # with registers enough for both tiles, the bigger one loses nothing
    roomy = Machine(lanes=16, cores=2, vector_registers=64)
    assert prior.score_mod(spilled.mod, roomy) > 0.8 * prior.score_mod(fits.mod, roomy)


def test_a_split_tile_sweeps_its_operand_panel_once_per_outer_tile_loop():
    """A 1024^3 matmul tile of 32 rows x 8 vectors is split (SPLIT_LARGE_TILES): its 32
    row groups of 4 each run the whole k loop, and read B's 512 KiB panel again each time
    (measured 22 ms). The 8 x 4-vector tile reads a 256 KiB panel per row block (10.5
    ms). The prior used to count the split panel once, as in the loop order before the
    split, and ranked the two alike."""
    zen4 = Machine.of_target(native_target(ZEN4), host=ZEN4)
    split = _with_decisions(matmul(1024), [[8, 1, 32, 4], [4, 2, 8, 16], [1024, 1], 3])
    wide = _with_decisions(matmul(1024), [[4, 32, 4, 2], [8, 2, 4, 16], [1024, 1], 0])
    prior = AnalyticPrior()
    assert prior.score_mod(wide.mod, zen4) > 1.2 * prior.score_mod(split.mod, zen4)


def test_memory_terms_are_not_hidden_behind_the_fma_bound():
    """On a 256-bit datapath a 16-lane FMA takes a cycle: with the largest of the compute,
    L1 and traffic times alone, every sampled 1024^3 matmul schedule was estimated at that
    bound, those measured at 10 ms and at 36 ms alike. Only in part overlapped, the memory
    terms rank an 8-vector tile reloaded every 32 steps of k from rows 4 KiB apart (36 ms)
    below a 16-vector tile over the whole k loop (9.9 ms)."""
    from metaschedule.cost_model import prior as prior_package

    zen4 = Machine.of_target(native_target(ZEN4), host=ZEN4)
    slow = _with_decisions(matmul(1024), [[4, 4, 16, 4], [1, 2, 16, 32], [32, 32], 1])
    fast = _with_decisions(matmul(1024), [[2, 64, 8, 1], [8, 4, 1, 32], [64, 16], 1])
    assert prior_package.PARTIAL_OVERLAP > 0
    prior = AnalyticPrior()
    assert prior.score_mod(fast.mod, zen4) > 1.3 * prior.score_mod(slow.mod, zen4)


# ----------------------------------------------------------------------------- Machine
def test_machine_of_a_zen4_host_runs_16_lanes_in_two_passes():
    zen4 = Machine.of_target(native_target(ZEN4), host=ZEN4)
    assert (zen4.lanes, zen4.cores, zen4.datapath_bits) == (16, 2, 256)
    assert (zen4.fma_ports, zen4.loads_per_cycle) == (1.0, 1.0)
    assert (zen4.l1_bytes, zen4.l1_ways, zen4.l2_bytes, zen4.l2_ways) == (32768, 8, 1 << 20, 8)


def test_machine_of_a_zen5_host_runs_16_lanes_in_one_pass_on_its_caches():
    zen5 = Machine.of_target(native_target(ZEN5), host=ZEN5)
    assert (zen5.lanes, zen5.datapath_bits, zen5.fma_ports, zen5.loads_per_cycle) == (
        16,
        512,
        2.0,
        2.0,
    )
    assert (zen5.l1_bytes, zen5.l1_ways, zen5.l2_bytes, zen5.l2_ways) == (49152, 12, 1 << 20, 16)


def test_machine_of_an_intel_avx512_host_has_a_512_bit_datapath():
    intel = Machine.of_target(native_target(INTEL_AVX512), host=INTEL_AVX512)
    assert (intel.datapath_bits, intel.fma_ports, intel.l2_bytes) == (512, 2.0, 2 << 20)


def test_machine_keeps_the_defaults_where_the_host_tells_nothing():
    from types import SimpleNamespace

    base = Machine()
    bare = SimpleNamespace(kind="cpu", mcpu="native", num_cores=2, vector_lanes=lambda _: 16)
    told = Machine.of_target(bare, host=UNKNOWN)
    assert (told.datapath_bits, told.fma_ports, told.l1_bytes, told.l1_ways) == (
        base.datapath_bits,
        1.0,
        base.l1_bytes,
        base.l1_ways,
    )
    assert Machine.of_target(None, host=ZEN5) == base


def test_machine_of_a_target_other_than_the_host_keeps_the_defaults():
    """The caches of a target other than the host are the defaults; its datapath is its
    CPU's (Zen 4: 256-bit), or the host's for a native target of another machine (built
    with ``-march=native`` here, the code runs on this host's units)."""
    base = Machine()
    for target, datapath in (
        (native_target(ZEN5, mcpu="znver4"), 256),  # another CPU named
        (native_target(ZEN5, l1_cache_bytes=32768), 512),  # native, of another machine
    ):
        machine = Machine.of_target(target, host=ZEN5)
        assert (machine.datapath_bits, machine.l1_bytes, machine.l1_ways) == (
            datapath,
            base.l1_bytes,
            base.l1_ways,
        ), target


def test_machine_of_the_hosts_cpu_named_is_the_hosts():
    """``-mcpu=znver5`` on a Zen 5 (as TVM users write targets) is the host."""
    named = Machine.of_target(native_target(ZEN5, mcpu="znver5"), host=ZEN5)
    assert named == Machine.of_target(native_target(ZEN5), host=ZEN5)
    assert named.datapath_bits == 512


def test_machine_datapath_given_wins_over_the_host():
    assert Machine.of_target(native_target(ZEN4), 512, host=ZEN4).fma_ports == 2.0
    assert Machine.of_target(native_target(ZEN5), 256, host=ZEN5).fma_ports == 1.0


def conv_window(pixels: int, f: int = 32):
    """``pixels`` output pixels of a row x ``f`` channels in registers under the 3x3
    window (ry, rx innermost of the reduction: the code generator writes them out)."""
    sch = Schedule(conv(hw=28 if pixels == 14 else 16, c=16, f=f))
    sch.compute_inline(sch.get_block("PaddedInput"))
    block = sch.get_block("conv2d_nhwc")
    nn, yy, xx, ff, ry, rx, rc = sch.get_loops(block)
    x0, x1 = sch.split(xx, [None, pixels])
    sch.reorder(nn, yy, x0, rc, ry, rx, x1, ff)
    sch.vectorize(ff)
    return sch


def test_a_conv_window_keeps_its_broadcast_input_pixels_in_registers(monkeypatch):
    """Written out step by step (c_accumulate.straight_line), a 3x3 window over 4 pixels
    x 2 vectors broadcasts each of its 3 x 6 input pixels once and keeps it
    (c_accumulate.SHARE_BROADCASTS), instead of once per step that reads it (36): fewer
    loads per multiply-add, a faster estimate (a little: the window is bound by its
    multiply-adds). A window over 14 pixels (28 accumulators) leaves too few registers
    for the values held between steps: its estimate is the per-step one, as with the
    sharing off."""

    machine = Machine(lanes=16, cores=1)
    narrow, wide = conv_window(4).mod, conv_window(14).mod
    kept = AnalyticPrior().score_mod(narrow, machine)
    crowded = AnalyticPrior().score_mod(wide, machine)
    monkeypatch.setattr(c_accumulate, "SHARE_BROADCASTS", False)
    assert kept > 1.01 * AnalyticPrior().score_mod(narrow, machine)
    assert crowded == pytest.approx(AnalyticPrior().score_mod(wide, machine))
