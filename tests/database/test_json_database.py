"""JSONDatabase: file layout, torn and malformed lines, several writing processes."""

import json

import pytest

from metaschedule.database import JSONDatabase, Workload
from metaschedule.target import Target
from metaschedule.testing.tuning_records import make_record, matmul


def test_layout_is_two_json_lines_files(tmp_path):
    db = JSONDatabase(work_dir=str(tmp_path))
    w = db.commit_workload(matmul(8))
    db.commit_tuning_record(make_record(w, [0.5]))
    db.commit_tuning_record(make_record(w, [0.25], seed=1))
    wl_lines = (tmp_path / "database_workload.json").read_text().splitlines()
    rec_lines = (tmp_path / "database_tuning_record.json").read_text().splitlines()
    assert len(wl_lines) == 1 and len(rec_lines) == 2
    shash, _mod = json.loads(wl_lines[0])
    assert shash == str(Workload(matmul(8)).shash)
    index, (_trace, run_secs, target, args_info), (carried_shash, _blob) = json.loads(rec_lines[1])
    assert index == 0 and run_secs == [0.25] and carried_shash == shash
    assert target["kind"] == "cpu" and args_info[0] == ["TENSOR", "float32", [8, 8]]


def test_explicit_paths_and_allow_missing(tmp_path):
    wl, rec = tmp_path / "a" / "w.json", tmp_path / "b" / "r.json"
    db = JSONDatabase(str(wl), str(rec))
    db.commit_tuning_record(make_record(Workload(matmul(8)), [0.5]))
    assert wl.exists() and rec.exists()
    with pytest.raises(FileNotFoundError, match="allow_missing"):
        JSONDatabase(str(tmp_path / "x.json"), str(rec), allow_missing=False)
    with pytest.raises(ValueError, match="work_dir"):
        JSONDatabase(str(wl))


def fill(tmp_path, n=3):
    db = JSONDatabase(work_dir=str(tmp_path))
    w = db.commit_workload(matmul(8))
    for i in range(n):
        db.commit_tuning_record(make_record(w, [0.1 * (i + 1)], seed=i))
    db.close()
    return tmp_path / "database_tuning_record.json"


def test_torn_last_line_is_skipped_with_a_warning(tmp_path):
    path = fill(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])  # the writer of the last line died mid-line
    with pytest.warns(
        RuntimeWarning,
        match=r"database_tuning_record.json: 1 torn last line \(3\) "
        r"skipped",
    ):
        db = JSONDatabase(work_dir=str(tmp_path))
    assert len(db) == 2
    # the next commit ends the torn line first: its own line stays intact
    db.commit_tuning_record(make_record(db.commit_workload(matmul(8)), [0.05], seed=7))
    db.close()
    with pytest.warns(
        RuntimeWarning,
        match=r"database_tuning_record.json: 1 malformed line \(3\) "
        r"skipped",
    ):
        again = JSONDatabase(work_dir=str(tmp_path))
    assert [r.run_secs for r in again.get_top_k(again.commit_workload(matmul(8)), 5)] == [
        [0.05],
        [0.1],
        [0.2],
    ]


def test_malformed_lines_are_skipped_with_file_and_line(tmp_path):
    path = fill(tmp_path)
    lines = path.read_text().splitlines()
    lines.insert(1, "{not json")
    lines.insert(2, json.dumps([7, lines[0]]))  # refers to a workload line that is not there
    lines.insert(3, json.dumps([0, ["not a trace", None, None, None]]))
    path.write_text("\n".join(lines) + "\n")
    with pytest.warns(RuntimeWarning) as caught:
        db = JSONDatabase(work_dir=str(tmp_path))
    messages = [str(w.message) for w in caught]
    assert len(messages) == 3  # one summary per kind of problem, not one per line
    assert any("database_tuning_record.json: 1 malformed line (2) skipped" in m for m in messages)
    assert any(
        "database_tuning_record.json: 1 record whose workload is missing (3) skipped" in m
        and "workload line 7" in m
        for m in messages
    )
    assert any(
        "database_tuning_record.json: 1 malformed record (4) skipped" in m and "TuningRecord" in m
        for m in messages
    )
    assert len(db) == 3


def test_a_second_open_database_sees_new_commits(tmp_path):
    a = JSONDatabase(work_dir=str(tmp_path))
    b = JSONDatabase(work_dir=str(tmp_path))
    a.commit_tuning_record(make_record(Workload(matmul(8)), [0.5]))
    assert b.has_workload(matmul(8))
    b.commit_tuning_record(make_record(b.commit_workload(matmul(8)), [0.25], seed=1))
    b.commit_tuning_record(make_record(Workload(matmul(4)), [0.25]))
    assert a.query_tuning_record(matmul(8), Target("cpu"), "main").run_secs == [0.25]
    assert len(a) == 3
    # both agree on workload line numbers: a fresh reader maps every record to its workload
    fresh = JSONDatabase(work_dir=str(tmp_path))
    shapes = sorted(
        r.workload.mod["main"].params[0].shape[0].value for r in fresh.get_all_tuning_records()
    )
    assert shapes == [4, 8, 8]
    assert (tmp_path / "database_workload.json").read_text().count("\n") == 2


def test_forked_children_commit_safely_through_an_inherited_database(tmp_path):
    import multiprocessing

    db = JSONDatabase(work_dir=str(tmp_path))
    w = db.commit_workload(matmul(8))
    ctx = multiprocessing.get_context("fork")
    children = [ctx.Process(target=_commit_many, args=(db, w, tag)) for tag in (1, 2)]
    for c in children:
        c.start()
    for c in children:
        c.join(60)
        assert c.exitcode == 0
    assert len(db) == 100  # the parent reads what its children appended
    assert sorted({round(r.run_secs[0]) for r in db.get_all_tuning_records()}) == [1, 2]


def _commit_many(db, workload, tag):
    for i in range(50):
        db.commit_tuning_record(make_record(workload, [tag + i * 1e-6], seed=i % 3))
