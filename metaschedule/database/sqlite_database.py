"""SQLiteDatabase: one SQLite file that several processes may write at once.

The file is in WAL mode (readers never block the writer) with a busy timeout; every
commit is one ``BEGIN IMMEDIATE`` transaction, so concurrent writers queue instead of
failing, and a committed record survives the crash of its process. A connection is
opened per process (a forked child opens its own).

Tables: ``workload(id, shash, json)`` and ``tuning_record(id, workload_id, mean_run_sec,
json)``; ``mean_run_sec`` is NULL for a record without a valid run time, and an index on
``(workload_id, mean_run_sec)`` makes ``get_top_k`` a range scan. Records and workloads
are stored in the same JSON as the JSON database.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
import warnings
from typing import Any

from ..registry import register
from ..tir.function import IRModule, as_module
from ..utils import derived_object
from .base import PyDatabase, TuningRecord, Workload, check_top_k, mean_run_sec
from .module_equality import ModuleEquality, ModuleEqualityKind

__all__ = ["SQLiteDatabase"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS workload (
    id INTEGER PRIMARY KEY,
    shash INTEGER NOT NULL,
    json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS workload_by_shash ON workload (shash);
CREATE TABLE IF NOT EXISTS tuning_record (
    id INTEGER PRIMARY KEY,
    workload_id INTEGER NOT NULL REFERENCES workload (id),
    mean_run_sec REAL,
    json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS record_by_workload ON tuning_record (workload_id, mean_run_sec);
"""


@register("database", "sqlite")
@derived_object
class SQLiteDatabase(PyDatabase):
    """A database in one SQLite file, safe for several writing processes.

    Args:
        path: the database file (created if missing, with its folder).
        module_equality: "structural", "ignore-tensor" or "anchor-block".
        timeout_sec: how long a writer waits for another one before giving up.
    """

    def __init__(
        self,
        path: str,
        module_equality: ModuleEqualityKind = "structural",
        *,
        timeout_sec: float = 60.0,
    ):
        self.path = os.fspath(path)
        self.module_equality = module_equality
        self.timeout_sec = timeout_sec
        self._equality = ModuleEquality(module_equality)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._workloads: dict[int, Workload] = {}  # row id -> parsed workload
        self._row_of: dict[int, int] = {}  # id(workload) -> row id
        folder = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(folder, exist_ok=True)
        with self._lock:
            conn = self._connection()
            with conn:
                conn.executescript(_SCHEMA)

    # connection ---------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            # isolation_level=None: we issue BEGIN ourselves; check_same_thread off and
            # our own lock instead, so threads of one process share the connection.
            conn = sqlite3.connect(
                self.path, timeout=self.timeout_sec, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout_sec * 1000)}")
            if conn.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
                warnings.warn(f"{self.path}: SQLite refused WAL mode", RuntimeWarning, stacklevel=3)
            conn.execute("PRAGMA synchronous = FULL")
            self._conn, self._pid = conn, os.getpid()
            self._workloads.clear()
            self._row_of.clear()
        return self._conn

    def _write(self, sql_fn) -> Any:
        """Run ``sql_fn(conn)`` inside one BEGIN IMMEDIATE transaction."""
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = sql_fn(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                self._workloads.clear()  # it may cache rows that were rolled back
                self._row_of.clear()
                raise
            conn.execute("COMMIT")
            return result

    # workloads ------------------------------------------------------------------------
    def _workload(self, row_id: int, text: str | None = None) -> Workload:
        workload = self._workloads.get(row_id)
        if workload is None:
            if text is None:
                (text,) = (
                    self._connection()
                    .execute("SELECT json FROM workload WHERE id = ?", (row_id,))
                    .fetchone()
                )
            stored = Workload.from_json(json.loads(text))
            workload = Workload(stored.mod, self._equality.hash(stored.mod))
            self._workloads[row_id] = workload
            self._row_of[id(workload)] = row_id
        return workload

    def _find(self, conn: sqlite3.Connection, mod: IRModule) -> Workload | None:
        mod = as_module(mod)
        rows = conn.execute(
            "SELECT id, json FROM workload WHERE shash = ? ORDER BY id", (self._equality.hash(mod),)
        ).fetchall()
        for row_id, text in rows:
            try:
                workload = self._workload(row_id, text)
            except Exception as err:  # noqa: BLE001 - bad content is skipped, never a crash
                self._warn_row("workload", row_id, err)
                continue
            if self._equality.equal(workload.mod, mod):
                return workload
        return None

    def _warn_row(self, table: str, row_id: int, err: Exception) -> None:
        warnings.warn(
            f"{self.path}: skipping {table} row {row_id}: {type(err).__name__}: {err}",
            RuntimeWarning,
            stacklevel=4,
        )

    def _get_or_add(self, conn: sqlite3.Connection, mod: IRModule) -> Workload:
        workload = self._find(conn, mod)
        if workload is not None:
            return workload
        workload = Workload(as_module(mod), self._equality.hash(mod))
        text = json.dumps(workload.as_json(), separators=(",", ":"))
        cur = conn.execute(
            "INSERT INTO workload (shash, json) VALUES (?, ?)", (workload.shash, text)
        )
        self._workloads[cur.lastrowid] = workload
        self._row_of[id(workload)] = cur.lastrowid
        return workload

    # database -------------------------------------------------------------------------
    def has_workload(self, mod: IRModule) -> bool:
        with self._lock:
            return self._find(self._connection(), mod) is not None

    def commit_workload(self, mod: IRModule) -> Workload:
        with self._lock:
            found = self._find(self._connection(), mod)
            if found is not None:
                return found
            return self._write(lambda conn: self._get_or_add(conn, mod))

    def commit_tuning_record(self, record: TuningRecord) -> None:
        mean = mean_run_sec(record.run_secs)
        text = json.dumps(record.as_json(), separators=(",", ":"))

        def insert(conn: sqlite3.Connection) -> None:
            workload = record.workload
            if (
                id(workload) not in self._row_of
                or self._workloads.get(self._row_of[id(workload)]) is not workload
            ):
                workload = self._get_or_add(conn, workload.mod)
            conn.execute(
                "INSERT INTO tuning_record (workload_id, mean_run_sec, json) VALUES (?, ?, ?)",
                (self._row_of[id(workload)], None if math.isinf(mean) else mean, text),
            )

        self._write(insert)

    def _records(self, rows: list) -> list[TuningRecord]:
        out = []
        for row_id, workload_id, record_json in rows:
            try:
                workload = self._workload(workload_id)
                out.append(TuningRecord.from_json(json.loads(record_json), workload))
            except Exception as err:  # noqa: BLE001 - bad content is skipped, never a crash
                self._warn_row("tuning_record", row_id, err)
        return out

    def get_top_k(self, workload: Workload, top_k: int) -> list[TuningRecord]:
        check_top_k(top_k)
        with self._lock:
            conn = self._connection()
            own = self._find(conn, workload.mod)
            if own is None or top_k == 0:
                return []
            rows = conn.execute(
                "SELECT id, workload_id, json FROM tuning_record "
                "WHERE workload_id = ? AND mean_run_sec IS NOT NULL "
                "ORDER BY mean_run_sec, id LIMIT ?",
                (self._row_of[id(own)], top_k),
            ).fetchall()
            return self._records(rows)

    def get_all_tuning_records(self) -> list[TuningRecord]:
        with self._lock:
            rows = (
                self._connection()
                .execute("SELECT id, workload_id, json FROM tuning_record ORDER BY id")
                .fetchall()
            )
            return self._records(rows)

    def __len__(self) -> int:
        with self._lock:
            return self._connection().execute("SELECT COUNT(*) FROM tuning_record").fetchone()[0]

    def close(self) -> None:
        """Close this process's connection (a later call opens a new one)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __repr__(self) -> str:
        return f"SQLiteDatabase({self.path!r})"
