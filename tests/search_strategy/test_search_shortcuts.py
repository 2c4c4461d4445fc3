"""The search's shortcuts change nothing: the cheap legality check of compute_at gives
the full plan's answer, and a seeded evolutionary search picks the same traces with and
without the shortcuts (``slow_paths``)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from unittest import mock

import pytest

from metaschedule import te
from metaschedule.mutator import MutateComputeLocation, MutateParallel
from metaschedule.mutator.base import Mutator, ReplayMemo, fully_decided
from metaschedule.schedule import ScheduleError, Trace
from metaschedule.schedule.analysis import data_par_loops, loop_iter_type
from metaschedule.schedule.primitives import compute_at_plan
from metaschedule.schedule.primitives import compute_location_candidates as cl
from metaschedule.schedule.state import ScheduleState, child_stmts
from metaschedule.search_strategy import schedule_set as es
from metaschedule.search_strategy.base import TraceReplayer, trace_key
from metaschedule.te import ops
from metaschedule.tir import BlockRealize, For, IterType
from metaschedule.tir.function import IRModule, PrimFunc
from metaschedule.tir.structural import structural_equal, structural_hash
from metaschedule.tune_context import TuneContext

sys.path.insert(0, str(Path(__file__).parent))
from test_replay_cache import _tune, conv_bias_relu, fast_traces  # noqa: E402


def _full_plan_check(state, fname, realize, loop) -> bool:
    """compute_at legality the general way: the whole plan is built."""
    try:
        compute_at_plan.plan_compute_at(state, fname, realize, loop, False, -1, reverse=False)
    except ScheduleError:
        return False
    return True


def _iter_types_one_by_one(chain):
    if not chain:
        return []
    state = ScheduleState(IRModule({"main": PrimFunc([], chain[0])}))
    return [loop_iter_type(state, "main", lp) == IterType.DATA_PAR for lp in chain]


@contextlib.contextmanager
def slow_paths():
    """Switch the search's shortcuts off."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(cl, "can_compute_at", _full_plan_check))
        stack.enter_context(mock.patch.object(cl, "data_par_loops", _iter_types_one_by_one))
        stack.enter_context(
            mock.patch.object(Mutator, "_replay_memo", lambda self: ReplayMemo(max_size=0))
        )
        stack.enter_context(mock.patch.object(es, "schedule_bucket", structural_hash))
        stack.enter_context(mock.patch.object(TraceReplayer, "max_snapshots", 0))
        yield


def matmul_bias_relu():
    a = te.placeholder((12, 16), "float32", "A")
    b = te.placeholder((16, 20), "float32", "B")
    c = te.placeholder((20,), "float32", "C")
    mm = ops.matmul(a, b)
    return te.create_prim_func([a, b, c, ops.relu(ops.bias_add(mm, c, axis=-1))])


def depthwise():
    data = te.placeholder((1, 8, 8, 16), "float32", "A")
    weight = te.placeholder((3, 3, 16, 1), "float32", "W")
    out = ops.depthwise_conv2d_nhwc(data, weight, stride=1, padding=1)
    return te.create_prim_func([data, weight, out])


def _schedules(func, seeds):
    """Replayed schedules of each design space, before and after post-processing (fused
    parallel and vector loops bind iteration variables non-linearly)."""
    ctx = TuneContext(
        func,
        target="llvm",
        space_generator="post-order-apply",
        search_strategy="evolutionary",
        rand_state=1,
    )
    replayer = TraceReplayer(ctx.mod, ctx.space_generator.postprocs)
    for space in ctx.generate_design_space():
        for seed in seeds:
            try:
                sch = replayer.replay(space.trace, seed)
            except ValueError:
                continue
            yield sch
            done = sch.copy()
            if replayer.apply_postprocs(done):
                yield done


def _nodes(stmt):
    stack, out = [stmt], []
    while stack:
        s = stack.pop()
        out.append(s)
        stack.extend(child_stmts(s))
    return out


@pytest.mark.parametrize("make", [conv_bias_relu, matmul_bias_relu, depthwise])
def test_the_cheap_compute_at_check_is_the_full_plan(make):
    answers = {True: 0, False: 0}
    fast = 0
    for sch in _schedules(make(), range(4)):
        state = sch.state
        func = state.func("main")
        nodes = _nodes(func.body)
        loops = [n for n in nodes if isinstance(n, For)]
        realizes = [n for n in nodes if isinstance(n, BlockRealize) and n is not func.body]
        for realize in realizes:
            for loop in loops:
                want = _full_plan_check(state, "main", realize, loop)
                got = compute_at_plan.can_compute_at(state, "main", realize, loop)
                assert got == want, (realize.block.name_hint, loop.loop_var.name, sch.trace)
                answers[want] += 1
                if want and _linear(state, realize, loop):
                    fast += 1
    # both answers were seen, and legal placements through the cheap path
    assert answers[True] > 5 and answers[False] > 5 and fast > 0


@pytest.mark.parametrize("make", [conv_bias_relu, matmul_bias_relu, depthwise])
def test_one_walk_gives_the_iter_type_of_every_loop_of_a_chain(make):
    seen = set()
    for sch in _schedules(make(), range(3)):
        state = sch.state
        func = state.func("main")
        for realize in (n for n in _nodes(func.body) if isinstance(n, BlockRealize)):
            chain = state.loops_above("main", realize)
            want = [loop_iter_type(state, "main", lp) == IterType.DATA_PAR for lp in chain]
            assert data_par_loops(chain) == want
            seen.update(want)
    assert seen == {True, False}


def _linear(state, realize, loop):
    checked = compute_at_plan._plan_checks(state, "main", realize, loop, reverse=False)
    return compute_at_plan._regions_are_linear(
        state, "main", checked.others, loop, checked.exchanged
    )


@pytest.mark.slow
def test_a_seeded_search_picks_the_same_traces_without_the_search_shortcuts(tmp_path):
    fast = list(fast_traces())  # the run test_replay_cache.py compares with, done once
    with slow_paths():
        slow = _tune(tmp_path, "slow")
    assert fast and fast == slow


def _mutated_parents(ctx, n):
    """Replayed schedules of the design spaces (their traces carry every decision)."""
    replayer = TraceReplayer(ctx.mod, ctx.space_generator.postprocs)
    out = []
    for seed in range(n):
        for space in ctx.generate_design_space():
            sch = replayer(space.trace, seed)
            if sch is not None:
                out.append(sch)
    return out


@pytest.mark.parametrize("kind", [MutateComputeLocation, MutateParallel])
def test_the_replay_memo_of_a_mutator_gives_what_a_replay_gives(kind):
    ctx = TuneContext(
        conv_bias_relu(),
        target="llvm",
        space_generator="post-order-apply",
        search_strategy="evolutionary",
        rand_state=2,
    )
    mutator = next(m for m in ctx.space_generator.mutator_probs if isinstance(m, kind))
    parents = _mutated_parents(ctx, 4)
    memo = mutator._replay_memo()
    applied = 0
    for sch in parents:
        for seed in range(3):
            with mock.patch.object(Mutator, "_replay_memo", lambda self: ReplayMemo(max_size=0)):
                want = mutator.apply(sch.trace, seed)
            got = mutator.apply(sch.trace, seed)  # remembered after the first seed
            assert (got is None) == (want is None)
            if got is not None:
                applied += 1
                assert trace_key(got) == trace_key(want)
    assert applied > 0 and memo._items  # the memo was filled and used
    # a trace with another decision is another key: replayed afresh
    calls = []
    trace = parents[0].trace
    memo.get(trace, ctx.mod, "x", lambda: calls.append(1) or "first")
    assert memo.get(trace, ctx.mod, "x", lambda: calls.append(1) or "again") == "first"
    tile = next(i for i in trace.insts if i.kind.name == "SamplePerfectTile")
    other = trace.with_decision(tile, trace.decisions[tile], remove_postproc=True)
    assert memo.get(other, ctx.mod, "x", lambda: calls.append(1) or "other") == "other"
    # another workload, or other inputs: afresh too
    twin = TuneContext(conv_bias_relu(), target="llvm").mod
    assert memo.get(trace, twin, "x", lambda: "twin") == "twin"
    assert memo.get(trace, ctx.mod, "y", lambda: "y") == "y"
    # a trace with a sampling instruction left undecided is never remembered
    undecided = Trace(trace.insts, {i: d for i, d in trace.decisions.items() if i is not tile})
    assert not fully_decided(undecided) and fully_decided(trace)
    memo.get(undecided, ctx.mod, "x", lambda: "u1")
    assert memo.get(undecided, ctx.mod, "x", lambda: "u2") == "u2"


def test_structurally_equal_schedules_share_a_bucket():
    ctx = TuneContext(
        conv_bias_relu(),
        target="llvm",
        space_generator="post-order-apply",
        search_strategy="evolutionary",
        rand_state=4,
    )
    schs = _mutated_parents(ctx, 6)
    # the same traces replayed again: new objects (new loop variables), equal structure
    replayer = TraceReplayer(ctx.mod, ctx.space_generator.postprocs)
    again = [replayer(sch.trace, 123) for sch in schs[:6]]
    pool = schs + [a for a in again if a is not None]
    pairs = equal = 0
    for i, a in enumerate(pool):
        for b in pool[i + 1 :]:
            pairs += 1
            if structural_equal(a.mod, b.mod, map_free_vars=True):
                equal += 1
                assert es.schedule_bucket(a.mod) == es.schedule_bucket(b.mod)
    assert equal >= 6
    # and different schedules mostly get different buckets
    buckets = {es.schedule_bucket(s.mod) for s in schs}
    hashes = {structural_hash(s.mod) for s in schs}
    assert len(buckets) >= len(hashes) - 2
    # a changed annotation, loop extent or block name is another bucket
    sch = schs[0].copy()
    loop = sch.get_loops(sch.get_block("conv2d_nhwc"))[-1]
    before = es.schedule_bucket(sch.mod)
    sch.annotate(loop, "pragma_auto_unroll_max_step", 7)
    assert es.schedule_bucket(sch.mod) != before


def test_replays_resumed_from_snapshots_are_replays_from_scratch():
    ctx = TuneContext(
        conv_bias_relu(),
        target="llvm",
        space_generator="post-order-apply",
        search_strategy="evolutionary",
        rand_state=5,
    )
    parents = _mutated_parents(ctx, 2)
    mutators = list(ctx.space_generator.mutator_probs)
    replayer = TraceReplayer(ctx.mod, ctx.space_generator.postprocs)
    resumed = 0
    for n, parent in enumerate(parents * 3):
        for mutator in mutators:
            try:
                trace = mutator.apply(parent.trace, n)
            except ValueError:
                continue
            if trace is None:
                continue
            got = replayer(trace, 7)
            with mock.patch.object(TraceReplayer, "max_snapshots", 0):
                want = TraceReplayer(ctx.mod, ctx.space_generator.postprocs)(trace, 7)
            assert (got is None) == (want is None)
            if got is not None:
                assert structural_equal(got.mod, want.mod)
                assert str(got.trace) == str(want.trace)
            resumed += 1
    assert resumed > 6 and replayer._snapshots and replayer.snapshot_hits > 3
    # a trace with a sampling instruction left undecided keeps no snapshot past it
    space = ctx.generate_design_space()[0].trace
    fresh = TraceReplayer(ctx.mod, ctx.space_generator.postprocs)
    fresh(Trace(space.insts, {}), 1)
    assert not fresh._snapshots
    fresh(space, 1)  # the design space's own decisions: kept
    assert fresh._snapshots
