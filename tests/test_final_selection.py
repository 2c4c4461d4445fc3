"""The final choice re-measures the top candidates, interleaved: select_best() alone, and
wired into tuning (tune_tir's final_selection_top_k) with the database's rule for a
schedule measured more than once."""

from __future__ import annotations

import json

import numpy as np
import pytest

from metaschedule import final_selection, te
from metaschedule.database import JSONDatabase, MemoryDatabase, TuningRecord
from metaschedule.database.base import latest_per_schedule, measurement_key
from metaschedule.final_selection import (
    CLEAR_GAIN,
    MIN_GAIN,
    clearly_faster,
    finalize,
    interleaved_order,
    is_selected,
    select_best,
)
from metaschedule.schedule import Schedule
from metaschedule.target import Target
from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner, dummy_run_secs
from metaschedule.tir.function import IRModule
from metaschedule.tir.structural import structural_hash
from metaschedule.tir_integration import compile_tir, tune_tir


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
    assert len(selection.round_secs[0]) == 14  # a change of choice is confirmed: 7 more
    assert selection.medians[1] < selection.medians[0]
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


def test_clearly_faster_needs_a_gain_and_evidence():
    # faster in every one of 5 rounds by 3%: a sign test gives 1/32
    assert clearly_faster([0.97] * 5, [1.0] * 5)
    # faster by less than MIN_GAIN, however often: a tie
    assert not clearly_faster([1.0 - MIN_GAIN / 2] * 9, [1.0] * 9)
    # 3% ahead in the median but behind in two of five rounds: not clear
    assert not clearly_faster([0.97, 0.96, 0.97, 1.02, 1.03], [1.0] * 5)
    # the same mixed rounds with a gain beyond CLEAR_GAIN in the median: clear
    g = 1 - 2 * CLEAR_GAIN
    assert clearly_faster([g, g, g, 1.02, 1.03], [1.0] * 5)
    # failures: a kernel that never ran is never faster; one that ran beats it
    inf = float("inf")
    assert not clearly_faster([inf] * 3, [1.0] * 3)
    assert clearly_faster([2.0] * 3, [inf] * 3)
    # rounds where either failed do not count
    assert clearly_faster([0.9, inf, 0.9, 0.9, 0.9, 0.9], [1.0, 0.5, 1.0, 1.0, 1.0, 1.0])


def tied_database(func, luck=(1.0, 1.2, 1.4)):
    """Three schedules committed with tuning times in the order of ``luck``."""
    db = MemoryDatabase()
    wl = db.commit_workload(IRModule({"main": func}))
    schs = [split_schedule(func, f) for f in (2, 4, 8)]
    for sch, secs in zip(schs, luck):
        db.commit_tuning_record(TuningRecord(sch.trace, wl, [1e-3 * secs], Target("llvm")))
    return db, schs


def test_tied_kernels_keep_the_database_choice():
    """Equally fast kernels under 5% noise: every selection keeps the database's first,
    where the lowest median would change hands from one selection to the next."""
    func = workload()
    db, schs = tied_database(func)
    by_path = {f"dummy://{structural_hash(s.mod)}": 1e-3 for s in schs}
    winners, lowest = [], []
    for seed in range(10):
        rng = np.random.default_rng(seed)

        def noisy(path: str, rng=rng) -> list[float]:
            return [by_path[path] * rng.uniform(0.95, 1.05)]

        sel = select_best(db, func, "llvm", builder=DummyBuilder(), runner=DummyRunner(noisy))
        winners.append(sel.best_index)
        lowest.append(min(range(3), key=lambda i: sel.medians[i]))
    assert winners == [0] * 10
    assert len(set(lowest)) > 1  # the noise alone would have changed the winner


def test_a_close_challenger_gets_more_rounds_and_the_commits_rank_the_winner_first():
    func = workload()
    db, schs = tied_database(func)
    # the second schedule is 3% faster; the noise (10%) hides it in 5 rounds
    true = {f"dummy://{structural_hash(s.mod)}": t for s, t in zip(schs, (1.0, 0.97, 1.3))}
    rng = np.random.default_rng(3)

    def noisy(path: str) -> list[float]:
        return [1e-3 * true[path] * rng.uniform(0.9, 1.1)]

    sel = finalize(
        db,
        IRModule({"main": func}),
        "llvm",
        rounds=5,
        builder=DummyBuilder(),
        runner=DummyRunner(noisy),
    )
    assert sel is not None
    lengths = [len(r) for r in sel.round_secs]
    assert lengths[2] == 5  # the clearly slower one was not timed again
    if lengths[1] == 10:  # measured ahead of the database's first: both timed again
        assert lengths[0] == 10
    # whoever won, the database now ranks it first (ties: the winner was committed first)
    best = db.get_top_k(db.commit_workload(IRModule({"main": func})), 1)[0]
    assert measurement_key(best) == measurement_key(sel.best)
    est = sel.estimates
    assert est[sel.best_index] == min(est)
    assert all(
        e == est[sel.best_index]
        for e, m in zip(est, sel.medians)
        if m < sel.medians[sel.best_index]
    )


def test_a_later_pass_measures_the_newcomers_against_the_choice_so_far():
    """Four tied kernels, the top two re-measured first: the two left, timed once and
    luckily, rank above the choice afterwards. Each later pass times one of them with
    that choice, which the tie rule keeps: the selection ends where it began
    (measured apart from it, a tied newcomer would take over about half the time),
    except for the rule's rare false alarm; the database ranks the final winner first."""
    func = workload()
    kept = 0
    for seed in range(10):
        db, schs = tied_database(func, luck=(1.0, 1.1, 1.2))
        wl = db.commit_workload(IRModule({"main": func}))
        fourth = split_schedule(func, 16)
        db.commit_tuning_record(TuningRecord(fourth.trace, wl, [1.3e-3], Target("llvm")))
        choice = measurement_key(db.get_top_k(wl, 1)[0])
        rng = np.random.default_rng(seed)

        def noisy(path: str, rng=rng) -> list[float]:
            return [1.5e-3 * rng.uniform(0.95, 1.05)]

        runner = DummyRunner(noisy)
        sel = finalize(
            db, IRModule({"main": func}), "llvm", top_k=2, builder=DummyBuilder(), runner=runner
        )
        assert sel is not None and measurement_key(sel.records[0]) == choice
        assert measurement_key(db.get_top_k(wl, 1)[0]) == measurement_key(sel.best)
        kept += measurement_key(sel.best) == choice
        timed = {i.artifact_path for i in runner.inputs}
        assert timed == {f"dummy://{structural_hash(s.mod)}" for s in [*schs, fourth]}
    assert kept >= 8


# ---------------------------------------------------------------- wired into tuning
def wide_template(sch: Schedule) -> None:
    """Both loops of a 16x16 elementwise block split in four: hundreds of schedules."""
    for loop in sch.get_loops(sch.get_block("B")):
        sch.split(loop, sch.sample_perfect_tile(loop, n=4))


def true_secs(path: str) -> float:
    return dummy_run_secs(path)[0]


@pytest.fixture
def extreme_luck(monkeypatch):
    """LuckyFirstRunner's first timings are 100-10000x faster than the truth, which the
    final selection would otherwise take for a machine busier than while tuning."""
    monkeypatch.setattr(final_selection, "CONDITIONS_CHANGED", float("inf"))


class LuckyFirstRunner(DummyRunner):
    """Each kernel's first timing is inverted (the truly slowest look fastest, and all
    look faster than any truly is); later timings are the truth, with jitter. Raises
    ``interrupt`` instead of a re-measurement when given. (Tests using it need
    ``extreme_luck``.)"""

    def __init__(self, interrupt: BaseException | None = None, fail_again: bool = False):
        super().__init__(self.secs)
        self.seen: set[str] = set()
        self.rng = np.random.default_rng(0)
        self.interrupt, self.fail_again = interrupt, fail_again

    def secs(self, path: str) -> list[float]:
        if path not in self.seen:
            self.seen.add(path)
            return [1e-8 / true_secs(path)]
        if self.interrupt is not None:
            raise self.interrupt
        if self.fail_again:
            raise RuntimeError("the kernel crashed this time")
        return [true_secs(path) * self.rng.uniform(0.9, 1.1)]


def tune(work_dir, runner, trials=8, **kwargs):
    return tune_tir(
        workload(),
        "cpu",
        str(work_dir),
        trials,
        num_trials_per_iter=4,
        space=wide_template,
        strategy="replay-trace",
        cost_model="random",
        builder=kwargs.pop("builder", DummyBuilder()),
        runner=runner,
        seed=kwargs.pop("seed", 1),
        **kwargs,
    )


def replayed_secs(record) -> float:
    sch = record.as_measure_candidate().sch
    return true_secs(f"dummy://{structural_hash(sch.mod)}")


def test_tuning_ends_with_the_truly_fastest_though_its_timings_were_inverted(
    tmp_path, extreme_luck
):
    runner = LuckyFirstRunner()
    db = tune(tmp_path, runner)
    tuned = db.get_all_tuning_records()[:8]
    assert len({measurement_key(r) for r in tuned}) == 8
    truly_fastest = min(tuned, key=replayed_secs)
    # tuning alone believed the truly slowest; re-measuring the top 5 was not enough (the
    # three left, timed once, looked faster still), so a second pass took them in too
    sch = compile_tir(db, workload(), "cpu")
    assert structural_hash(sch.mod) == structural_hash(truly_fastest.as_measure_candidate().sch.mod)
    best = db.query_tuning_record(IRModule({"main": workload()}), Target("cpu"))
    assert measurement_key(best) == measurement_key(truly_fastest)
    journal = tmp_path / "logs" / "final_selection.jsonl"
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [e.get("pass") for e in entries] == [1, 2, None] and entries[-1]["done"]
    assert is_selected(db, IRModule({"main": workload()}), str(journal))
    log = (tmp_path / "logs" / "task_scheduler.log").read_text()
    assert "Final selection of task #0 'main'" in log and "not tuning's first choice" in log

    # the same call again: nothing is tuned, the selection is not repeated
    measured = len(runner.inputs)
    again = tune(tmp_path, runner)
    assert len(runner.inputs) == measured and len(again) == len(db)
    assert "Final selection: done already" in (tmp_path / "logs" / "task_0_main.log").read_text()
    # a larger budget counts the 8 schedules (not their re-measurements) and tunes 4 more;
    # the new schedules make the selection stale, so it runs again
    more = tune(tmp_path, runner, trials=12, seed=2)
    assert len(latest_per_schedule(more.get_all_tuning_records())) == 12
    assert len(runner.inputs) > measured + 4
    assert sum(1 for line in journal.read_text().splitlines() if '"done"' in line) == 2


def test_a_failed_final_selection_keeps_the_tuning_result(tmp_path, extreme_luck):
    db = tune(tmp_path / "a", LuckyFirstRunner(fail_again=True))
    tuned = db.get_all_tuning_records()
    assert len(tuned) == 8  # no failed re-measurement was committed
    assert (
        min(tuned, key=lambda r: r.mean_run_sec).run_secs
        == db.query_tuning_record(IRModule({"main": workload()})).run_secs
    )
    assert "every re-measurement failed" in (tmp_path / "a/logs/task_0_main.log").read_text()

    runner = LuckyFirstRunner()

    class BreaksAfterTuning(DummyBuilder):
        def build(self, build_inputs):
            if len(runner.seen) >= 8:  # tuning measured its 8
                raise RuntimeError("the compiler vanished")
            return super().build(build_inputs)

    db = tune(tmp_path / "b", runner, builder=BreaksAfterTuning())
    assert len(db) == 8 and compile_tir(db, workload(), "cpu") is not None
    log = (tmp_path / "b/logs/task_scheduler.log").read_text()
    assert "the final selection failed (RuntimeError: the compiler vanished)" in log


def test_ctrl_c_during_the_final_selection_keeps_what_was_committed(tmp_path, extreme_luck):
    with pytest.raises(KeyboardInterrupt, match="same work_dir"):
        tune(tmp_path, LuckyFirstRunner(interrupt=KeyboardInterrupt()))
    db = JSONDatabase(work_dir=str(tmp_path))
    assert len(db) == 8  # every tuning result is on disk
    # resuming: nothing left to tune; the selection that was cut short runs
    runner = LuckyFirstRunner()
    runner.seen = {
        f"dummy://{structural_hash(r.as_measure_candidate().sch.mod)}"
        for r in db.get_all_tuning_records()
    }
    again = tune(tmp_path, runner)
    assert len(runner.inputs) > 0 and len(again) > 8
    assert all(r.is_valid for r in again.get_all_tuning_records())


class BusyLaterRunner(DummyRunner):
    """The truth when tuning times a kernel first; every later timing 10x slower (another
    process took a core, as happens to a memory-bound kernel on both cores)."""

    def __init__(self, busy: bool = True):
        super().__init__(self.secs)
        self.seen: set[str] = set()
        self.busy = busy

    def secs(self, path: str) -> list[float]:
        factor = 10.0 if path in self.seen and self.busy else 1.0
        self.seen.add(path)
        return [true_secs(path) * factor]


def test_a_busier_machine_at_the_final_selection_leaves_tunings_ranking(tmp_path):
    runner = BusyLaterRunner()
    db = tune(tmp_path, runner)
    records = db.get_all_tuning_records()
    assert len(records) == 8  # nothing re-measured was committed
    fastest = min(records, key=lambda r: r.mean_run_sec)
    assert measurement_key(db.get_top_k(db.get_all_tuning_records()[0].workload, 1)[0]) == (
        measurement_key(fastest)
    )
    sch = compile_tir(db, workload(), "cpu")
    assert structural_hash(sch.mod) == structural_hash(fastest.as_measure_candidate().sch.mod)
    log = (tmp_path / "logs" / "task_0_main.log").read_text()
    assert "ran at least 10.0x slower than tuning timed it" in log
    journal = tmp_path / "logs" / "final_selection.jsonl"
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [e.get("committed") for e in entries] == [0] and not entries[-1].get("done")
    # on a quiet machine the same call selects again, and finishes
    runner.busy = False
    tune(tmp_path, runner)
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    assert entries[-1].get("done")


def test_final_selection_top_k_is_checked(tmp_path):
    with pytest.raises(ValueError, match="final_selection_top_k must be an int >= 0"):
        tune(tmp_path, DummyRunner(), final_selection_top_k=-1)
