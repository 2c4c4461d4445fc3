"""The shared primitive check (metaschedule.testing.primitive_check) catches what it should."""

import pytest

from metaschedule import te, tir
from metaschedule.testing.primitive_check import check_primitives, replay_json, replay_python
from metaschedule.tir.structural import structural_equal


def scale(factor):
    A = te.placeholder((8, 8), "float32", "A")
    B = te.compute((8, 8), lambda i, j: A[i, j] * factor, name="B")
    return te.create_prim_func([A, B])


def tiled(func):
    sch = tir.Schedule(func, seed=0)
    i, _ = sch.get_loops(sch.get_block("B"))
    outer, _ = sch.split(i, sch.sample_perfect_tile(i, n=2))
    sch.parallel(outer)
    return sch


def test_a_correct_schedule_passes_and_both_replays_agree():
    func = scale(2.0)
    sch = tiled(func)
    check_primitives(sch, func)
    assert structural_equal(replay_json(sch, func).mod, replay_python(sch, func).mod)


def test_other_numbers_fail():
    with pytest.raises(AssertionError, match="differs from the unscheduled run"):
        check_primitives(tiled(scale(2.0)), scale(3.0))
