"""JSONDatabase: two JSON-lines files, appended one line per commit.

The workload file has one line per workload, ``[shash, module]``; the tuning-record file
one line per record, ``[workload_line, [trace, run_secs, target, args_info]]``, where
``workload_line`` is the 0-based line number of its workload in the workload file (TVM's
layout).

Several processes may share the files. Every commit appends one whole line with a single
``write`` on an ``O_APPEND`` descriptor while holding an exclusive ``flock`` on the
workload file, then flushes it to disk, so lines never interleave and a commit that
returned survives a crash of its process. Before writing, a committer reads what others
appended since it last looked, so workload line numbers agree between processes. Queries
read new lines too, so each process sees the others' records.

A torn line (a writer died mid-line) or a malformed one is skipped with a warning naming
the file and line; it still counts as a line, so line numbers stay stable. A torn last
line is terminated by the next committer, so it never swallows the next record.
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..registry import register
from ..tir.function import IRModule
from ..utils import derived_object
from .base import PyDatabase, TuningRecord, Workload
from .memory_database import RecordStore
from .module_equality import ModuleEquality, ModuleEqualityKind

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no inter-process lock
    fcntl = None  # type: ignore[assignment]

__all__ = ["JSONDatabase"]

WORKLOAD_FILE = "database_workload.json"
TUNING_RECORD_FILE = "database_tuning_record.json"


def _sync_to_disk(fd: int) -> None:
    (getattr(os, "fdatasync", None) or os.fsync)(fd)


class _LinesFile:
    """One JSON-lines file: reads what was appended since last time, appends lines."""

    def __init__(self, path: str):
        self.path = path
        self.fd = -1
        self.reopen()
        self.offset = 0  # bytes consumed: always at the start of a line
        self.lines = 0  # complete lines consumed
        self._warned_torn_at = -1

    def reopen(self) -> None:
        """Open the file anew: a forked child must not share its parent's open file,
        since ``flock`` does not exclude holders of the same open file."""
        self.close()
        self.fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)

    def read_new(self, parse: Callable[[int, Any], None], at_load: bool = False) -> None:
        """Parse every complete line appended since the last call, in order.

        ``parse(line_number, obj)`` receives each well-formed line; malformed lines are
        skipped with a warning. A trailing fragment without a newline is left for later
        (a writer may finish it), except that at load time it is reported as torn.
        """
        size = os.fstat(self.fd).st_size
        if size <= self.offset:
            return
        data = os.pread(self.fd, size - self.offset, self.offset)
        end = data.rfind(b"\n") + 1
        start = 0
        while start < end:
            stop = data.index(b"\n", start)
            line = data[start:stop]
            line_offset = self.offset + start
            if line.strip():
                try:
                    obj = json.loads(line)
                except ValueError as err:
                    if line_offset != self._warned_torn_at:
                        self._warn(self.lines, f"malformed JSON ({err})")
                else:
                    parse(self.lines, obj)
            self.lines += 1
            start = stop + 1
        self.offset += end
        if at_load and end < len(data) and self.offset != self._warned_torn_at:
            self._warned_torn_at = self.offset
            self._warn(self.lines, "torn last line (no newline: its writer was interrupted)")

    def _warn(self, line: int, what: str) -> None:
        warnings.warn(f"{self.path}:{line + 1}: skipping {what}", RuntimeWarning, stacklevel=4)

    def append(self, obj: Any) -> int:
        """Append one line (the caller holds the exclusive lock and has read everything
        complete); return its line number."""
        size = os.fstat(self.fd).st_size
        if size > self.offset:  # a torn fragment: end it, so it stays a line of its own
            os.write(self.fd, b"\n")
            if self._warned_torn_at != self.offset:
                self._warn(self.lines, "torn line (no newline: its writer was interrupted)")
            self.offset = size + 1
            self.lines += 1
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode("utf-8")
        written = os.write(self.fd, data)
        if written != len(data):  # pragma: no cover - a full disk
            raise OSError(f"{self.path}: wrote {written} of {len(data)} bytes")
        _sync_to_disk(self.fd)
        line = self.lines
        self.offset += len(data)
        self.lines += 1
        return line

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@register("database", "json")
@derived_object
class JSONDatabase(PyDatabase):
    """A database stored in two JSON-lines files (see the module docstring).

    Args:
        path_workload: the workload file.
        path_tuning_record: the tuning-record file.
        work_dir: a folder holding ``database_workload.json`` and
            ``database_tuning_record.json``; used for paths that are not given.
        allow_missing: create missing files (and folders) instead of raising.
        module_equality: "structural", "ignore-tensor" or "anchor-block".
    """

    def __init__(
        self,
        path_workload: str | None = None,
        path_tuning_record: str | None = None,
        *,
        work_dir: str | None = None,
        allow_missing: bool = True,
        module_equality: ModuleEqualityKind = "structural",
    ):
        if work_dir is not None:
            path_workload = path_workload or os.path.join(work_dir, WORKLOAD_FILE)
            path_tuning_record = path_tuning_record or os.path.join(work_dir, TUNING_RECORD_FILE)
        if path_workload is None or path_tuning_record is None:
            raise ValueError(
                "JSONDatabase needs work_dir, or both path_workload and path_tuning_record; got "
                f"path_workload={path_workload!r}, path_tuning_record={path_tuning_record!r}"
            )
        for path in (path_workload, path_tuning_record):
            if not os.path.exists(path):
                if not allow_missing:
                    raise FileNotFoundError(
                        f"JSONDatabase: {path} does not exist (allow_missing=False)"
                    )
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path_workload = path_workload
        self.path_tuning_record = path_tuning_record
        self.module_equality = module_equality
        self._store = RecordStore(ModuleEquality(module_equality))
        self._workload_file = _LinesFile(path_workload)
        self._record_file = _LinesFile(path_tuning_record)
        self._workload_at_line: dict[int, Workload] = {}
        self._line_of_workload: dict[int, int] = {}  # id(workload) -> line
        # flock excludes other open files, not threads sharing this one
        self._thread_lock = threading.RLock()
        self._pid = os.getpid()
        with self._lock(exclusive=False):
            self._sync(at_load=True)

    # files ----------------------------------------------------------------------------
    @contextmanager
    def _lock(self, exclusive: bool) -> Iterator[None]:
        with self._thread_lock:
            if self._pid != os.getpid():  # forked: get our own open files
                self._workload_file.reopen()
                self._record_file.reopen()
                self._pid = os.getpid()
            if fcntl is None:  # pragma: no cover
                yield
                return
            fd = self._workload_file.fd
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _sync(self, at_load: bool = False) -> None:
        """Take in the lines appended since the last sync (under a lock)."""
        self._workload_file.read_new(self._parse_workload, at_load)
        self._record_file.read_new(self._parse_record, at_load)

    def _parse_workload(self, line: int, obj: Any) -> None:
        try:
            mod = Workload.from_json(obj).mod
        except Exception as err:  # noqa: BLE001 - bad content is skipped, never a crash
            self._workload_file._warn(line, f"{type(err).__name__}: {err}")
            return
        workload = self._store.get_or_add(mod)
        self._workload_at_line[line] = workload
        self._line_of_workload.setdefault(id(workload), line)

    def _parse_record(self, line: int, obj: Any) -> None:
        try:
            workload_line, record_json = obj
            workload = self._workload_at_line.get(workload_line)
            if workload is None:
                raise ValueError(
                    f"it refers to workload line {workload_line}, which is not a workload"
                )
            record = TuningRecord.from_json(record_json, workload)
        except Exception as err:  # noqa: BLE001 - bad content is skipped, never a crash
            self._record_file._warn(line, f"{type(err).__name__}: {err}")
            return
        self._store.add_record(record, workload)

    def _commit_workload_locked(self, mod: IRModule) -> Workload:
        workload = self._store.find(mod)
        if workload is None:
            workload = self._store.add_workload(mod)
            line = self._workload_file.append(workload.as_json())
            self._workload_at_line[line] = workload
            self._line_of_workload[id(workload)] = line
        return workload

    # database -------------------------------------------------------------------------
    def has_workload(self, mod: IRModule) -> bool:
        with self._lock(exclusive=False):
            self._sync()
        return self._store.find(mod) is not None

    def commit_workload(self, mod: IRModule) -> Workload:
        with self._lock(exclusive=True):
            self._sync()
            return self._commit_workload_locked(mod)

    def commit_tuning_record(self, record: TuningRecord) -> None:
        with self._lock(exclusive=True):
            self._sync()
            workload = record.workload
            if not self._store.owns(workload):
                workload = self._commit_workload_locked(workload.mod)
            line = self._line_of_workload[id(workload)]
            self._record_file.append([line, record.as_json()])
            self._store.add_record(record, workload)

    def get_top_k(self, workload: Workload, top_k: int) -> list[TuningRecord]:
        with self._lock(exclusive=False):
            self._sync()
        return self._store.top_k(workload, top_k)

    def get_all_tuning_records(self) -> list[TuningRecord]:
        with self._lock(exclusive=False):
            self._sync()
        return self._store.all_records()

    def __len__(self) -> int:
        with self._lock(exclusive=False):
            self._sync()
        return len(self._store)

    def close(self) -> None:
        """Close the files; the database cannot be used afterwards."""
        self._workload_file.close()
        self._record_file.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass

    def __repr__(self) -> str:
        return f"JSONDatabase({self.path_workload!r}, {self.path_tuning_record!r})"
