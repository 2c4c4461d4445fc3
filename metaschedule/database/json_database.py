"""JSONDatabase: two JSON-lines files, appended one line per commit.

The workload file has one line per workload, ``[shash, module]``; the tuning-record file
one line per record, ``[workload_line, [trace, run_secs, target, args_info], carried]``,
where ``workload_line`` is the 0-based line number of its workload in the workload file
(TVM's layout) and ``carried`` is ``[shash, module]`` with the module's JSON compressed
(zlib, base64). A record thus carries its workload: when the workload line is lost (a
truncated or garbled workload file) the record is recovered from what it carries rather
than orphaned. Lines without ``carried`` (older files, TVM's) are still read.

Several processes may share the files. Every commit appends one whole line with a single
``write`` on an ``O_APPEND`` descriptor while holding an exclusive ``flock`` on the
workload file, then flushes it to disk, so lines never interleave and a commit that
returned survives a crash of its process. Before writing, a committer reads what others
appended since it last looked, so workload line numbers agree between processes. Queries
read new lines too, so each process sees the others' records.

Bad input is reported, never fatal: a torn line (a writer died mid-line), a malformed
line (bad JSON, or JSON nested too deeply to parse), a record whose trace does not parse
(an unknown instruction, ...), whose workload is missing, or whose carried workload
inflates to more than :data:`MAX_CARRIED_BYTES`, and IR that fails the checks of
:mod:`metaschedule.tir.serialize` (a control character in a name, ...) are skipped, and
each read ends with one warning per file and kind of problem that lists the line numbers
("database_tuning_record.json: 3 malformed lines (12, 40, 41) skipped; ..."). Skipped
lines still count as lines, so line numbers stay stable. A torn last line is terminated by
the next committer, so it never swallows the next record. A write that fails (a full
disk) is taken back (the file is truncated to where the line began) and raises; the
records before it stay, and the next commit starts on a clean line.

Files replaced under a running database (:meth:`JSONDatabase.prune`, ``metaschedule db
prune``, writes new files and moves them over the old ones while holding the exclusive
lock) are noticed: after taking the lock, a database whose paths now name other files
reopens them and reads them from the start.

Open databases you trust: a hostile file can inject no code (names are checked and
escaped, and queries replay traces on the caller's own module), but it decides which
schedules are used.

Files are opened for writing lazily: a database in a read-only folder (or on read-only
files) can be queried; only a commit raises, with a ``PermissionError`` that says so.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import tempfile
import threading
import time
import warnings
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..registry import register
from ..tir.function import IRModule
from ..utils import derived_object
from .base import PyDatabase, TuningRecord, Workload, check_top_k, measurement_key_of_json
from .memory_database import RecordStore
from .module_equality import ModuleEquality, ModuleEqualityKind

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no inter-process lock
    fcntl = None  # type: ignore[assignment]

__all__ = ["JSONDatabase"]

WORKLOAD_FILE = "database_workload.json"
TUNING_RECORD_FILE = "database_tuning_record.json"
_SHOWN_LINES = 10  # line numbers listed per problem in a summary

MAX_CARRIED_BYTES = 16 << 20
#: the longest a commit or query waits for another process's lock on the files; past it a
#: ``TimeoutError`` names the file (a process that holds it forever stalls no one forever)
LOCK_TIMEOUT_SEC = 600.0
"""The most bytes a record's carried workload may inflate to (its module JSON); a record
that carries more is skipped. A zip bomb in a short line cannot take the memory."""


def _sync_to_disk(fd: int) -> None:
    (getattr(os, "fdatasync", None) or os.fsync)(fd)


_PLURAL = {
    "malformed line": "malformed lines",
    "torn last line": "torn last lines",
    "torn line": "torn lines",
    "malformed workload": "malformed workloads",
    "malformed record": "malformed records",
    "record whose workload is missing": "records whose workload is missing",
    "record whose workload line is lost": "records whose workload line is lost",
}


class _Report:
    """Problems met while reading, summarised as one warning per file and kind."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str, str], list[tuple[int, str]]] = {}

    def add(self, path: str, what: str, line: int, reason: str, verb: str = "skipped") -> None:
        self.items.setdefault((path, what, verb), []).append((line, reason))

    def flush(self) -> None:
        items, self.items = self.items, {}
        for (path, what, verb), entries in items.items():
            n = len(entries)
            lines = [str(line + 1) for line, _ in entries[:_SHOWN_LINES]]
            if n > _SHOWN_LINES:
                lines.append("...")
            plural = _PLURAL.get(what, what) if n > 1 else what
            first_line, reason = entries[0]
            warnings.warn(
                f"{path}: {n} {plural} ({', '.join(lines)}) {verb}; line {first_line + 1}: "
                f"{reason}",
                RuntimeWarning,
                stacklevel=4,
            )


class _LinesFile:
    """One JSON-lines file: reads what was appended since last time, appends lines."""

    def __init__(self, path: str):
        self.path = path
        self.fd = -1
        self.writable = False
        self.reopen()
        self.offset = 0  # bytes consumed: always at the start of a line
        self.lines = 0  # complete lines consumed
        self._warned_torn_at = -1

    def reopen(self) -> None:
        """Open the file anew: a forked child must not share its parent's open file,
        since ``flock`` does not exclude holders of the same open file. Falls back to
        reading only (or to an absent file) where writing is not allowed."""
        self.close()
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            self.writable = True
        except OSError as err:
            if err.errno not in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT):
                raise
            self.writable = False
            try:
                self.fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                self.fd = -1  # nothing to read yet; created on the first commit

    def ensure_writable(self) -> None:
        """Open for appending, or raise a ``PermissionError`` that says what to do."""
        if self.writable:
            return
        try:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as err:
            raise PermissionError(
                f"JSONDatabase: cannot write to {self.path} ({err.strerror}); the database "
                "is read-only: it can be queried, but tuning needs a writable work_dir"
            ) from None
        self.close()
        self.fd, self.writable = fd, True

    def read_new(
        self, parse: Callable[[int, Any], None], report: _Report, at_load: bool = False
    ) -> None:
        """Parse every complete line appended since the last call, in order.

        ``parse(line_number, obj)`` receives each well-formed line; malformed lines are
        reported and skipped. A trailing fragment without a newline is left for later (a
        writer may finish it), except that at load time it is reported as torn.
        """
        if self.fd < 0:  # absent so far (read-only place): another process may create it
            try:
                self.fd = os.open(self.path, os.O_RDONLY)
            except OSError:
                return
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
                except (ValueError, RecursionError) as err:
                    if line_offset != self._warned_torn_at:
                        why = "nested too deeply" if isinstance(err, RecursionError) else err
                        report.add(self.path, "malformed line", self.lines, f"bad JSON ({why})")
                else:
                    parse(self.lines, obj)
            self.lines += 1
            start = stop + 1
        self.offset += end
        if at_load and end < len(data) and self.offset != self._warned_torn_at:
            self._warned_torn_at = self.offset
            report.add(
                self.path, "torn last line", self.lines, "no newline: its writer was interrupted"
            )

    def append(self, obj: Any, report: _Report) -> int:
        """Append one line (the caller holds the exclusive lock, has read everything
        complete and made the file writable); return its line number."""
        size = os.fstat(self.fd).st_size
        if size > self.offset:  # a torn fragment: end it, so it stays a line of its own
            os.write(self.fd, b"\n")
            if self._warned_torn_at != self.offset:
                report.add(
                    self.path, "torn line", self.lines, "no newline: its writer was interrupted"
                )
            self.offset = size + 1
            self.lines += 1
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode("utf-8")
        start = self.offset
        try:
            written = os.write(self.fd, data)
            if written != len(data):  # a full disk, or the file size limit
                raise OSError(
                    errno.ENOSPC,
                    f"{self.path}: wrote {written} of {len(data)} bytes (is the disk full?)",
                )
            _sync_to_disk(self.fd)
        except BaseException:
            # take the partial line back: we hold the lock, nothing was appended after it
            try:
                os.ftruncate(self.fd, start)
            except OSError:
                pass  # it stays a torn line, which the next committer terminates
            raise
        line = self.lines
        self.offset += len(data)
        self.lines += 1
        return line

    def rewind(self) -> None:
        """Read the file from its start at the next :meth:`read_new` (after reopening it)."""
        self.offset = self.lines = 0
        self._warned_torn_at = -1

    def replaced(self) -> bool:
        """Whether the path now names another file than the one open (moved over it)."""
        if self.fd < 0:
            return False
        try:
            now = os.stat(self.path)
        except OSError:
            return False  # removed: keep what we have
        mine = os.fstat(self.fd)
        return (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _flock(fd: int, exclusive: bool, path: str) -> None:
    """``flock`` ``fd``, waiting at most :data:`LOCK_TIMEOUT_SEC` (polled, backing off)."""
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    deadline, pause = time.monotonic() + LOCK_TIMEOUT_SEC, 0.001
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"{path}: another process has held the database's lock for "
                    f"{LOCK_TIMEOUT_SEC:g} s (a prune, or a committer that stopped); "
                    "try again when it is done, or find it with 'fuser' or 'lsof'"
                ) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


def _write_beside(path: str, lines: list) -> str:
    """A new file next to ``path`` holding ``lines`` (one JSON value each), flushed to
    disk, with the permissions of ``path``; its name, to move over ``path``."""
    folder, name = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".new", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            for obj in lines:
                f.write((json.dumps(obj, separators=(",", ":")) + "\n").encode("utf-8"))
            f.flush()
            try:
                os.fchmod(f.fileno(), os.stat(path).st_mode & 0o7777)
            except OSError:
                pass
            _sync_to_disk(f.fileno())
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def _pack_workload(workload: Workload) -> list:
    """``[shash, compressed module JSON]``: what a record carries of its workload."""
    shash, mod = workload.as_json()
    text = json.dumps(mod, separators=(",", ":")).encode("utf-8")
    return [shash, base64.b64encode(zlib.compress(text, 6)).decode("ascii")]


def _unpack_workload(carried: Any) -> Workload:
    try:
        shash, blob = carried
        inflater = zlib.decompressobj()
        text = inflater.decompress(base64.b64decode(blob), MAX_CARRIED_BYTES)
        if inflater.unconsumed_tail:
            raise ValueError(
                f"it inflates to more than MAX_CARRIED_BYTES = {MAX_CARRIED_BYTES} bytes "
                "(not a workload this database wrote)"
            )
        text = text.decode("utf-8")
    except (TypeError, ValueError, zlib.error) as err:
        raise ValueError(f"malformed carried workload: {type(err).__name__}: {err}") from err
    return Workload.from_json([shash, text])


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
                try:
                    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
                except OSError:
                    pass  # a read-only place: queries see nothing, a commit says why
        self.path_workload = path_workload
        self.path_tuning_record = path_tuning_record
        self.module_equality = module_equality
        self._store = RecordStore(ModuleEquality(module_equality))
        self._workload_file = _LinesFile(path_workload)
        self._record_file = _LinesFile(path_tuning_record)
        self._workload_at_line: dict[int, Workload] = {}
        self._line_of_workload: dict[int, int] = {}  # id(workload) -> line
        self._carried: dict[int, list] = {}  # id(workload) -> what its records carry
        self._recovered: dict[str, Workload] = {}  # carried blob -> workload
        self._origin: dict[int, int] = {}  # id(record) -> line in the record file
        self._report = _Report()
        # flock excludes other open files, not threads sharing this one
        self._thread_lock = threading.RLock()
        self._pid = os.getpid()
        with self._lock(exclusive=False):
            self._sync(at_load=True)

    # files ----------------------------------------------------------------------------
    @property
    def writable(self) -> bool:
        """Whether commits can be written (opens the files for appending if need be)."""
        try:
            with self._lock(exclusive=True):
                pass
        except PermissionError:
            return False
        return True

    @contextmanager
    def _lock(self, exclusive: bool) -> Iterator[None]:
        with self._thread_lock:
            if self._pid != os.getpid():  # forked: get our own open files
                self._workload_file.reopen()
                self._record_file.reopen()
                self._pid = os.getpid()
            while True:
                if exclusive:
                    self._workload_file.ensure_writable()
                    self._record_file.ensure_writable()
                wl, rec = self._workload_file, self._record_file
                fd = wl.fd if wl.fd >= 0 else rec.fd
                if fcntl is None or fd < 0:  # pragma: no cover - no lock, or nothing to read
                    break
                _flock(fd, exclusive, wl.path if wl.fd >= 0 else rec.path)
                if not (wl.replaced() or rec.replaced()):
                    try:
                        yield
                    finally:
                        fcntl.flock(fd, fcntl.LOCK_UN)
                    return
                fcntl.flock(fd, fcntl.LOCK_UN)  # moved over by a prune: start again
                self._reload()
            yield

    def _reload(self) -> None:
        """Forget what was read and reopen the files, to read them from the start."""
        for f in (self._workload_file, self._record_file):
            f.reopen()
            f.rewind()
        self._store = RecordStore(ModuleEquality(self.module_equality))
        for table in (
            self._workload_at_line,
            self._line_of_workload,
            self._carried,
            self._recovered,
            self._origin,
        ):
            table.clear()

    def _sync(self, at_load: bool = False) -> None:
        """Take in the lines appended since the last sync (under a lock)."""
        try:
            self._workload_file.read_new(self._parse_workload, self._report, at_load)
            self._record_file.read_new(self._parse_record, self._report, at_load)
        finally:
            self._report.flush()

    def _parse_workload(self, line: int, obj: Any) -> None:
        try:
            mod = Workload.from_json(obj).mod
        except Exception as err:  # noqa: BLE001 - bad content is skipped, never a crash
            self._report.add(
                self.path_workload, "malformed workload", line, f"{type(err).__name__}: {err}"
            )
            return
        workload = self._store.get_or_add(mod)
        self._workload_at_line[line] = workload
        self._line_of_workload.setdefault(id(workload), line)

    def _parse_record(self, line: int, obj: Any) -> None:
        path = self.path_tuning_record
        recovered = None
        try:
            if not isinstance(obj, list) or len(obj) not in (2, 3):
                raise ValueError(
                    "expected [workload_line, record] or [workload_line, record, workload]"
                )
            workload_line, record_json = obj[0], obj[1]
            carried = obj[2] if len(obj) == 3 else None
            workload = None
            if isinstance(workload_line, int):
                workload = self._workload_at_line.get(workload_line)
            if carried is not None and (workload is None or str(workload.shash) != carried[0]):
                recovered = workload_line
                workload = self._recover(carried)
            if workload is None:
                self._report.add(
                    path,
                    "record whose workload is missing",
                    line,
                    f"it refers to workload line {workload_line}, which is not a workload, "
                    "and carries no copy of its workload (an older file)",
                )
                return
            record = TuningRecord.from_json(record_json, workload)
        except Exception as err:  # noqa: BLE001 - bad content is skipped, never a crash
            self._report.add(path, "malformed record", line, f"{type(err).__name__}: {err}")
            return
        if recovered is not None:
            self._report.add(
                path,
                "record whose workload line is lost",
                line,
                f"workload line {recovered} is missing or differs; used the copy the record "
                "carries",
                verb="recovered",
            )
        key = measurement_key_of_json(record_json[0], record_json[2])
        stored = self._store.add_record(record, workload, key)
        self._origin[id(stored)] = line

    def _recover(self, carried: Any) -> Workload:
        key = json.dumps(carried)
        workload = self._recovered.get(key)
        if workload is None:
            workload = self._store.get_or_add(_unpack_workload(carried).mod)
            self._recovered[key] = workload
        return workload

    def _workload_line_locked(self, workload: Workload) -> int:
        line = self._line_of_workload.get(id(workload))
        if line is None:  # new, or recovered from records: (re)write its line
            line = self._workload_file.append(workload.as_json(), self._report)
            self._workload_at_line[line] = workload
            self._line_of_workload[id(workload)] = line
        return line

    def _carried_of(self, workload: Workload) -> list:
        carried = self._carried.get(id(workload))
        if carried is None:
            carried = self._carried[id(workload)] = _pack_workload(workload)
        return carried

    def record_origin(self, record: TuningRecord) -> str | None:
        line = self._origin.get(id(record))
        return None if line is None else f"{self.path_tuning_record}:{line + 1}"

    # database -------------------------------------------------------------------------
    def has_workload(self, mod: IRModule) -> bool:
        with self._lock(exclusive=False):
            self._sync()
        return self._store.find(mod) is not None

    def commit_workload(self, mod: IRModule) -> Workload:
        with self._lock(exclusive=False):  # known workloads need no write (read-only use)
            self._sync()
            workload = self._store.find(mod)
            if workload is not None:
                return workload
        with self._lock(exclusive=True):
            self._sync()
            workload = self._store.get_or_add(mod)
            self._workload_line_locked(workload)
            return workload

    def commit_tuning_record(self, record: TuningRecord) -> None:
        with self._lock(exclusive=True):
            self._sync()
            workload = record.workload
            if not self._store.owns(workload):
                workload = self._store.get_or_add(workload.mod)
            line = self._workload_line_locked(workload)
            record_json = record.as_json()
            rec_line = self._record_file.append(
                [line, record_json, self._carried_of(workload)], self._report
            )
            key = measurement_key_of_json(record_json[0], record_json[2])
            stored = self._store.add_record(record, workload, key)
            self._origin[id(stored)] = rec_line
        self._report.flush()

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

    def prune(self, top_k: int) -> tuple[int, int]:
        """Keep the ``top_k`` fastest valid records of each workload (as ``get_top_k``
        ranks them) and drop the others, failed measurements and workloads left without
        records; return (records kept, records before).

        The new files are written next to the old ones and moved over them while holding
        the lock commits take, so a committer in another process waits, then notices the
        new files and reads them (see the module docstring); nothing it committed is lost.
        """
        check_top_k(top_k)
        with self._lock(exclusive=True):
            self._sync()
            before = len(self._store)
            keep = {id(r) for w in self._store.workloads() for r in self._store.top_k(w, top_k)}
            workload_lines: list = []
            record_lines: list = []
            line_of: dict[int, int] = {}
            for record in self._store.all_records():
                if id(record) not in keep:
                    continue
                workload = record.workload
                if id(workload) not in line_of:
                    line_of[id(workload)] = len(workload_lines)
                    workload_lines.append(workload.as_json())
                carried = self._carried_of(workload)
                record_lines.append([line_of[id(workload)], record.as_json(), carried])
            new_records = _write_beside(self.path_tuning_record, record_lines)
            try:
                new_workloads = _write_beside(self.path_workload, workload_lines)
            except BaseException:
                os.unlink(new_records)
                raise
            # records first: until the workload file follows, they recover what they carry
            os.replace(new_records, self.path_tuning_record)
            os.replace(new_workloads, self.path_workload)
        return len(keep), before  # the next lock notices the new files and reads them

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
