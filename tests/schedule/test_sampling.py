"""sample_perfect_tile, sample_categorical, copy/seed/fork_seed."""

import math

import pytest

from metaschedule import tir


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_perfect_tile_products(matmul, n):
    for seed in range(15):
        sch = tir.Schedule(matmul, seed=seed)
        i = sch.get_loops(sch.get_block("C"))[0]
        tiles = [sch.get(v) for v in sch.sample_perfect_tile(i, n=n, max_innermost_factor=4)]
        assert len(tiles) == n and math.prod(tiles) == 16
        assert tiles[-1] <= 4 or n == 1


def test_perfect_tile_bad_decision_leaves_schedule(matmul):
    sch = tir.Schedule(matmul)
    i = sch.get_loops(sch.get_block("C"))[0]
    before = len(sch.trace.insts)
    with pytest.raises(tir.ScheduleError, match="not a perfect tiling"):
        sch.sample_perfect_tile(i, n=2, decision=[3, 5])
    assert len(sch.trace.insts) == before


def test_categorical_distribution(matmul):
    counts = [0, 0, 0]
    for seed in range(300):
        sch = tir.Schedule(matmul, seed=seed)
        counts[sch.get(sch.sample_categorical([10, 20, 30], [0.1, 0.0, 0.9])) // 10 - 1] += 1
    assert counts[1] == 0 and counts[2] > counts[0] > 0


def test_categorical_errors(matmul):
    sch = tir.Schedule(matmul)
    with pytest.raises(tir.ScheduleError, match="as many probabilities"):
        sch.sample_categorical([1, 2], [1.0])
    with pytest.raises(tir.ScheduleError, match="out of range"):
        sch.sample_categorical([1, 2], [0.5, 0.5], decision=5)


def test_copy_is_independent(matmul):
    sch = tir.Schedule(matmul, seed=5)
    b = sch.get_block("C")
    other = sch.copy()
    other.annotate(b, "x", 1)  # RVs stay valid in the copy
    assert "x" not in sch.get(b).annotations
    assert "x" in other.get(b).annotations
    a1 = sch.sample_categorical(list(range(100)), [1.0] * 100)
    a2 = other.sample_categorical(list(range(100)), [1.0] * 100)
    assert sch.get(a1) == other.get(a2)  # same random state was copied


def test_fork_seed_gives_new_stream(matmul):
    sch = tir.Schedule(matmul, seed=5)
    s1, s2 = sch.fork_seed(), sch.fork_seed()
    assert s1 != s2
