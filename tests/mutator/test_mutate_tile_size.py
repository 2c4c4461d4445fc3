"""MutateTileSize: moves a factor between tiles, keeping the product and the innermost bound."""

import math

import numpy as np

from metaschedule.mutator import MutateTileSize
from metaschedule.schedule import Schedule
from metaschedule.testing.tuning_records import matmul
from metaschedule.tir.structural import structural_equal


def tiled(func, seed=0, max_innermost=4):
    sch = Schedule(func, seed=seed)
    i, j, _k = sch.get_loops(sch.get_block("C"))
    sch.split(i, sch.sample_perfect_tile(i, n=4, max_innermost_factor=max_innermost))
    sch.split(j, sch.sample_perfect_tile(j, n=3, max_innermost_factor=max_innermost))
    sch.enter_postproc()
    return sch


def tile_decisions(trace):
    return [trace.decisions[i] for i in trace.insts if i.kind.name == "SamplePerfectTile"]


def test_mutations_keep_products_and_bounds_and_replay():
    func = matmul(16)
    rng = np.random.default_rng(0)
    moved_into = set()
    for seed in range(12):
        sch = tiled(func, seed)
        old = tile_decisions(sch.trace)
        for _ in range(3):
            new_trace = MutateTileSize().apply(sch.trace, rng)
            assert new_trace is not None
            assert not any(i.kind.is_postproc_marker for i in new_trace.insts)
            new = tile_decisions(new_trace)
            changed = [k for k in range(len(old)) if new[k] != old[k]]
            assert len(changed) == 1
            k = changed[0]
            assert math.prod(new[k]) == math.prod(old[k]) == 16
            assert new[k][-1] <= 4  # max_innermost_factor
            diff = [p for p in range(len(new[k])) if new[k][p] != old[k][p]]
            assert len(diff) == 2  # one factor moved from one position to another
            moved_into.add((k, next(p for p in diff if new[k][p] > old[k][p])))
            replayed = Schedule(func, seed=1)
            new_trace.apply_to_schedule(replayed, remove_postproc=True)
            assert tile_decisions(replayed.trace) == new
            assert not structural_equal(replayed.mod, sch.mod)
    assert moved_into >= {(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2)}


def test_innermost_bound_is_respected_when_it_is_full():
    sch = Schedule(matmul(8), seed=0)
    i = sch.get_loops(sch.get_block("C"))[0]
    sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=2, decision=[4, 2]))
    rng = np.random.default_rng(3)
    results = {tuple(tile_decisions(MutateTileSize().apply(sch.trace, rng))[0]) for _ in range(20)}
    assert results == {(8, 1)}  # 2 can only move out; nothing may move in


def test_nothing_to_mutate_gives_none():
    sch = Schedule(matmul(8), seed=0)
    i, _j, _k = sch.get_loops(sch.get_block("C"))
    sch.split(i, [2, 4])
    assert MutateTileSize().apply(sch.trace, 0) is None
    one = Schedule(matmul(8), seed=0)
    i = one.get_loops(one.get_block("C"))[0]
    one.sample_perfect_tile(i, n=1)  # a single factor cannot move
    assert MutateTileSize().apply(one.trace, 0) is None


def test_cooperative_fetch_width_is_mutated_too():
    sch = Schedule(matmul(8), seed=0)
    v = sch.sample_categorical([1, 2, 4], [0.2, 0.3, 0.5], decision=0)
    sch.annotate(sch.get_block("C"), "meta_schedule.cooperative_fetch", v)
    new = MutateTileSize().apply(sch.trace, np.random.default_rng(0))
    sample = next(i for i in new.insts if i.kind.name == "SampleCategorical")
    assert new.decisions[sample] in (1, 2)


def test_same_seed_same_mutation():
    sch = tiled(matmul(16), seed=5)
    a = MutateTileSize().apply(sch.trace, 42)
    b = MutateTileSize().apply(sch.trace, 42)
    assert tile_decisions(a) == tile_decisions(b)
