"""JSONDatabase on damaged, foreign and read-only files: problems are reported in one
summary per file and kind, with line numbers, and everything else stays usable."""

import errno
import json
import os
import warnings

import pytest

from metaschedule.database import JSONDatabase, TuningRecord, Workload
from metaschedule.testing.tuning_records import make_record, matmul, matmul_relu
from metaschedule.tir_integration import compile_tir

WL = "database_workload.json"
REC = "database_tuning_record.json"


def fill(tmp_path, sizes=(8, 4), per_workload=3):
    db = JSONDatabase(work_dir=str(tmp_path))
    for n in sizes:
        w = db.commit_workload(matmul(n))
        for i in range(per_workload):
            db.commit_tuning_record(make_record(w, [0.1 * (i + 1)], seed=i))
    db.close()


def load(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        db = JSONDatabase(work_dir=str(tmp_path))
    return db, [str(w.message) for w in caught]


def test_records_behind_a_truncated_workload_file_are_recovered(tmp_path):
    fill(tmp_path)
    wl = tmp_path / WL
    wl.write_bytes(wl.read_bytes()[:100])  # the first workload line, torn; the second gone
    db, messages = load(tmp_path)
    assert len(db) == 6  # nothing orphaned
    summary = [m for m in messages if "recovered" in m]
    assert len(summary) == 1, messages
    assert (
        f"{REC}: 6 records whose workload line is lost (1, 2, 3, 4, 5, 6) recovered" in (summary[0])
    )
    assert compile_tir(db, matmul(8), "llvm") is not None
    best = db.query_tuning_record(matmul(4))
    assert best.run_secs == [0.1]
    # the next commit writes the lost workload line again: a later reader needs no recovery
    db.commit_tuning_record(make_record(db.commit_workload(matmul(8)), [0.05], seed=5))
    db.close()
    again, _ = load(tmp_path)
    assert len(again) == 7
    assert again.query_tuning_record(matmul(8)).run_secs == [0.05]


def test_garbled_record_lines_are_summarised_and_the_rest_used(tmp_path):
    fill(tmp_path)
    rec = tmp_path / REC
    lines = rec.read_text().splitlines()
    lines[1] = lines[1][: len(lines[1]) // 2]  # garbled in the middle
    lines.insert(3, "%%% not json")
    lines.insert(4, "[1, 2")
    rec.write_text("\n".join(lines) + "\n")
    db, messages = load(tmp_path)
    assert len(messages) == 1
    assert messages[0].startswith(f"{rec}: 3 malformed lines (2, 4, 5) skipped")
    assert len(db) == 5


def test_an_older_file_without_carried_workloads_is_read(tmp_path):
    fill(tmp_path)
    rec = tmp_path / REC
    lines = [json.loads(line) for line in rec.read_text().splitlines()]
    rec.write_text("".join(json.dumps(line[:2]) + "\n" for line in lines))  # TVM's layout
    db, messages = load(tmp_path)
    assert messages == [] and len(db) == 6
    # without a carried copy a lost workload cannot be recovered: reported, not fatal
    (tmp_path / WL).write_text("")
    db, messages = load(tmp_path)
    assert len(db) == 0
    assert len(messages) == 1 and "6 records whose workload is missing" in messages[0]


def _edit_trace(tmp_path, line_no, edit):
    rec = tmp_path / REC
    lines = [json.loads(line) for line in rec.read_text().splitlines()]
    edit(lines[line_no][1][0])
    rec.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_a_trace_naming_an_unknown_instruction_is_skipped(tmp_path):
    fill(tmp_path)

    def rename(trace):
        trace[0][0][0] = "NoSuchInstruction"

    _edit_trace(tmp_path, 0, rename)
    db, messages = load(tmp_path)
    assert len(messages) == 1
    assert f"{REC}: 1 malformed record (1) skipped" in messages[0]
    assert "NoSuchInstruction" in messages[0]
    assert len(db) == 5


def test_a_bad_decision_is_reported_at_query_and_the_next_best_used(tmp_path):
    fill(tmp_path)

    def bad_decision(trace):
        _insts, decisions = trace
        decisions[0][1] = [3, 5]  # not a factorisation of the loop of 8

    _edit_trace(tmp_path, 0, bad_decision)  # the best record of matmul(8)
    db, messages = load(tmp_path)
    assert messages == [] and len(db) == 6
    with pytest.warns(RuntimeWarning, match=rf"{REC}:1: a record of workload .* does not replay"):
        sch = db.query_schedule(matmul(8))
    assert sch is not None  # the second best, which replays
    assert compile_tir(db, matmul(8), "llvm") is not None


def test_a_record_whose_trace_does_not_fit_its_module_is_never_applied(tmp_path):
    db = JSONDatabase(work_dir=str(tmp_path))
    relu = db.commit_workload(matmul_relu(8))
    foreign = make_record(Workload(matmul(16)), [0.01])  # splits block C of a 16x16 matmul
    # the same trace stored against another module: its loops have other extents
    db.commit_tuning_record(TuningRecord(foreign.trace, relu, [0.01]))
    with pytest.warns(RuntimeWarning, match=rf"{REC}:1: .* does not replay"):
        assert db.query_schedule(matmul_relu(8)) is None


def _read_only(monkeypatch, folder):
    """Make every open-for-writing under ``folder`` fail as on a read-only file system
    (chmod does not stop root, which CI may be)."""
    real_open = os.open

    def fake_open(path, flags, *args, **kwargs):
        if str(path).startswith(str(folder)) and flags & (os.O_RDWR | os.O_WRONLY):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake_open)


def test_a_read_only_work_dir_can_be_queried(tmp_path, monkeypatch):
    fill(tmp_path)
    _read_only(monkeypatch, tmp_path)
    db = JSONDatabase(work_dir=str(tmp_path))
    assert len(db) == 6
    assert db.query_tuning_record(matmul(4)).run_secs == [0.1]
    assert db.query_schedule(matmul(8)) is not None
    assert compile_tir(db, matmul(8), "llvm") is not None
    assert db.commit_workload(matmul(8)) is not None  # known: nothing to write
    assert not db.writable
    with pytest.raises(
        PermissionError, match="read-only: it can be queried, but tuning needs a writable work_dir"
    ):
        db.commit_tuning_record(make_record(db.commit_workload(matmul(8)), [0.5]))
    with pytest.raises(PermissionError, match=WL):
        db.commit_workload(matmul(2))
    assert len(db) == 6


def test_a_missing_work_dir_in_a_read_only_place_is_an_empty_database(tmp_path, monkeypatch):
    _read_only(monkeypatch, tmp_path)
    db = JSONDatabase(work_dir=str(tmp_path / "nothing"))
    assert len(db) == 0 and db.query_schedule(matmul(8)) is None
    with pytest.raises(PermissionError):
        db.commit_workload(matmul(8))


def test_a_deleted_workload_line_never_maps_records_to_the_wrong_workload(tmp_path):
    fill(tmp_path)  # workload line 0: matmul(8), line 1: matmul(4)
    wl = tmp_path / WL
    wl.write_text(wl.read_text().splitlines(keepends=True)[1])  # now line 0 is matmul(4)
    db, messages = load(tmp_path)
    assert len(db) == 6
    assert len(messages) == 1 and "6 records whose workload line is lost" in messages[0]
    for n in (8, 4):
        records = db.get_top_k(db.commit_workload(matmul(n)), 10)
        assert len(records) == 3
        assert all(r.workload.mod["main"].params[0].shape[0].value == n for r in records)
