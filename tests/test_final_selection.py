"""select_best(): the final choice re-measures the top candidates, interleaved."""

from __future__ import annotations

import numpy as np
import pytest

from metaschedule import te
from metaschedule.database import MemoryDatabase, TuningRecord
from metaschedule.final_selection import interleaved_order, select_best
from metaschedule.schedule import Schedule
from metaschedule.target import Target
from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner
from metaschedule.tir.function import IRModule
from metaschedule.tir.structural import structural_hash


def workload():
    a = te.placeholder((16, 16), "float32", name="A")
    b = te.compute((16, 16), lambda i, j: a[i, j] * 2.0, name="B")
    return te.create_prim_func([a, b])


def split_schedule(func, factor: int) -> Schedule:
    sch = Schedule(func)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, factor])
    return sch


def test_interleaved_order_rotates_and_reverses():
    assert interleaved_order(3, 0) == [0, 1, 2]
    assert interleaved_order(3, 1) == [2, 1, 0]
    assert interleaved_order(3, 2) == [1, 2, 0]
    assert [interleaved_order(2, r)[0] for r in range(4)] == [0, 1, 1, 0]
    for r in range(6):
        assert sorted(interleaved_order(4, r)) == [0, 1, 2, 3]


def test_remeasurement_picks_the_truly_faster_of_two_swapped_kernels():
    func = workload()
    db = MemoryDatabase()
    wl = db.commit_workload(IRModule({"main": func}))
    slow, fast = split_schedule(func, 2), split_schedule(func, 4)
    # Tuning saw them swapped: the slow kernel had a lucky moment, the fast an unlucky one.
    db.commit_tuning_record(TuningRecord(slow.trace, wl, [1.0e-3], Target("llvm")))
    db.commit_tuning_record(TuningRecord(fast.trace, wl, [3.0e-3], Target("llvm")))
    assert db.get_top_k(wl, 1)[0].trace is slow.trace  # the database believes the luck

    true_secs = {
        f"dummy://{structural_hash(slow.mod)}": 2.0e-3,
        f"dummy://{structural_hash(fast.mod)}": 1.5e-3,
    }
    rng = np.random.default_rng(0)
    order: list[str] = []

    def noisy(path: str) -> list[float]:  # +-20% jitter and an occasional 3x outlier
        order.append(path)
        secs = true_secs[path] * rng.uniform(0.8, 1.2)
        return [secs * (3.0 if rng.random() < 0.15 else 1.0)]

    selection = select_best(
        db, func, "llvm", top_k=5, rounds=7, builder=DummyBuilder(), runner=DummyRunner(noisy)
    )
    assert selection is not None and selection.changed
    assert selection.best.trace is fast.trace
    assert len(selection.round_secs[0]) == 7 and selection.medians[1] < selection.medians[0]
    assert order[0] != order[2]  # interleaved: rounds alternate who runs first
    best = selection.database(db).query_tuning_record(IRModule({"main": func}))
    assert best.trace is fast.trace  # compile_tir through it builds the winner
    assert str(selection.schedule().trace) == str(fast.trace)


def test_failures_lose_and_trivial_cases():
    func = workload()
    db = MemoryDatabase()
    assert select_best(db, func, "llvm", builder=DummyBuilder(), runner=DummyRunner()) is None
    wl = db.commit_workload(IRModule({"main": func}))
    a, b = split_schedule(func, 2), split_schedule(func, 8)
    db.commit_tuning_record(TuningRecord(a.trace, wl, [1e-3], Target("llvm")))
    one = select_best(db, func, "llvm", builder=DummyBuilder(), runner=DummyRunner())
    assert one is not None and one.best.trace is a.trace and not one.changed
    db.commit_tuning_record(TuningRecord(b.trace, wl, [2e-3], Target("llvm")))
    bad = f"dummy://{structural_hash(a.mod)}"

    def fails_on_a(path: str) -> list[float]:
        if path == bad:
            raise RuntimeError("crashed")
        return [5e-3]

    sel = select_best(
        db, func, "llvm", rounds=3, builder=DummyBuilder(), runner=DummyRunner(fails_on_a)
    )
    assert sel.best.trace is b.trace and sel.medians[0] == float("inf")
    with pytest.raises(ValueError, match="top_k >= 1"):
        select_best(db, func, "llvm", top_k=0)


def test_repeated_selections_agree():
    """Ten selections under 25% jitter and outliers pick the same kernel (issue: 9 of 10)."""
    func = workload()
    db = MemoryDatabase()
    wl = db.commit_workload(IRModule({"main": func}))
    schs = [split_schedule(func, f) for f in (2, 4, 8)]
    true_secs = [1.3e-3, 1.0e-3, 1.6e-3]
    for sch, luck in zip(schs, (0.5, 1.5, 1.0)):
        db.commit_tuning_record(TuningRecord(sch.trace, wl, [1e-3 * luck], Target("llvm")))
    by_path = {f"dummy://{structural_hash(s.mod)}": t for s, t in zip(schs, true_secs)}
    winners = []
    for seed in range(10):
        rng = np.random.default_rng(seed)

        def noisy(path: str, rng=rng) -> list[float]:
            secs = by_path[path] * rng.uniform(0.75, 1.25)
            return [secs * (3.0 if rng.random() < 0.1 else 1.0)]

        sel = select_best(
            db, func, "llvm", rounds=5, builder=DummyBuilder(), runner=DummyRunner(noisy)
        )
        winners.append(str(sel.best.trace))
    assert winners.count(str(schs[1].trace)) >= 9
