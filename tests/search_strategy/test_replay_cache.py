"""The search's replay shortcuts change nothing: the kept trace prefixes of
``TraceReplayer``, the remembered shapes of index maps, the point relaxation of
``relax_linear`` and the untracked structural hashing give what the general paths give,
and a seeded evolutionary search picks the same traces with and without them."""

from __future__ import annotations

import functools
import sys
import tempfile
from pathlib import Path
from unittest import mock

import pytest

from metaschedule import te
from metaschedule.database import MemoryDatabase
from metaschedule.schedule import Schedule, index_map
from metaschedule.schedule import analysis as an
from metaschedule.search_strategy import EvolutionarySearch
from metaschedule.search_strategy.base import TraceReplayer, trace_key
from metaschedule.te import ops
from metaschedule.testing import op_matmul
from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner
from metaschedule.tir import Buffer, BufferRegion, Range, Var
from metaschedule.tir import structural as st
from metaschedule.tir.expr import const
from metaschedule.tir.structural import structural_equal
from metaschedule.tune import tune_tir
from metaschedule.tune_context import TuneContext

sys.path.insert(0, str(Path(__file__).parents[1] / "schedule"))
from schedule_shortcuts import general_paths  # noqa: E402


def conv_bias_relu():
    """A small cbr: padded conv2d (a layout-free weight) + bias + relu."""
    data = te.placeholder((1, 6, 6, 8), "float32", "A")
    weight = te.placeholder((3, 3, 8, 8), "float32", "B")
    bias = te.placeholder((8,), "float32", "C")
    conv = ops.conv2d_nhwc(data, weight, stride=1, padding=1)
    out = ops.relu(ops.bias_add(conv, bias, axis=-1))
    return te.create_prim_func([data, weight, bias, out])


def context(func):
    return TuneContext(
        func,
        target="llvm",
        space_generator="post-order-apply",
        search_strategy="evolutionary",
        rand_state=3,
    )


def replay_whole(ctx, trace, seed):
    """The general path: a fresh schedule, the whole trace, then the postprocessors."""
    sch = Schedule(ctx.mod, seed=seed, error_render_level="none")
    trace.apply_to_schedule(sch, remove_postproc=True)
    return (
        sch if TraceReplayer(ctx.mod, ctx.space_generator.postprocs).apply_postprocs(sch) else None
    )


def test_replays_from_a_kept_prefix_are_replays_from_scratch():
    ctx = context(conv_bias_relu())
    spaces = ctx.generate_design_space()
    replayer = TraceReplayer(ctx.mod, ctx.space_generator.postprocs)
    made = []
    for seed in range(6):
        for space in spaces:
            got = replayer(space.trace, seed)
            want = replay_whole(ctx, space.trace, seed)
            assert (got is None) == (want is None)
            if got is None:
                continue
            assert structural_equal(got.mod, want.mod)
            assert str(got.trace) == str(want.trace)
            made.append(got)
    assert made and replayer._prefixes  # the prefixes were kept and used
    # a trace of a replayed schedule (its own instructions, with decisions) replays too,
    # and so does one that changes a decision of the kept prefix's schedule
    for sch in made[:4]:
        again = replayer(sch.trace, 99)
        assert structural_equal(again.mod, sch.mod)
        assert trace_key(again.trace) == trace_key(sch.trace)


def test_a_failing_prefix_is_counted_each_time():
    ctx = context(conv_bias_relu())
    space = ctx.generate_design_space()[0]
    other = context(op_matmul(8, 8, 8))
    replayer = TraceReplayer(other.mod, [])
    assert replayer(space.trace, 0) is None
    assert replayer(space.trace, 1) is None
    assert sum(replayer.failures.values()) == 2


def test_new_shape_remembers_by_structure_only():
    w = Buffer("W", (const(4), const(6)), "float32")
    maps = [index_map.IndexMap.from_func(lambda i, j: (j // 3, i, j % 3)) for _ in range(2)]
    index_map._SHAPES.clear()
    first = index_map.new_shape(w, maps[0])
    assert len(index_map._SHAPES) == 1
    second = index_map.new_shape(w, maps[1])  # other variables, same map: remembered
    assert second is first and len(index_map._SHAPES) == 1
    assert [int(s) for s in first] == [2, 4, 3]
    assert [int(s) for s in index_map._new_shape(w, maps[1])] == [2, 4, 3]
    # a map that is not bijective is rejected every time, never remembered
    bad = index_map.IndexMap.from_func(lambda i, j: (i, j // 2))
    for _ in range(2):
        with pytest.raises(index_map.IndexMapError):
            index_map.new_shape(w, bad)
    # a free variable in the map: not remembered
    n = Var("n", "int32")
    free = index_map.IndexMap.from_func(lambda i, j: (i + n * 0, j))
    assert index_map._shape_key(w, free) is None


def test_relax_linear_over_single_points_is_what_int_set_gives():
    i, j, u, v = (Var(x, "int32") for x in "ijuv")
    ana = an.analyzer_for_loops([])
    ana.bind(u, Range(0, 4))
    ana.bind(v, Range(0, 3))
    p = Buffer("P", (const(16), const(16)), "float32")
    region = BufferRegion(p, (Range(i * 2 - 1, const(1)), Range(j + i, const(3))))
    dom = {i: Range(u * 3 + v, const(1)), j: Range(const(0), const(4))}
    fast = an.relax_region([region], None, dom, ana)
    with general_paths():
        slow = an.relax_region([region], None, dom, ana)
    for a, b in zip(fast[0].region, slow[0].region):
        assert structural_equal(a.min, b.min) and structural_equal(a.extent, b.extent)
    # a point whose value is relaxed itself is left to int_set
    dep = {i: Range(j, const(1)), j: Range(const(0), const(4))}
    fast = an.relax_region([region], None, dep, ana)
    with general_paths():
        slow = an.relax_region([region], None, dep, ana)
    for a, b in zip(fast[0].region, slow[0].region):
        assert structural_equal(a.min, b.min) and structural_equal(a.extent, b.extent)


def test_untracked_tokens_are_the_tracked_ones():
    ctx = context(conv_bias_relu())
    sch = TraceReplayer(ctx.mod, ctx.space_generator.postprocs)(
        ctx.generate_design_space()[0].trace, 5
    )
    for free_by_identity in (False, True):
        fast = st._Canon(free_by_identity, track=False).run(sch.mod).tokens
        slow = st._Canon(free_by_identity, track=True).run(sch.mod).tokens
        assert fast == slow


def _tune(tmp_path, name):
    db = tune_tir(
        conv_bias_relu(),
        "llvm",
        str(tmp_path / name),
        12,
        num_trials_per_iter=6,
        builder=DummyBuilder(),
        runner=DummyRunner(),
        seed=7,
        database=MemoryDatabase(),
        strategy=EvolutionarySearch(population_size=12, init_min_unmeasured=4, genetic_num_iters=2),
    )
    return [str(r.trace) for r in db.get_all_tuning_records()]


@functools.cache
def fast_traces() -> tuple[str, ...]:
    """The traces the seeded search picks with every shortcut on: tuned once, for both
    tests that tune again with shortcuts off (here and in test_search_shortcuts.py)."""
    with tempfile.TemporaryDirectory() as tmp:
        return tuple(_tune(Path(tmp), "fast"))


@pytest.mark.slow
def test_a_seeded_search_picks_the_same_traces_without_the_shortcuts(tmp_path):
    fast = list(fast_traces())
    with (
        general_paths(),
        mock.patch.object(TraceReplayer, "max_prefixes", 0),
        mock.patch.object(index_map, "_shape_key", lambda buf, imap: None),
    ):
        slow = _tune(tmp_path, "slow")
    assert fast and fast == slow
