"""SQLiteDatabase specifics: the schema, WAL mode, corrupted rows."""

import sqlite3

import pytest

from metaschedule.database import SQLiteDatabase, Workload
from metaschedule.testing.tuning_records import make_record, matmul


def test_file_is_in_wal_mode_with_indexed_run_times(tmp_path):
    path = tmp_path / "sub" / "tune.sqlite"
    db = SQLiteDatabase(str(path))
    w = db.commit_workload(matmul(8))
    db.commit_tuning_record(make_record(w, [0.5, 1.5]))
    db.commit_tuning_record(make_record(w, [1e10], seed=1))
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    rows = conn.execute(
        "SELECT workload_id, mean_run_sec FROM tuning_record ORDER BY id"
    ).fetchall()
    assert rows == [(1, 1.0), (1, None)]  # no run time for the failure: never the best
    (shash,) = conn.execute("SELECT shash FROM workload").fetchone()
    assert shash == Workload(matmul(8)).shash


def test_corrupted_rows_are_skipped_with_a_warning(tmp_path):
    path = tmp_path / "tune.sqlite"
    db = SQLiteDatabase(str(path))
    w = db.commit_workload(matmul(8))
    for seed, t in enumerate([0.3, 0.1, 0.2]):
        db.commit_tuning_record(make_record(w, [t], seed=seed))
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE tuning_record SET json = '[\"garbage\"]' WHERE id = 2")
    fresh = SQLiteDatabase(str(path))
    with pytest.warns(RuntimeWarning, match="tune.sqlite: skipping tuning_record row 2"):
        top = fresh.get_top_k(fresh.commit_workload(matmul(8)), 3)
    assert [r.run_secs for r in top] == [[0.2], [0.3]]
    with conn:
        conn.execute("UPDATE workload SET json = '[1]'")
    broken = SQLiteDatabase(str(path))
    with pytest.warns(RuntimeWarning, match="skipping workload row 1"):
        assert not broken.has_workload(matmul(8))
