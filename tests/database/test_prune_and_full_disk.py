"""Databases under a running tuner and on a full disk: ``metaschedule db prune`` in place
takes the database's lock and loses nothing a tuner commits meanwhile; a commit that
meets a full disk raises, keeps every earlier record, and the next commit succeeds."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
import warnings

import pytest

from metaschedule.cli import main
from metaschedule.database import JSONDatabase, SQLiteDatabase
from metaschedule.testing.tuning_records import make_record, matmul

WL = "database_workload.json"
REC = "database_tuning_record.json"


def fill(db) -> None:
    """Two workloads; matmul(8) has a schedule re-measured faster and a failure."""
    w8 = db.commit_workload(matmul(8))
    for seed, secs in [(0, 0.3), (1, 0.2), (2, 0.1), (0, 0.05), (3, 1e10)]:
        db.commit_tuning_record(make_record(w8, [secs], seed=seed))
    w4 = db.commit_workload(matmul(4))
    for seed, secs in [(0, 0.4), (1, 0.5)]:
        db.commit_tuning_record(make_record(w4, [secs], seed=seed))


def best_secs(db, top_k: int) -> dict[int, list]:
    return {
        n: [r.run_secs[0] for r in db.get_top_k(db.commit_workload(matmul(n)), top_k)]
        for n in (8, 4)
    }


@pytest.mark.parametrize("kind", ["json", "sqlite"])
def test_prune_keeps_what_get_top_k_ranks_first(tmp_path, kind):
    path = str(tmp_path / ("db" if kind == "json" else "t.sqlite"))
    db = JSONDatabase(work_dir=path) if kind == "json" else SQLiteDatabase(path)
    fill(db)
    expected = best_secs(db, 2)
    assert expected == {8: [0.05, 0.1], 4: [0.4, 0.5]}
    assert db.prune(2) == (4, 7)
    assert best_secs(db, 2) == expected
    assert sorted(r.run_secs[0] for r in db.get_all_tuning_records()) == [0.05, 0.1, 0.4, 0.5]


def test_json_prune_in_place_keeps_what_a_running_tuner_commits(tmp_path, capsys):
    tuner = JSONDatabase(work_dir=str(tmp_path))
    fill(tuner)
    assert main(["db", "prune", str(tmp_path), "--top-k", "1"]) == 0
    assert "kept 2 of 7" in capsys.readouterr().out
    # the tuner goes on committing into the files it opened before the prune
    tuner.commit_tuning_record(make_record(tuner.commit_workload(matmul(8)), [0.01], seed=9))
    assert len(tuner) == 3  # it reads the pruned files, and its new record
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fresh = JSONDatabase(work_dir=str(tmp_path))
    assert len(fresh) == 3
    assert fresh.query_tuning_record(matmul(8)).run_secs == [0.01]
    assert fresh.query_tuning_record(matmul(4)).run_secs == [0.4]
    assert sorted(os.listdir(tmp_path)) == sorted([WL, REC])  # no file left behind


def _opened(proc: subprocess.Popen, path) -> bool:
    """Whether ``proc`` has ``path`` open (per /proc; False without /proc)."""
    fd_dir, want = f"/proc/{proc.pid}/fd", os.path.realpath(path)
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(os.path.join(fd_dir, fd)) == want:
                return True
        except OSError:  # closed meanwhile
            pass
    return False


def test_json_prune_waits_for_the_lock_commits_take(tmp_path):
    db = JSONDatabase(work_dir=str(tmp_path))
    fill(db)
    db.close()
    wl = tmp_path / WL
    before = os.stat(wl).st_ino
    with open(wl, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a committer mid-commit
        proc = subprocess.Popen(
            [sys.executable, "-m", "metaschedule", "db", "prune", str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            # once the prune has the database open it only waits for the lock; then a
            # second more, ample for a prune of 7 records that ignored the lock to finish
            # (without /proc to tell: 20 s)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None and not _opened(proc, wl):
                time.sleep(0.05)
            deadline = time.monotonic() + (1 if os.path.isdir("/proc/self/fd") else 20)
            while time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.05)
                if os.stat(wl).st_ino != before:
                    break
            assert proc.poll() is None, proc.communicate()
            assert os.stat(wl).st_ino == before  # nothing moved while the lock is held
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "kept 2 of 7" in out
    assert os.stat(wl).st_ino != before
    assert len(JSONDatabase(work_dir=str(tmp_path))) == 2


def test_sqlite_prune_in_place_deletes_rows_and_swaps_no_file(tmp_path, capsys):
    path = str(tmp_path / "t.sqlite")
    tuner = SQLiteDatabase(path)
    fill(tuner)
    files = {f: os.stat(f).st_ino for f in (path, path + "-wal", path + "-shm")}
    assert main(["db", "prune", path, "--top-k", "1"]) == 0
    assert "kept 2 of 7" in capsys.readouterr().out
    assert {f: os.stat(f).st_ino for f in files} == files  # same files, none deleted
    tuner.commit_tuning_record(make_record(tuner.commit_workload(matmul(8)), [0.01], seed=9))
    fresh = SQLiteDatabase(path)
    assert len(fresh) == 3
    assert fresh.query_tuning_record(matmul(8)).run_secs == [0.01]
    assert sorted(os.listdir(tmp_path)) == ["t.sqlite", "t.sqlite-shm", "t.sqlite-wal"]


# ----------------------------------------------------------------------- a full disk
_CHILD = r"""
import json, os, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
from metaschedule.database import JSONDatabase, SQLiteDatabase
from metaschedule.testing.tuning_records import make_record, matmul

kind, where = sys.argv[1:]
if kind == "json":
    db, grows = JSONDatabase(work_dir=where), os.path.join(where, "database_tuning_record.json")
else:
    db, grows = SQLiteDatabase(where), where + "-wal"
w = db.commit_workload(matmul(8))
for i in range(3):
    db.commit_tuning_record(make_record(w, [0.1 * (i + 1)], seed=i))
size = os.path.getsize(grows)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 10, hard))  # the disk is full
try:
    db.commit_tuning_record(make_record(w, [0.05], seed=3))
    error = None
except Exception as err:
    error = f"{type(err).__name__}: {err}"
after_error = os.path.getsize(grows)
resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # space again
db.commit_tuning_record(make_record(w, [0.04], seed=4))
print(json.dumps({"error": error, "size": size, "after_error": after_error, "len": len(db)}))
"""


@pytest.mark.parametrize("kind", ["json", "sqlite"])
def test_a_commit_on_a_full_disk_raises_keeps_earlier_records_and_the_next_succeeds(tmp_path, kind):
    where = str(tmp_path / ("db" if kind == "json" else "t.sqlite"))
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, kind, where],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["error"] is not None  # the commit on the full disk raised
    assert out["len"] == 4
    if kind == "json":
        assert out["after_error"] == out["size"]  # the partial line was taken back
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no torn line left to report
        db = JSONDatabase(work_dir=where) if kind == "json" else SQLiteDatabase(where)
    secs = sorted(r.run_secs[0] for r in db.get_all_tuning_records())
    assert secs == pytest.approx([0.04, 0.1, 0.2, 0.3])
