"""Four processes share one fresh SQLite database: nothing lost, nothing duplicated."""

import sqlite3
import subprocess
import sys
import textwrap

from metaschedule.database import SQLiteDatabase
from metaschedule.testing.tuning_records import make_record, matmul

WRITER = textwrap.dedent(
    """
    import os
    import sys
    import time
    from metaschedule.database import SQLiteDatabase, TuningRecord
    from metaschedule.testing.tuning_records import make_record, matmul

    path, tag, count, go = sys.argv[1:]
    tag, count = int(tag), int(count)
    while not os.path.exists(go):  # start together, schema creation included
        time.sleep(0.002)
    db = SQLiteDatabase(path, timeout_sec=60)
    workload = db.commit_workload(matmul(8))
    base = make_record(workload, [1.0])
    shared = TuningRecord(base.trace, workload, [0.5], base.target, base.args_info)
    for i in range(count):
        db.commit_tuning_record(
            TuningRecord(base.trace, workload, [tag + i * 1e-6], base.target, base.args_info)
        )
        if i % 10 == 0:  # every writer also commits one identical record, many times
            db.commit_tuning_record(shared)
            db.commit_workload(matmul(8))
    """
)

WRITERS, COUNT = 4, 40


def test_four_writers_lose_and_duplicate_nothing(tmp_path):
    path, go = tmp_path / "fleet.sqlite", tmp_path / "go"
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(tag), str(COUNT), str(go)])
        for tag in range(1, WRITERS + 1)
    ]
    go.touch()
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    db = SQLiteDatabase(str(path))
    tags = sorted(round(r.run_secs[0], 7) for r in db.get_all_tuning_records())
    expected = sorted(
        [round(tag + i * 1e-6, 7) for tag in range(1, WRITERS + 1) for i in range(COUNT)] + [0.5]
    )
    assert tags == expected  # every record once, the shared one once
    assert len(db) == WRITERS * COUNT + 1
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM workload").fetchone()[0] == 1
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_files_without_record_keys_are_upgraded(tmp_path):
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE workload (id INTEGER PRIMARY KEY, shash INTEGER NOT NULL, "
        "json TEXT NOT NULL);"
        "CREATE TABLE tuning_record (id INTEGER PRIMARY KEY, workload_id INTEGER NOT NULL, "
        "mean_run_sec REAL, json TEXT NOT NULL);"
    )
    conn.close()
    db = SQLiteDatabase(str(path))
    record = make_record(db.commit_workload(matmul(8)), [0.25])
    db.commit_tuning_record(record)
    db.commit_tuning_record(record)
    assert len(db) == 1
    assert [r.run_secs for r in db.get_all_tuning_records()] == [[0.25]]
