"""Databases on hostile files: names that carry code, zip bombs, deeply nested lines. Bad
records are skipped with a warning naming the file and line; queries replay traces on the
caller's own module, so nothing stored reaches the generated code."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import tracemalloc
import warnings

import numpy as np
import pytest

import metaschedule as ms
from metaschedule.database import JSONDatabase, MemoryDatabase, SQLiteDatabase, json_database
from metaschedule.testing import hostile
from metaschedule.testing.hostile import (
    carried_bomb_line,
    fill_json_database,
    nesting_bomb,
    rename_buffer,
)
from metaschedule.testing.tuning_records import make_record, matmul
from metaschedule.tir_integration import compile_tir

WL = "database_workload.json"
REC = "database_tuning_record.json"
pytestmark = pytest.mark.usefixtures("isolated_kernel_cache")


@pytest.fixture
def isolated_kernel_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


def fill(work_dir, n=8, records=2) -> None:
    fill_json_database(str(work_dir), n, records)


def load(work_dir):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        db = JSONDatabase(work_dir=str(work_dir))
    return db, [str(w.message) for w in caught]


def plant_name(work_dir, new: str, old: str = "C") -> None:
    hostile.plant_name(str(work_dir), new, old)


def run(lib, n=8) -> None:
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((n, n)).astype("float32") for _ in range(2))
    c = np.zeros((n, n), "float32")
    lib(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ names carrying code
@pytest.mark.compiler
def test_issue_33_probe_a_planted_workload_runs_no_code(tmp_path):
    marker = tmp_path / "PWNED"
    fill(tmp_path)
    plant_name(tmp_path, f'C\nint ms_evil = system("touch {marker}");\n//')
    db, messages = load(tmp_path)
    assert any(
        WL in m and "malformed workload" in m and "line 1" in m and "control character" in m
        for m in messages
    ), messages
    assert any(REC in m and "malformed record" in m for m in messages), messages
    with pytest.raises(ValueError, match="no valid tuning record"):
        compile_tir(db, matmul(8), "llvm")
    assert not marker.exists()


@pytest.mark.compiler
def test_compile_tir_replays_on_the_callers_module_not_the_stored_one(tmp_path):
    fill(tmp_path)
    plant_name(tmp_path, "STORED_NAME")
    db, messages = load(tmp_path)
    assert not messages
    stored = db.get_all_tuning_records()[0].workload.mod["main"]
    assert stored.params[2].name == "STORED_NAME"  # the database holds the planted name
    sch = compile_tir(db, matmul(8), "llvm")
    assert [b.name for b in sch.mod["main"].params] == ["A", "B", "C"]
    lib = ms.build(sch.mod, "llvm")
    assert "STORED_NAME" not in lib.get_source()
    run(lib)


def _query_names(db, func) -> list[str]:
    sch = db.query_schedule(ms.tir.IRModule({"main": func}))
    return [b.name for b in sch.mod["main"].params]


def test_query_schedule_replays_on_the_callers_module_in_every_database(tmp_path):
    ours = matmul(8)
    theirs = ms.tir.IRModule({"main": ours})
    rename = json.loads(ms.tir.save_json(theirs))
    rename_buffer(rename, "C", "STORED_NAME")
    theirs = ms.tir.load_json(json.dumps(rename))
    path = str(tmp_path / "t.sqlite")
    for db in (MemoryDatabase(), SQLiteDatabase(path), JSONDatabase(work_dir=str(tmp_path))):
        w = db.commit_workload(theirs)
        assert w.mod["main"].params[2].name == "STORED_NAME"
        db.commit_tuning_record(make_record(w, [0.1]))
        assert _query_names(db, ours) == ["A", "B", "C"], db
        assert db.query_ir_module(ours)["main"].params[2].name == "C"
    # reopened from its file, too
    assert _query_names(SQLiteDatabase(path), ours) == ["A", "B", "C"]


def test_as_measure_candidate_replays_on_the_callers_module(tmp_path):
    """Given the caller's module, a record's candidate is that module scheduled, with its
    own arguments: neither the stored names nor the stored argument list reach it."""
    fill(tmp_path)
    plant_name(tmp_path, "STORED_NAME")
    db, _ = load(tmp_path)
    ours = ms.tir.IRModule({"main": matmul(8)})
    record = db.query_tuning_record(ours)
    stored = record.as_measure_candidate()  # no module given: the stored one, for showing
    assert stored.sch.mod["main"].params[2].name == "STORED_NAME"
    candidate = record.as_measure_candidate(ours)
    assert [b.name for b in candidate.sch.mod["main"].params] == ["A", "B", "C"]
    assert candidate.sch.trace.as_json() == record.trace.as_json()
    assert [a.shape for a in candidate.args_info] == [(8, 8)] * 3
    # a record whose stored arguments lie is measured with the module's own
    lying = dataclasses.replace(record, args_info=[ms.arg_info.TensorInfo("float32", (1 << 30,))])
    assert [a.shape for a in lying.as_measure_candidate(ours).args_info] == [(8, 8)] * 3
    with pytest.raises(Exception):  # noqa: B017 - the trace does not fit another module
        record.as_measure_candidate(ms.tir.IRModule({"main": matmul(6)}))


def test_sqlite_rows_with_control_characters_are_skipped(tmp_path):
    path = str(tmp_path / "t.sqlite")
    db = SQLiteDatabase(path)
    db.commit_tuning_record(make_record(db.commit_workload(matmul(8)), [0.1]))
    db.close()
    conn = sqlite3.connect(path)
    (text,) = conn.execute("SELECT json FROM workload").fetchone()
    shash, mod = json.loads(text)
    rename_buffer(mod, "C", "C\nsystem();")
    conn.execute("UPDATE workload SET json = ?", (json.dumps([shash, mod]),))
    conn.commit()
    conn.close()
    with pytest.warns(RuntimeWarning, match="workload row 1.*control character"):
        assert SQLiteDatabase(path).query_schedule(matmul(8)) is None


# -------------------------------------------------------------------- resource bombs
def test_a_carried_zip_bomb_is_skipped_within_a_bounded_memory(tmp_path):
    fill(tmp_path)
    with open(tmp_path / REC, "a") as f:
        f.write(carried_bomb_line(256 << 20) + "\n")
    assert os.path.getsize(tmp_path / REC) < 600_000
    tracemalloc.start()
    try:
        db, messages = load(tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * json_database.MAX_CARRIED_BYTES + (8 << 20), peak
    assert len(db) == 2  # the two good records
    (bomb,) = [m for m in messages if "MAX_CARRIED_BYTES" in m]
    assert f"{REC}: 1 malformed record (3) skipped" in bomb


def test_the_carried_cap_is_what_decides(tmp_path, monkeypatch):
    fill(tmp_path)
    (tmp_path / WL).write_text("")  # every record now needs the copy it carries
    monkeypatch.setattr(json_database, "MAX_CARRIED_BYTES", 100)
    db, messages = load(tmp_path)
    assert len(db) == 0 and any("MAX_CARRIED_BYTES = 100" in m for m in messages), messages
    monkeypatch.undo()
    db, messages = load(tmp_path)
    assert len(db) == 2


@pytest.mark.parametrize("where", [WL, REC])
def test_a_deeply_nested_line_is_reported_not_raised(tmp_path, where):
    fill(tmp_path)
    with open(tmp_path / where, "a") as f:
        f.write(nesting_bomb() + "\n")
    db, messages = load(tmp_path)  # no RecursionError
    (nested,) = [m for m in messages if "nested too deeply" in m]
    line = 2 if where == WL else 3
    assert nested.startswith(f"{tmp_path / where}: 1 malformed line ({line}) skipped")
    assert len(db) == 2
    db.commit_tuning_record(make_record(db.commit_workload(matmul(8)), [0.01], seed=9))
    assert load(tmp_path)[0].query_tuning_record(matmul(8)).run_secs == [0.01]


# ------------------------------------------------------------------- a lock held forever
def test_a_lock_held_by_another_process_bounds_the_wait(tmp_path, monkeypatch):
    import fcntl

    fill(tmp_path)
    db, _ = load(tmp_path)
    monkeypatch.setattr(json_database, "LOCK_TIMEOUT_SEC", 0.3)
    with open(tmp_path / WL, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a prune or committer that never finishes
        with pytest.raises(TimeoutError, match=f"{tmp_path / WL}: another process has held"):
            db.commit_tuning_record(make_record(db.commit_workload(matmul(8)), [0.01], seed=5))
    db.commit_tuning_record(make_record(db.commit_workload(matmul(8)), [0.01], seed=5))
    assert len(load(tmp_path)[0]) == 3
