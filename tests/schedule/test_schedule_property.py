"""Random legal schedules keep what a function computes, and their traces replay.

A schedule is built from a random sequence of *moves*. A move looks at the current IR,
picks a legal way to apply one primitive (or does nothing when there is none) and
applies it. To test more primitives, write a move and add it to ``MOVES``; every
workload then runs sequences that mix it with the others.

For each random schedule we check that
* the module is well formed (``verify_well_formed``);
* the numpy interpreter gives the same numbers as the unscheduled function;
* replaying the trace from its JSON on a fresh schedule gives a structurally equal module,
  and so does replaying it with the replay shortcuts switched off (``schedule_shortcuts``);
* every block's affine-binding verdict (quick check or memo) is the full detection's;
* a few schedules also build and run as native code (once ``codegen`` exists).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from schedule_shortcuts import general_paths

from metaschedule import te, tir
from metaschedule.codegen import build
from metaschedule.schedule import Trace
from metaschedule.schedule.affine import has_affine_binding
from metaschedule.schedule.analysis import loop_doms
from metaschedule.schedule.error import ScheduleError
from metaschedule.schedule.primitives.compute_location import compute_location_candidates
from metaschedule.testing import op_matmul
from metaschedule.tir import BlockRealize, ForKind, IntImm, IterType
from metaschedule.tir.arith.iter_map import is_affine_binding
from metaschedule.tir.functor import collect_vars
from metaschedule.tir.interpreter import interpret
from metaschedule.tir.structural import structural_equal
from metaschedule.tir.verify import verify_well_formed

# ----------------------------------------------------------------------------- workloads


def conv2d():
    data = te.placeholder((1, 5, 5, 3), "float32", "data")
    kernel = te.placeholder((3, 3, 3, 4), "float32", "kernel")
    return te.create_prim_func([data, kernel, te.ops.conv2d_nhwc(data, kernel, padding=1)])


def softmax():
    x = te.placeholder((4, 6), "float32", "x")
    return te.create_prim_func([x, te.ops.softmax(x)])


def conv_bias_relu():
    data = te.placeholder((1, 4, 4, 2), "float32", "data")
    kernel = te.placeholder((3, 3, 2, 4), "float32", "kernel")
    bias = te.placeholder((4,), "float32", "bias")
    conv = te.ops.conv2d_nhwc(data, kernel, padding=1)
    out = te.ops.relu(te.ops.bias_add(conv, bias))
    return te.create_prim_func([data, kernel, bias, out])


def max_pool():
    x = te.placeholder((1, 7, 7, 3), "float32", "x")
    return te.create_prim_func([x, te.ops.max_pool2d(x, 3, 2, padding=1)])


WORKLOADS: dict[str, Callable] = {
    "matmul": lambda: op_matmul(8, 6, 4),
    "conv2d": conv2d,
    "softmax": softmax,
    "conv_bias_relu": conv_bias_relu,
    "max_pool": max_pool,
}
_FUNCS: dict[str, object] = {}


def workload(name: str):
    if name not in _FUNCS:
        _FUNCS[name] = WORKLOADS[name]()
    return _FUNCS[name]


# ----------------------------------------------------------------------------- IR queries


def block_names(sch) -> list[str]:
    """Names of the schedulable (non-root) blocks of ``main``, in a fixed order."""
    return sorted(n for n in sch.state.index("main").blocks if n != "root")


def carries_reduction(sch, loop) -> bool:
    """The loop's variable appears in the binding of a reduction iter var below it."""
    node = sch.get(loop)
    for realize in sch.state.child_block_realizes(node):
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if iv.iter_type is not IterType.DATA_PAR and node.loop_var in collect_vars(value):
                return True
    return False


def mixes_spatial_and_reduction(sch, loop) -> bool:
    """The loop feeds both a data-parallel and a reduction iter var of a reduction block."""
    var = sch.get(loop).loop_var
    for realize in sch.state.child_block_realizes(sch.get(loop)):
        kinds = {
            iv.iter_type
            for iv, value in zip(realize.block.iter_vars, realize.iter_values)
            if var in collect_vars(value)
        }
        if {IterType.DATA_PAR, IterType.COMM_REDUCE} <= kinds:
            return True
    return False


def affine_below(sch, loop) -> bool:
    """Every block below ``loop`` has affine bindings (reorder and, in these random
    schedules, vectorize need it; e.g. ``yy + ax0`` after a compute_at with a halo is not;
    parallel does not, as in TVM)."""
    node = sch.get(loop)
    return all(
        has_affine_binding(sch.state, "main", r) for r in sch.state.child_block_realizes(node)
    )


def nested_runs(sch, loops) -> list[list]:
    """Maximal runs of ``loops`` (outermost first) where each loop is the body of the previous."""
    runs = [[loops[0]]] if loops else []
    for outer, inner in itertools.pairwise(loops):
        if sch.get(outer).body is sch.get(inner):
            runs[-1].append(inner)
        else:
            runs.append([inner])
    return runs


def has_parallel_around(sch, loop) -> bool:
    """A parallel loop encloses ``loop`` or lies below it."""
    node = sch.get(loop)
    above = sch.state.loops_above("main", node)
    below = []

    def walk(s):
        if isinstance(s, BlockRealize):
            return
        if hasattr(s, "kind"):
            below.append(s)
        for c in getattr(s, "seq", None) or ([s.body] if hasattr(s, "body") else []):
            walk(c)

    walk(node.body)
    return any(lp.kind is ForKind.PARALLEL for lp in above + below)


# ----------------------------------------------------------------------------- moves


@dataclass(frozen=True)
class Move:
    """One kind of random schedule step: ``apply(data, sch)`` draws its choices from ``data``."""

    name: str
    apply: Callable[[st.DataObject, tir.Schedule], None]


def _pick_block_loops(data, sch):
    block = sch.get_block(data.draw(st.sampled_from(block_names(sch)), label="block"))
    return block, sch.get_loops(block)


def move_tile(data, sch):
    _, loops = _pick_block_loops(data, sch)
    loops = [lp for lp in loops if isinstance(sch.get(lp).extent, IntImm)]
    if not loops:
        return
    loop = data.draw(st.sampled_from(loops), label="loop")
    n = data.draw(st.integers(2, 3), label="n")
    tiles = sch.sample_perfect_tile(loop, n=n, max_innermost_factor=4)
    sch.split(loop, tiles)


def move_split(data, sch):
    _, loops = _pick_block_loops(data, sch)
    loop = data.draw(st.sampled_from(loops), label="loop")
    extent = sch.get(loop).extent.value
    factor = data.draw(st.integers(1, extent + 1), label="factor")
    inner_first = data.draw(st.booleans(), label="infer_outer")
    factors = [None, factor] if inner_first else [factor, None]
    sch.split(loop, factors, preserve_unit_iters=data.draw(st.booleans(), label="preserve"))


def move_fuse(data, sch):
    _, loops = _pick_block_loops(data, sch)
    runs = [r for r in nested_runs(sch, loops) if len(r) >= 2]
    if not runs:
        return
    run = data.draw(st.sampled_from(runs), label="run")
    lo = data.draw(st.integers(0, len(run) - 2), label="lo")
    hi = data.draw(st.integers(lo + 2, len(run)), label="hi")
    sch.fuse(*run[lo:hi], preserve_unit_iters=data.draw(st.booleans(), label="preserve"))


def move_reorder(data, sch):
    _, loops = _pick_block_loops(data, sch)
    runs = [r for r in nested_runs(sch, loops) if len(r) >= 2]
    if not runs:
        return
    run = data.draw(st.sampled_from(runs), label="run")
    movable = [lp for lp in run if not mixes_spatial_and_reduction(sch, lp)]
    if len(movable) < 2 or not affine_below(sch, run[0]):
        return
    chosen = data.draw(
        st.lists(st.sampled_from(movable), min_size=2, max_size=len(movable), unique_by=id),
        label="loops",
    )
    sch.reorder(*chosen)


def move_loop_kind(data, sch):
    _, loops = _pick_block_loops(data, sch)
    serial = [lp for lp in loops if sch.get(lp).kind is ForKind.SERIAL]
    if not serial:
        return
    loop = data.draw(st.sampled_from(serial), label="loop")
    kind = data.draw(st.sampled_from(["parallel", "vectorize", "unroll"]), label="kind")
    if kind == "unroll":
        sch.unroll(loop)
    elif carries_reduction(sch, loop) or (kind == "vectorize" and not affine_below(sch, loop)):
        return
    elif kind == "parallel" and not has_parallel_around(sch, loop):
        sch.parallel(loop)
    elif kind == "vectorize" and isinstance(sch.get(loop).body, BlockRealize):
        sch.vectorize(loop)  # innermost loops only, as the code generators expect


def move_annotate(data, sch):
    block, loops = _pick_block_loops(data, sch)
    target = data.draw(st.sampled_from([block, *loops]), label="target")
    value = sch.sample_categorical([0, 16, 64], [0.3, 0.3, 0.4])
    sch.annotate(target, "pragma_auto_unroll_max_step", value)


def move_add_unit_loop(data, sch):
    block, loops = _pick_block_loops(data, sch)
    sch.add_unit_loop(data.draw(st.sampled_from([block, *loops]), label="target"))


# compute location moves: compute_at, sample_compute_location, reverse_compute_at, inlining


def _not_under_vectorized(sch, loop) -> bool:
    """Code generation expects vectorized loops to be innermost: do not nest blocks there."""
    node = sch.get(loop)
    chain = [*sch.state.loops_above("main", node), node]
    return all(lp.kind is not ForKind.VECTORIZED for lp in chain)


def _pick_block(data, sch):
    return sch.get_block(data.draw(st.sampled_from(block_names(sch)), label="block"))


def move_compute_at(data, sch):
    block = _pick_block(data, sch)
    realize = sch.state.block_realize("main", sch.get(block).name_hint)
    depths = [d for d, _ in compute_location_candidates(sch.state, "main", realize) if d >= 0]
    if not depths:
        return
    loops = sch.get_loops(sch.get_consumers(block)[0])
    loop = loops[data.draw(st.sampled_from(depths), label="depth")]
    if _not_under_vectorized(sch, loop):
        sch.compute_at(block, loop, preserve_unit_loops=data.draw(st.booleans(), label="unit"))


def move_sample_compute_location(data, sch):
    block = _pick_block(data, sch)
    loc = sch.sample_compute_location(block)
    if sch.get(loc) in ("root", "inline") or _not_under_vectorized(sch, loc):
        sch.compute_at(block, loc)


def _attempt(sch, name, fn):
    """Apply ``fn``; a ScheduleError (an illegal choice) must leave ``sch`` unchanged."""
    mod, trace = sch.mod, sch.trace
    try:
        fn()
    except ScheduleError as err:
        event(f"{name}: rejected ({type(err).__name__})")
        assert sch.mod is mod and sch.trace is trace


def move_reverse_compute_at(data, sch):
    block = _pick_block(data, sch)
    producers = sch.get_producers(block)
    if not producers:
        return
    loops = sch.get_loops(data.draw(st.sampled_from(producers), label="producer"))
    loop = data.draw(st.sampled_from(loops), label="loop")
    if _not_under_vectorized(sch, loop):
        unit = data.draw(st.booleans(), label="unit")
        _attempt(
            sch,
            "reverse_compute_at",
            lambda: sch.reverse_compute_at(block, loop, preserve_unit_loops=unit),
        )


def move_inline(data, sch):
    block = _pick_block(data, sch)
    if data.draw(st.booleans(), label="reverse"):
        _attempt(sch, "reverse_compute_inline", lambda: sch.reverse_compute_inline(block))
    else:
        _attempt(sch, "compute_inline", lambda: sch.compute_inline(block))


MOVES: list[Move] = [
    Move("tile", move_tile),
    Move("split", move_split),
    Move("fuse", move_fuse),
    Move("reorder", move_reorder),
    Move("loop_kind", move_loop_kind),
    Move("annotate", move_annotate),
    Move("add_unit_loop", move_add_unit_loop),
    Move("compute_at", move_compute_at),
    Move("sample_compute_location", move_sample_compute_location),
    Move("reverse_compute_at", move_reverse_compute_at),
    Move("inline", move_inline),
]


def random_schedule(data, func, max_moves: int = 6) -> tir.Schedule:
    sch = tir.Schedule(func, seed=data.draw(st.integers(0, 2**16), label="seed"))
    for _ in range(data.draw(st.integers(1, max_moves), label="n_moves")):
        move = data.draw(st.sampled_from(MOVES), label="move")
        mod = sch.mod
        move.apply(data, sch)  # legal by construction: any ScheduleError is a bug
        event(f"move {move.name}" + ("" if sch.mod is mod else " changed the IR"))
    return sch


# ----------------------------------------------------------------------------- checks


def inputs_for(func, seed=0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(p.static_shape()).astype(p.dtype) for p in func.params]


def outputs(run, func) -> np.ndarray:
    arrays = inputs_for(func)
    run(*arrays)
    return arrays[-1]


_EXPECTED: dict[str, np.ndarray] = {}


def expected(name: str) -> np.ndarray:
    if name not in _EXPECTED:
        func = workload(name)
        _EXPECTED[name] = outputs(lambda *a: interpret(func, *a), func)
    return _EXPECTED[name]


def check_replay(sch, func) -> None:
    trace = Trace.from_json(json.loads(json.dumps(sch.trace.as_json())))
    fresh = tir.Schedule(func)
    trace.apply_to_schedule(fresh, remove_postproc=False)
    assert structural_equal(fresh.mod, sch.mod), (
        f"replay differs\ntrace:\n{sch.trace}\n{sch.mod}\n!=\n{fresh.mod}"
    )
    with general_paths():
        general = tir.Schedule(func)
        trace.apply_to_schedule(general, remove_postproc=False)
    assert structural_equal(general.mod, sch.mod), (
        f"the shortcuts changed the result\ntrace:\n{sch.trace}\n{sch.mod}\n!=\n{general.mod}"
    )


def check_affine_verdicts(sch) -> None:
    """The memoised / quick affine verdicts are those of the full detection."""
    for name in block_names(sch):
        realize = sch.state.block_realize("main", name)
        dom = loop_doms(sch.state.loops_above("main", realize))
        fresh = not realize.iter_values or is_affine_binding(
            realize.iter_values, dom, realize.predicate
        )
        assert has_affine_binding(sch.state, "main", realize) == fresh, (
            f"block {name!r}: {[str(v) for v in realize.iter_values]}\n{sch.trace}"
        )


@pytest.mark.parametrize("name", list(WORKLOADS))
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_schedule_keeps_numbers_and_replays(name, data):
    func = workload(name)
    sch = random_schedule(data, func)
    verify_well_formed(sch.mod)
    got = outputs(lambda *a: interpret(sch.mod["main"], *a), func)
    np.testing.assert_allclose(
        got, expected(name), rtol=1e-4, atol=1e-5, err_msg=f"trace:\n{sch.trace}\n{sch.mod}"
    )
    check_affine_verdicts(sch)
    check_replay(sch, func)


@pytest.mark.compiler
@pytest.mark.parametrize("name", ["matmul", "conv_bias_relu"])
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_schedule_builds(name, data):
    func = workload(name)
    sch = random_schedule(data, func)
    lib = build(sch.mod, "cpu")
    np.testing.assert_allclose(
        outputs(lib, func),
        expected(name),
        rtol=1e-4,
        atol=1e-5,
        err_msg=f"trace:\n{sch.trace}\n{sch.mod}",
    )


# ----------------------------------------------------------------------------- parallel anywhere


def parallelizable(sch, loop) -> bool:
    """What TVM's ``parallel`` asks: a serial loop that reaches the blocks below only
    through data-parallel iter vars (plus our own: no parallel loop around or below it)."""
    return (
        sch.get(loop).kind is ForKind.SERIAL
        and not carries_reduction(sch, loop)
        and not has_parallel_around(sch, loop)
    )


@pytest.mark.parametrize("name", ["conv2d", "conv_bias_relu", "max_pool", "softmax"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_schedule_parallel_at_any_outer_loop(name, data):
    """Padded convolutions, pooling and softmax: after a random legal schedule (padding
    moved under tile loops included), any loop reached only through data-parallel iter
    vars can be parallelized, affine bindings or not, and the numbers stay the same."""
    func = workload(name)
    sch = random_schedule(data, func)
    block = _pick_block(data, sch)
    loops = [lp for lp in sch.get_loops(block) if parallelizable(sch, lp)]
    if not loops:
        return
    loop = data.draw(st.sampled_from(loops), label="parallel loop")
    event("parallel over non-affine bindings" if not affine_below(sch, loop) else "affine")
    sch.parallel(loop)  # legal by construction: a ScheduleError is a bug
    verify_well_formed(sch.mod)
    got = outputs(lambda *a: interpret(sch.mod["main"], *a), func)
    np.testing.assert_allclose(
        got, expected(name), rtol=1e-4, atol=1e-5, err_msg=f"trace:\n{sch.trace}\n{sch.mod}"
    )
    check_replay(sch, func)
