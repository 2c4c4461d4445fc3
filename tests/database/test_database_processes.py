"""JSON and SQLite databases shared by several writing processes, and killed writers."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from metaschedule.database import JSONDatabase, SQLiteDatabase
from metaschedule.testing.tuning_records import matmul

WRITER = textwrap.dedent(
    """
    import os
    import sys
    import time
    from metaschedule.database import JSONDatabase, SQLiteDatabase, TuningRecord
    from metaschedule.testing.tuning_records import make_record, matmul

    kind, path, tag, count, go = sys.argv[1:]
    tag, count = int(tag), int(count)
    db = JSONDatabase(work_dir=path) if kind == "json" else SQLiteDatabase(path)
    workload = db.commit_workload(matmul(8))
    record = make_record(workload, [1.0])
    while not os.path.exists(go):  # start together, to make the writers race
        time.sleep(0.005)
    i = 0
    while count < 0 or i < count:
        db.commit_tuning_record(
            TuningRecord(record.trace, workload, [tag + i * 1e-6], record.target, record.args_info)
        )
        i += 1
        print(i, flush=True)
    """
)


def writer(kind, path, tag, count, go):
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, kind, str(path), str(tag), str(count), str(go)],
        stdout=subprocess.PIPE,
        text=True,
    )


def open_db(kind, path):
    return JSONDatabase(work_dir=str(path)) if kind == "json" else SQLiteDatabase(str(path))


def committed_tags(db):
    return sorted(round(r.run_secs[0], 7) for r in db.get_all_tuning_records())


@pytest.mark.parametrize("kind", ["json", "sqlite"])
def test_two_processes_commit_200_records_each_and_lose_none(kind, tmp_path):
    path = tmp_path / ("db" if kind == "json" else "db.sqlite")
    go = tmp_path / "go"
    procs = [writer(kind, path, tag, 200, go) for tag in (1, 2)]
    go.touch()
    for p in procs:
        p.communicate(timeout=120)
        assert p.returncode == 0
    db = open_db(kind, path)
    expected = sorted(round(tag + i * 1e-6, 7) for tag in (1, 2) for i in range(200))
    assert committed_tags(db) == expected
    # one schedule measured 400 times: it ranks once, by its latest measurement
    (top,) = db.get_top_k(db.commit_workload(matmul(8)), 1000)
    assert top.run_secs == db.get_all_tuning_records()[-1].run_secs
    if kind == "json":
        assert (path / "database_workload.json").read_text().count("\n") == 1


@pytest.mark.parametrize("kind", ["json", "sqlite"])
def test_killing_a_writer_loses_nothing_committed(kind, tmp_path):
    path = tmp_path / ("db" if kind == "json" else "db.sqlite")
    go = tmp_path / "go"
    go.touch()
    proc = writer(kind, path, 3, -1, go)
    done = 0
    deadline = time.time() + 60
    while done < 30 and time.time() < deadline:
        done = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert done >= 30
    db = open_db(kind, path)
    tags = committed_tags(db)
    # every commit that returned (and was reported) is there, with no gaps before it
    assert len(tags) >= done
    assert tags == [round(3 + i * 1e-6, 7) for i in range(len(tags))]


def test_four_json_writers_append_whole_lines_and_lose_nothing(tmp_path):
    path, go = tmp_path / "db", tmp_path / "go"
    tags = (1, 2, 3, 4)
    procs = [writer("json", path, tag, 60, go) for tag in tags]
    go.touch()
    for p in procs:
        p.communicate(timeout=180)
        assert p.returncode == 0
    lines = (path / "database_tuning_record.json").read_text().split("\n")
    assert lines[-1] == ""  # every line is whole and terminated
    parsed = [json.loads(line) for line in lines[:-1]]  # none interleaved: all parse
    assert len(parsed) == 240
    db = open_db("json", path)
    expected = sorted(round(tag + i * 1e-6, 7) for tag in tags for i in range(60))
    assert committed_tags(db) == expected  # nothing lost, nothing duplicated
    assert (path / "database_workload.json").read_text().count("\n") == 1
