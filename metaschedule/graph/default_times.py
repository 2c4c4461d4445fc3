"""Measured run times of the default schedules, the bar a tuned schedule must clear.

The default schedule (:mod:`.default_schedule`) re-lays weights out at compile time, which
is no schedule instruction, so it cannot be stored as a tuning record. Instead
``tune_relax`` measures each task's default schedule once, with the builder and runner it
tunes with, and keeps the times in ``work_dir/default_schedules.json``; ``compile_relax``
then takes the database's best record of a function only when it is faster.

The file is one JSON object::

    {"format": "metaschedule-default-schedules", "version": 1,
     "entries": [{"shash": "<structural hash of the workload>", "target": "<str(target)>",
                  "task_name": "fused_conv2d_add_relu", "run_sec": 0.00123,
                  "versus": "<measurement key>", "versus_sec": 0.00098}, ...]}

``run_sec`` is the mean of the runner's run times, in seconds. ``versus`` (optional) names
the tuned schedule (:func:`metaschedule.database.base.measurement_key`) the default was
timed against, interleaved, at the end of tuning: ``run_sec`` is then the median of those
rounds, and ``versus_sec`` the tuned schedule's median of the same rounds, the time to
compare it with (the database is not changed by that timing: its ranking is the final
selection's). The file is written atomically (a temporary file renamed over it), merged
with what is there under an exclusive lock on ``default_schedules.json.lock`` (two tuners of
one work_dir keep each other's entries; the wait is bounded by :data:`LOCK_TIMEOUT_SEC`). A
missing file means no default times; a malformed file or entry (a nesting bomb included)
is reported with a ``RuntimeWarning`` and skipped, never fatal.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from ..arg_info import ArgInfo
from ..builder import Builder, BuilderInput
from ..builder.base import remove_artifact
from ..database import Database
from ..database.base import is_valid_run_secs
from ..database.module_equality import ModuleEquality
from ..runner import Runner, RunnerInput
from ..target import Target
from ..tir.function import IRModule

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no inter-process lock
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "DEFAULT_SCHEDULES_FILE",
    "LOCK_TIMEOUT_SEC",
    "default_times_path",
    "load_default_times",
    "load_default_versus",
    "load_default_versus_secs",
    "measure_default_schedules",
    "save_default_times",
    "workload_key",
]

DEFAULT_SCHEDULES_FILE = "default_schedules.json"
#: the longest :func:`save_default_times` waits for another writer's lock
LOCK_TIMEOUT_SEC = 60.0
_FORMAT = "metaschedule-default-schedules"
_VERSION = 1

Key = tuple[str, str]  # (structural hash, target)


def workload_key(mod: IRModule, target: Target) -> Key:
    """The key of a workload's default time: its structural hash and the target."""
    return str(ModuleEquality("structural").hash(mod)), str(target)


def default_times_path(database: Database | None) -> str | None:
    """The default-times file beside a JSON or SQLite database's files; None for
    databases that live in memory (or anything else)."""
    if database is None:
        return None
    path = getattr(database, "path_tuning_record", None) or getattr(database, "path", None)
    if not isinstance(path, (str, os.PathLike)):
        return None
    return os.path.join(os.path.dirname(os.path.abspath(os.fspath(path))), DEFAULT_SCHEDULES_FILE)


def load_default_times(path: str | None) -> dict[Key, float]:
    """The recorded times in ``path``; {} when it is None or absent. Problems are reported
    with one ``RuntimeWarning`` and the bad parts skipped."""
    return {k: v[0] for k, v in _load(path).items()}


def load_default_versus(path: str | None) -> dict[Key, str]:
    """Per workload, the tuned schedule its default was last timed against (interleaved);
    workloads whose default was timed alone are absent."""
    return {k: v[2] for k, v in _load(path).items() if v[2]}


def load_default_versus_secs(path: str | None) -> dict[Key, tuple[str, float]]:
    """Per workload timed against a tuned schedule: that schedule's measurement key and its
    time in the same interleaved rounds (files written before that time was kept lack
    it, and their workloads are absent)."""
    return {k: (v[2], v[3]) for k, v in _load(path).items() if v[2] and v[3] is not None}


def _load(path: str | None) -> dict[Key, tuple[float, str, str, float | None]]:
    if path is None or not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (OSError, ValueError, RecursionError) as err:
        why = "nested too deeply" if isinstance(err, RecursionError) else err
        warnings.warn(
            f"{path}: cannot read the default schedules' times ({type(err).__name__}: {why}); "
            "ignoring the file (tuned records are used without comparing them to the defaults)",
            RuntimeWarning,
            stacklevel=3,
        )
        return {}
    entries = obj.get("entries") if isinstance(obj, dict) else None
    if not isinstance(entries, list) or obj.get("format") != _FORMAT:
        warnings.warn(
            f"{path}: not a default-schedules file (expected an object with "
            f'"format": "{_FORMAT}" and a list "entries"); ignoring it',
            RuntimeWarning,
            stacklevel=3,
        )
        return {}
    times: dict[Key, tuple[float, str, str, float | None]] = {}
    bad: list[int] = []
    for i, e in enumerate(entries):
        try:
            sec = float(e["run_sec"])
            if not (math.isfinite(sec) and sec >= 0):
                raise ValueError(f"run_sec {sec}")
            key = (str(e["shash"]), str(e["target"]))
            against = e.get("versus_sec")
            if against is not None:
                against = float(against)
                if not (math.isfinite(against) and against >= 0):
                    raise ValueError(f"versus_sec {against}")
            times[key] = (sec, str(e.get("task_name", "")), str(e.get("versus") or ""), against)
        except (TypeError, KeyError, ValueError):
            bad.append(i)
    if bad:
        warnings.warn(
            f"{path}: {len(bad)} malformed entries (indices {bad[:10]}) skipped",
            RuntimeWarning,
            stacklevel=3,
        )
    return times


def save_default_times(
    path: str,
    times: dict[Key, float],
    names: dict[Key, str],
    versus: dict[Key, tuple[str, float]] | None = None,
) -> None:
    """Merge ``times`` into the file at ``path`` and write it atomically; ``versus``: per
    key, the tuned schedule the time was measured against and that schedule's time in the
    same rounds (see the module docstring).

    Raises:
        OSError: the file cannot be written, or (``TimeoutError``) another writer held its
            lock for :data:`LOCK_TIMEOUT_SEC`.
    """
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with _exclusive(path + ".lock", LOCK_TIMEOUT_SEC):
        _merge_and_write(path, folder, times, names, versus)


@contextmanager
def _exclusive(lock_path: str, timeout_sec: float) -> Iterator[None]:
    """An exclusive ``flock`` on ``lock_path`` (created 0600, never through a symlink),
    waited for at most ``timeout_sec``."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(lock_path, flags, 0o600)
    try:
        if fcntl is not None:
            deadline = time.monotonic() + timeout_sec
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise TimeoutError(
                            f"{lock_path}: another process has held this lock for "
                            f"{timeout_sec:g} s; the default schedules' times are not saved"
                        ) from None
                    time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


def _merge_and_write(
    path: str,
    folder: str,
    times: dict[Key, float],
    names: dict[Key, str],
    versus: dict[Key, tuple[str, float]] | None,
) -> None:
    merged = _load(path)
    versus = versus or {}
    merged.update(
        {
            k: (v, names.get(k, ""), *(versus[k] if k in versus else ("", None)))
            for k, v in times.items()
        }
    )
    entries = [
        {"shash": k[0], "target": k[1], "task_name": name, "run_sec": sec}
        | ({"versus": against} if against else {})
        | ({"versus_sec": against_sec} if against and against_sec is not None else {})
        for k, (sec, name, against, against_sec) in sorted(merged.items())
    ]
    fd, tmp = tempfile.mkstemp(prefix=".default_schedules-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"format": _FORMAT, "version": _VERSION, "entries": entries}, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def measure_default_schedules(
    mods: Sequence[IRModule], target: Target, builder: Builder, runner: Runner
) -> list[tuple[float | None, str | None]]:
    """Build and run each scheduled module once with ``builder`` and ``runner``.

    Returns:
        Per module, the mean run time in seconds, or None and the reason it failed.
    """
    out: list[tuple[float | None, str | None]] = [(None, "not measured")] * len(mods)
    if not mods:
        return out
    built = list(builder.build([BuilderInput(m, target) for m in mods]))
    if len(built) != len(mods):
        raise ValueError(f"{type(builder).__name__}.build returned {len(built)} results")
    live = [i for i, r in enumerate(built) if r.error_msg is None and r.artifact_path]
    for i, r in enumerate(built):
        if i not in live:
            out[i] = (None, f"build: {r.error_msg}")
    try:
        inputs = [
            RunnerInput(
                str(built[i].artifact_path),
                target.kind,
                ArgInfo.from_entry_func(mods[i], remove_preproc=True),
            )
            for i in live
        ]
        futures = list(runner.run(inputs)) if inputs else []
        for i, future in zip(live, futures):
            res = future.result()
            if res.error_msg is None and is_valid_run_secs(res.run_secs):
                secs = list(res.run_secs or [])
                out[i] = (sum(secs) / len(secs), None)
            else:
                out[i] = (None, f"run: {res.error_msg}")
    finally:
        for i in live:
            remove_artifact(built[i].artifact_path)
    return out
