"""SQLiteDatabase: one SQLite file that several processes may write at once.

The file is in WAL mode (readers never block the writer) with a busy timeout; every
commit is one ``BEGIN IMMEDIATE`` transaction, so concurrent writers queue instead of
failing, and a committed record survives the crash of its process. A write that still
meets a locked database (SQLite skips the busy handler in some cases, e.g. while another
process recovers the WAL) is retried with backoff until ``timeout_sec``. A connection is
opened per process (a forked child opens its own). Tuners on several machines may share
the file where the file system gives SQLite working locks (a local disk, not NFS).

No duplicates: finding or adding a workload happens inside the write transaction, so two
processes never add the same workload twice; each record carries ``record_key`` (a hash
of its workload row and its JSON) under a UNIQUE index and is written with ``INSERT OR
IGNORE``, so committing the same record twice (from a retry, or from two tuners that
share results) stores it once.

Tables: ``workload(id, shash, json)`` and ``tuning_record(id, workload_id, mean_run_sec,
json, record_key, measurement_key)``; ``mean_run_sec`` is NULL for a record without a
valid run time, and an index on ``(workload_id, mean_run_sec)`` makes ``get_top_k`` a range
scan. ``measurement_key`` names the schedule a record measures
(:func:`~metaschedule.database.base.measurement_key`): of the valid records of one
schedule, ``get_top_k`` returns only the latest (the rule of
:mod:`metaschedule.database.base`). Files written before that column existed get it filled
in when opened. Records and workloads are stored in the same JSON as the JSON database.

A failed commit (a full disk) is rolled back and raises; the records before it stay, and
a connection whose rollback failed too is closed, so the next commit opens a new one.
:meth:`SQLiteDatabase.prune` deletes records inside one write transaction on the live
file: nothing is swapped, and tuners writing the file meanwhile are not disturbed.

Open databases you trust: a hostile file can inject no code (names are checked and
escaped, and queries replay traces on the caller's own module), but it decides which
schedules are used; rows that do not parse are skipped with a warning.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import sqlite3
import threading
import time
import warnings
from typing import Any

from ..registry import register
from ..tir.function import IRModule, as_module
from ..utils import derived_object
from .base import (
    PyDatabase,
    TuningRecord,
    Workload,
    check_top_k,
    mean_run_sec,
    measurement_key_of_json,
)
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
# Files written before record keys existed get the column; their old rows keep NULL
# (NULLs never collide in a UNIQUE index).
_RECORD_KEY_SCHEMA = """
ALTER TABLE tuning_record ADD COLUMN record_key TEXT;
"""
_RECORD_KEY_INDEX = "CREATE UNIQUE INDEX IF NOT EXISTS record_by_key ON tuning_record (record_key)"
# Files written before measurement keys existed get the column, filled in from the JSON.
_MEASUREMENT_KEY_SCHEMA = "ALTER TABLE tuning_record ADD COLUMN measurement_key TEXT"
_MEASUREMENT_KEY_INDEX = (
    "CREATE INDEX IF NOT EXISTS record_by_schedule "
    "ON tuning_record (workload_id, measurement_key, id)"
)


def _measurement_key_of_row(text: str) -> str | None:
    try:
        record_json = json.loads(text)
        return measurement_key_of_json(record_json[0], record_json[2])
    except (ValueError, TypeError, IndexError, KeyError):
        return None  # a malformed row: it ranks as a schedule of its own


def _is_busy(err: sqlite3.OperationalError) -> bool:
    text = str(err).lower()
    return "locked" in text or "busy" in text


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
            self._write(self._create_schema)

    @staticmethod
    def _create_schema(conn: sqlite3.Connection) -> None:
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        columns = {row[1] for row in conn.execute("PRAGMA table_info(tuning_record)")}
        if "record_key" not in columns:
            conn.execute(_RECORD_KEY_SCHEMA)
        conn.execute(_RECORD_KEY_INDEX)
        if "measurement_key" not in columns:
            conn.execute(_MEASUREMENT_KEY_SCHEMA)
            rows = conn.execute("SELECT id, json FROM tuning_record").fetchall()
            conn.executemany(
                "UPDATE tuning_record SET measurement_key = ? WHERE id = ?",
                [(_measurement_key_of_row(text), row_id) for row_id, text in rows],
            )
        conn.execute(_MEASUREMENT_KEY_INDEX)

    # connection ---------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            self._conn = self._retry(self._open)
            self._pid = os.getpid()
            self._workloads.clear()
            self._row_of.clear()
        return self._conn

    def _open(self) -> sqlite3.Connection:
        # isolation_level=None: we issue BEGIN ourselves; check_same_thread off and
        # our own lock instead, so threads of one process share the connection.
        conn = sqlite3.connect(
            self.path, timeout=self.timeout_sec, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout_sec * 1000)}")
            if conn.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
                warnings.warn(f"{self.path}: SQLite refused WAL mode", RuntimeWarning, stacklevel=4)
            conn.execute("PRAGMA synchronous = FULL")
        except BaseException:
            conn.close()
            raise
        return conn

    def _retry(self, fn) -> Any:
        """Call ``fn()`` again while SQLite says the database is locked, until timeout."""
        deadline = time.monotonic() + self.timeout_sec
        delay = 0.005
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as err:
                if not _is_busy(err) or time.monotonic() + delay > deadline:
                    raise
            time.sleep(delay * (0.5 + random.random()))  # jitter: writers do not march in step
            delay = min(delay * 2, 0.5)

    def _write(self, sql_fn) -> Any:
        """Run ``sql_fn(conn)`` inside one BEGIN IMMEDIATE transaction (retried if locked)."""
        with self._lock:
            return self._retry(lambda: self._transaction(sql_fn))

    def _transaction(self, sql_fn) -> Any:
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = sql_fn(conn)
            conn.execute("COMMIT")
        except BaseException:
            self._workloads.clear()  # it may cache rows that were rolled back
            self._row_of.clear()
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:  # e.g. the disk is full: start on a new connection
                    self._drop_connection()
            raise
        return result

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and self._pid == os.getpid():
            try:
                conn.close()
            except sqlite3.Error:
                pass

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
    def _read(self, fn) -> Any:
        """``fn(conn)`` for a query, retried if the file is locked (e.g. WAL recovery)."""
        with self._lock:
            return self._retry(lambda: fn(self._connection()))

    def has_workload(self, mod: IRModule) -> bool:
        return self._read(lambda conn: self._find(conn, mod)) is not None

    def commit_workload(self, mod: IRModule) -> Workload:
        with self._lock:
            found = self._read(lambda conn: self._find(conn, mod))
            if found is not None:
                return found
            return self._write(lambda conn: self._get_or_add(conn, mod))

    def commit_tuning_record(self, record: TuningRecord) -> None:
        mean = mean_run_sec(record.run_secs)
        record_json = record.as_json()
        text = json.dumps(record_json, separators=(",", ":"))
        measurement = measurement_key_of_json(record_json[0], record_json[2])

        def insert(conn: sqlite3.Connection) -> None:
            workload = record.workload
            if (
                id(workload) not in self._row_of
                or self._workloads.get(self._row_of[id(workload)]) is not workload
            ):
                workload = self._get_or_add(conn, workload.mod)
            row = self._row_of[id(workload)]
            key = hashlib.sha256(f"{row}:{text}".encode()).hexdigest()
            conn.execute(
                "INSERT OR IGNORE INTO tuning_record "
                "(workload_id, mean_run_sec, json, record_key, measurement_key) "
                "VALUES (?, ?, ?, ?, ?)",
                (row, None if math.isinf(mean) else mean, text, key, measurement),
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

        def query(conn: sqlite3.Connection) -> list:
            own = self._find(conn, workload.mod)
            if own is None or top_k == 0:
                return []
            # the latest valid record of each schedule (a NULL key: a schedule of its own)
            return conn.execute(
                "SELECT id, workload_id, json FROM tuning_record WHERE id IN ("
                "SELECT MAX(id) FROM tuning_record "
                "WHERE workload_id = ? AND mean_run_sec IS NOT NULL "
                "GROUP BY COALESCE(measurement_key, 'row ' || id)) "
                "ORDER BY mean_run_sec, id LIMIT ?",
                (self._row_of[id(own)], top_k),
            ).fetchall()

        with self._lock:
            return self._records(self._read(query))

    def get_all_tuning_records(self) -> list[TuningRecord]:
        with self._lock:
            rows = self._read(
                lambda conn: conn.execute(
                    "SELECT id, workload_id, json FROM tuning_record ORDER BY id"
                ).fetchall()
            )
            return self._records(rows)

    def __len__(self) -> int:
        return self._read(
            lambda conn: conn.execute("SELECT COUNT(*) FROM tuning_record").fetchone()[0]
        )

    def prune(self, top_k: int) -> tuple[int, int]:
        """Keep the ``top_k`` fastest valid records of each workload (as ``get_top_k``
        ranks them) and delete the others, failed measurements included; return (records
        kept, records before). One write transaction on the live file: tuners writing it
        meanwhile wait for it, and nothing is swapped. Workload rows stay (a running tuner
        may refer to them); the file does not shrink until a ``VACUUM``.
        """
        check_top_k(top_k)

        def delete(conn: sqlite3.Connection) -> tuple[int, int]:
            (before,) = conn.execute("SELECT COUNT(*) FROM tuning_record").fetchone()
            conn.execute(
                "DELETE FROM tuning_record WHERE id NOT IN ("
                "SELECT id FROM (SELECT id, ROW_NUMBER() OVER ("
                "PARTITION BY workload_id ORDER BY mean_run_sec, id) AS rank "
                "FROM tuning_record WHERE id IN ("
                "SELECT MAX(id) FROM tuning_record WHERE mean_run_sec IS NOT NULL "
                "GROUP BY workload_id, COALESCE(measurement_key, 'row ' || id))) "
                "WHERE rank <= ?)",
                (top_k,),
            )
            (after,) = conn.execute("SELECT COUNT(*) FROM tuning_record").fetchone()
            return after, before

        return self._write(delete)

    def close(self) -> None:
        """Close this process's connection (a later call opens a new one)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __repr__(self) -> str:
        return f"SQLiteDatabase({self.path!r})"
