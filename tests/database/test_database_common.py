"""Behaviour every storing database shares: memory, JSON and SQLite."""

import math

import pytest

import metaschedule.database as msd
from metaschedule.database import (
    Database,
    JSONDatabase,
    MemoryDatabase,
    SQLiteDatabase,
    TuningRecord,
    Workload,
)
from metaschedule.schedule import Schedule
from metaschedule.target import Target
from metaschedule.testing.tuning_records import make_record, matmul, record_schedule
from metaschedule.tir.structural import structural_equal

KINDS = ["memory", "json", "sqlite"]


def open_db(kind, tmp_path, **kwargs):
    if kind == "memory":
        return MemoryDatabase(**kwargs)
    if kind == "json":
        return JSONDatabase(work_dir=str(tmp_path / "json"), **kwargs)
    return SQLiteDatabase(str(tmp_path / "db.sqlite"), **kwargs)


@pytest.fixture(params=KINDS)
def db(request, tmp_path):
    return open_db(request.param, tmp_path)


def test_commit_workload_is_idempotent_up_to_structure(db):
    assert not db.has_workload(matmul(16))
    w1 = db.commit_workload(matmul(16))
    assert db.has_workload(matmul(16))  # a new, structurally equal module
    assert not db.has_workload(matmul(8))
    w2 = db.commit_workload(matmul(16))
    assert structural_equal(w1.mod, w2.mod)
    assert w1.shash == w2.shash == Workload(matmul(16)).shash
    assert len(db) == 0


def test_get_top_k_orders_valid_records_and_skips_failures(db):
    w = db.commit_workload(matmul(16))
    times = [[3.0], [1e10], [1.0, 2.0], None, [0.5], [], [math.nan], [2.0, 1.0], [-1.0]]
    for seed, t in enumerate(times):
        db.commit_tuning_record(make_record(w, t, seed))
    assert len(db) == len(times)
    top = db.get_top_k(w, 10)
    assert [r.run_secs for r in top] == [[0.5], [1.0, 2.0], [2.0, 1.0], [3.0]]  # ties: commit order
    assert [r.run_secs for r in db.get_top_k(w, 2)] == [[0.5], [1.0, 2.0]]
    assert db.get_top_k(w, 0) == []
    with pytest.raises(ValueError, match="top_k"):
        db.get_top_k(w, -1)
    assert db.get_top_k(Workload(matmul(8)), 3) == []  # unknown workload
    everything = db.get_all_tuning_records()
    assert len(everything) == len(times)
    assert [r.run_secs for r in everything][:2] == [[3.0], [1e10]]


def test_records_keep_their_content(db):
    w = db.commit_workload(matmul(16))
    rec = make_record(w, [0.25], seed=7)
    db.commit_tuning_record(rec)
    (got,) = db.get_top_k(db.commit_workload(matmul(16)), 1)
    assert got.trace.as_json() == rec.trace.as_json()
    assert got.target == Target("cpu")
    assert got.args_info == rec.args_info
    assert structural_equal(got.workload.mod["main"], matmul(16))


def test_commit_record_of_a_foreign_workload_commits_it(db):
    rec = make_record(Workload(matmul(12)), [0.1])
    db.commit_tuning_record(rec)
    assert db.has_workload(matmul(12))
    assert [r.run_secs for r in db.get_top_k(Workload(matmul(12)), 5)] == [[0.1]]


def test_queries_return_the_best_valid_schedule(db):
    w = db.commit_workload(matmul(16))
    for seed, t in [(1, [0.3]), (2, [0.1]), (3, [1e10])]:
        db.commit_tuning_record(make_record(w, t, seed))
    target = Target("cpu")
    record = db.query_tuning_record(matmul(16), target, "main")
    assert record.run_secs == [0.1]
    expected = record_schedule(matmul(16), seed=2)
    sch = db.query_schedule(matmul(16), target, "main")
    assert isinstance(sch, Schedule)
    assert structural_equal(sch.mod, expected.mod)
    assert sch.trace.as_json() == expected.trace.as_json()
    assert structural_equal(db.query_ir_module(matmul(16), target, "main"), expected.mod)
    assert db.query(matmul(16), target, kind="record").run_secs == [0.1]
    assert structural_equal(db.query(matmul(16), target).mod, expected.mod)
    assert structural_equal(db.query(matmul(16), target, kind="ir_module"), expected.mod)
    with pytest.raises(ValueError, match="kind"):
        db.query(matmul(16), target, kind="best")


def test_queries_without_a_valid_record_return_none(db):
    target = Target("cpu")
    assert db.query_tuning_record(matmul(16), target, "main") is None  # no workload
    w = db.commit_workload(matmul(16))
    db.commit_tuning_record(make_record(w, [1e10]))
    db.commit_tuning_record(make_record(w, None, seed=1))
    assert db.query_tuning_record(matmul(16), target, "main") is None
    assert db.query_schedule(matmul(16), target, "main") is None
    assert db.query_ir_module(matmul(16), target, "main") is None


def test_dump_pruned_keeps_the_best_record_per_workload(db, tmp_path):
    w16, w8 = db.commit_workload(matmul(16)), db.commit_workload(matmul(8))
    for seed, t in [(1, [0.3]), (2, [0.1]), (3, [1e10]), (4, [0.2])]:
        db.commit_tuning_record(make_record(w16, t, seed))
    db.commit_tuning_record(make_record(w8, [0.7], 5))
    db.commit_tuning_record(make_record(w8, [0.6], 6))
    db.commit_workload(matmul(4))  # a workload without records is not dumped
    dest = JSONDatabase(work_dir=str(tmp_path / "pruned"))
    db.dump_pruned(dest)
    got = {
        r.workload.mod["main"].params[0].shape[0].value: r for r in dest.get_all_tuning_records()
    }
    assert sorted(got) == [8, 16]
    assert got[16].run_secs == [0.1]
    assert got[16].trace.as_json() == record_schedule(matmul(16), 2).trace.as_json()
    assert got[8].run_secs == [0.6]
    reopened = JSONDatabase(work_dir=str(tmp_path / "pruned"))
    assert len(reopened) == 2
    assert not reopened.has_workload(matmul(4))


def test_scoping_with_database_current():
    a, b = MemoryDatabase(), MemoryDatabase()
    assert Database.current() is None
    with a:
        assert Database.current() is a
        with b:
            assert Database.current() is b
            with a:
                assert Database.current() is a
            assert Database.current() is b
        assert Database.current() is a
    assert Database.current() is None


def test_create_kinds(tmp_path):
    assert isinstance(Database.create("memory"), MemoryDatabase)
    assert isinstance(msd.create("json", work_dir=str(tmp_path / "j")), JSONDatabase)
    assert isinstance(Database.create("sqlite", str(tmp_path / "s.db")), SQLiteDatabase)
    m1, m2 = MemoryDatabase(), MemoryDatabase()
    union = Database.create("union", m1, m2)
    assert isinstance(union, msd.UnionDatabase) and union.databases == (m1, m2)
    assert isinstance(Database.create("ordered_union", m1), msd.OrderedUnionDatabase)
    assert isinstance(Database.create(lambda sch: False), msd.ScheduleFnDatabase)
    with pytest.raises(ValueError, match="json, memory, ordered_union, schedule_fn, sqlite, union"):
        Database.create("postgres")


@pytest.mark.parametrize("kind", ["json", "sqlite"])
def test_records_outlive_the_database_object(kind, tmp_path):
    db = open_db(kind, tmp_path)
    w = db.commit_workload(matmul(16))
    for seed in range(5):
        db.commit_tuning_record(make_record(w, [0.1 * (5 - seed)], seed))
    db.close()
    again = open_db(kind, tmp_path)
    assert len(again) == 5
    best = again.query_tuning_record(matmul(16), Target("cpu"), "main")
    assert best.run_secs == [pytest.approx(0.1)]
    assert best.trace.as_json() == record_schedule(matmul(16), 4).trace.as_json()


def test_replay_failure_is_reported_not_applied():
    db = MemoryDatabase()
    w = db.commit_workload(matmul(16))
    # a trace whose block "C" does not exist in the workload it is committed for
    sch = Schedule(matmul(16))
    sch.get_block("C")
    bad = TuningRecord(sch.trace, w, [0.1])
    from metaschedule.te import compute, create_prim_func, placeholder

    a = placeholder((4,), name="A")
    other = create_prim_func([a, compute((4,), lambda i: a[i] + 1.0, name="D")])
    db2 = MemoryDatabase()
    db2.commit_tuning_record(TuningRecord(bad.trace, Workload(other), [0.1]))
    with pytest.warns(RuntimeWarning, match="does not replay"):
        assert db2.query_schedule(other, Target("cpu"), "main") is None
