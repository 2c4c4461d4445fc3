"""A schedule measured more than once: its latest valid record ranks it, once, in every
database kind; nothing is deleted, files stay append-only, old files still load."""

import json
import sqlite3

import pytest

from metaschedule.database import (
    JSONDatabase,
    MemoryDatabase,
    OrderedUnionDatabase,
    SQLiteDatabase,
    TuningRecord,
    UnionDatabase,
)
from metaschedule.database.base import latest_per_schedule, measurement_key
from metaschedule.target import Target
from metaschedule.testing.tuning_records import make_record, matmul

KINDS = ["memory", "json", "sqlite"]


def open_db(kind, tmp_path):
    if kind == "memory":
        return MemoryDatabase()
    if kind == "json":
        return JSONDatabase(work_dir=str(tmp_path / "json"))
    return SQLiteDatabase(str(tmp_path / "db.sqlite"))


def again(record, run_secs):
    """``record``'s schedule measured once more."""
    return TuningRecord(record.trace, record.workload, run_secs, record.target, record.args_info)


def fill(db):
    """A (lucky at first, 0.1 then 0.4), B (0.2), C (0.3, then a failure); returns keys."""
    w = db.commit_workload(matmul(16))
    a, b, c = (make_record(w, [t], seed) for seed, t in enumerate([0.1, 0.2, 0.3]))
    for r in (a, b, c):
        db.commit_tuning_record(r)
    db.commit_tuning_record(again(a, [0.4]))  # re-measured: slower than its lucky timing
    db.commit_tuning_record(again(c, [1e10]))  # a failed re-measurement hides nothing
    return w, [measurement_key(r) for r in (a, b, c)]


def ranking(db, w, k=10):
    return [(measurement_key(r), r.run_secs) for r in db.get_top_k(w, k)]


@pytest.mark.parametrize("kind", KINDS)
def test_the_latest_valid_measurement_ranks_each_schedule_once(kind, tmp_path):
    db = open_db(kind, tmp_path)
    w, (a, b, c) = fill(db)
    assert ranking(db, w) == [(b, [0.2]), (c, [0.3]), (a, [0.4])]
    assert ranking(db, w, 1) == [(b, [0.2])]
    assert measurement_key(db.query_tuning_record(matmul(16), Target("cpu"))) == b
    assert len(db) == 5 and len(db.get_all_tuning_records()) == 5  # nothing is deleted
    if kind != "memory":  # reopened from its file: the same ranking
        reopened = open_db(kind, tmp_path)
        w2 = reopened.commit_workload(matmul(16))
        assert ranking(reopened, w2) == ranking(db, w)
        assert len(reopened) == 5


@pytest.mark.parametrize("kind", KINDS)
def test_dump_pruned_and_latest_per_schedule_follow_the_rule(kind, tmp_path):
    db = open_db(kind, tmp_path)
    w, (a, b, c) = fill(db)
    counted = latest_per_schedule(db.get_all_tuning_records())
    assert [(measurement_key(r), r.run_secs) for r in counted] == [
        (a, [0.4]),
        (b, [0.2]),
        (c, [0.3]),
    ]
    pruned = MemoryDatabase()
    db.dump_pruned(pruned)
    assert [(measurement_key(r), r.run_secs) for r in pruned.get_all_tuning_records()] == [
        (b, [0.2])
    ]


def test_the_same_trace_on_another_target_is_another_schedule():
    db = MemoryDatabase()
    w = db.commit_workload(matmul(16))
    r = make_record(w, [0.1])
    db.commit_tuning_record(r)
    db.commit_tuning_record(TuningRecord(r.trace, w, [0.2], Target("llvm -num-cores 1")))
    assert sorted(x.run_secs[0] for x in db.get_top_k(w, 5)) == [0.1, 0.2]


def test_unions_return_a_schedule_once():
    first, second = MemoryDatabase(), MemoryDatabase()
    w1 = first.commit_workload(matmul(16))
    a = make_record(w1, [0.3])
    first.commit_tuning_record(a)
    first.commit_tuning_record(make_record(w1, [0.5], seed=1))
    w2 = second.commit_workload(matmul(16))
    second.commit_tuning_record(again(make_record(w2, [0.0]), [0.2]))  # a's schedule
    union = UnionDatabase(first, second)
    top = union.get_top_k(w1, 5)
    assert [r.run_secs for r in top] == [[0.2], [0.5]]  # a once: its fastest member's record
    assert [r.run_secs for r in OrderedUnionDatabase(first, second).get_top_k(w1, 5)] == [
        [0.3],
        [0.5],
    ]


def test_old_json_lines_without_a_carried_workload_still_rank_by_the_rule(tmp_path):
    db = JSONDatabase(work_dir=str(tmp_path))
    w, (a, b, _) = fill(db)
    db.close()
    path = tmp_path / "database_tuning_record.json"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(line[:2]) + "\n" for line in lines))  # TVM's layout
    old = JSONDatabase(work_dir=str(tmp_path))
    assert ranking(old, old.commit_workload(matmul(16)))[0] == (b, [0.2])
    assert len(old) == 5


def test_an_sqlite_file_from_before_measurement_keys_gets_them(tmp_path):
    path = tmp_path / "old.sqlite"
    db = SQLiteDatabase(str(path))
    w, (a, b, c) = fill(db)
    db.close()
    conn = sqlite3.connect(path)
    with conn:  # the layout of earlier versions: no measurement_key column
        conn.execute("DROP INDEX record_by_schedule")
        conn.execute("ALTER TABLE tuning_record DROP COLUMN measurement_key")
    conn.close()
    reopened = SQLiteDatabase(str(path))
    w2 = reopened.commit_workload(matmul(16))
    assert ranking(reopened, w2) == [(b, [0.2]), (c, [0.3]), (a, [0.4])]
    reopened.commit_tuning_record(again(reopened.get_top_k(w2, 1)[0], [0.05]))
    assert ranking(reopened, w2)[0] == (b, [0.05])
