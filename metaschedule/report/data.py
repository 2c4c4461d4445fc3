"""Reading a work folder: the database, the measurement log and the profile, as plain
data for ``metaschedule show`` and ``metaschedule report``.

A run may still be writing: the JSON database skips a torn last line (with a warning,
silenced here), the measurement log skips it too, and a missing log or profile only
means fewer plots.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass, field
from typing import Any

from ..database import JSONDatabase, SQLiteDatabase
from ..database.base import measurement_key
from ..database.json_database import TUNING_RECORD_FILE, WORKLOAD_FILE
from ..flop_count import estimate_flops
from ..graph.default_times import DEFAULT_SCHEDULES_FILE, load_default_times
from ..tir.functor import post_order_visit
from ..tir.stmt import Block
from .measure_log import measure_log_path, read_measure_log

__all__ = ["RunData", "WorkloadData", "describe_workload", "load_run"]

PROFILE_PATH = os.path.join("logs", "profile.json")
SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")


@dataclass
class WorkloadData:
    """One workload of a work folder.

    Attributes:
        name: the task name from the measurement log, or a description of the module.
        shash: the workload's structural hash (as the database stores it).
        mod: the workload's IRModule.
        flop: arithmetic operations per run.
        latencies: per trial (a schedule's first record, in commit order), its seconds
            then; ``inf`` for a failure.
        records: the trials' records, in commit order.
        batches: the measurement-log lines of this workload, in order.
        current: per trial, the seconds of the record that counts now (the schedule's
            latest valid record, as the database ranks it: a final selection's
            re-measurement replaces the tuning time); defaults to ``latencies``.
        remeasurements: records of schedules measured before (final selections).
    """

    name: str
    shash: str
    mod: Any
    flop: float
    latencies: list[float]
    records: list[Any]
    batches: list[dict[str, Any]] = field(default_factory=list)
    current: list[float] = field(default_factory=list)
    remeasurements: int = 0

    @property
    def trials(self) -> int:
        return len(self.latencies)

    def _current(self) -> list[float]:
        return self.current if len(self.current) == len(self.latencies) else self.latencies

    @property
    def best_index(self) -> int | None:
        """The index of the trial whose schedule ranks first now, or None."""
        finite = [(s, i) for i, s in enumerate(self._current()) if math.isfinite(s)]
        return min(finite)[1] if finite else None

    @property
    def best_latency(self) -> float:
        """The seconds of the best schedule's record that counts."""
        return min(self._current(), default=math.inf)

    @property
    def best_gflops(self) -> float:
        best = self.best_latency
        return self.flop / best / 1e9 if math.isfinite(best) and best > 0 else 0.0

    @property
    def best_record(self):
        i = self.best_index
        return None if i is None else self.records[i]

    def best_time(self) -> float | None:
        """The wall-clock time (epoch seconds) the best schedule was tuned, if logged."""
        i = self.best_index
        if i is None:
            return None
        best = self.latencies[i]
        if not math.isfinite(best):
            return None
        for line in self.batches:
            for lat in line["latencies"]:
                if lat is not None and math.isclose(lat, best, rel_tol=1e-9):
                    return float(line["time"])
        return None


@dataclass
class RunData:
    """Everything a work folder holds."""

    work_dir: str
    workloads: list[WorkloadData]
    log: list[dict[str, Any]]
    profiles: list[dict[str, float]]
    notes: list[str] = field(default_factory=list)
    default_times: dict[str, float] = field(default_factory=dict)  # shash -> seconds


def describe_workload(mod) -> str:
    """A short description: the blocks and the parameter shapes, e.g.
    ``T_matmul_NN(A 32x32, B 32x32 -> 32x32)``."""
    func = mod[next(iter(mod))]
    blocks: list[str] = []
    post_order_visit(
        func.body,
        lambda n: (
            blocks.append(n.name_hint) if isinstance(n, Block) and n.name_hint != "root" else None
        ),
    )
    shapes = ["x".join(str(d) for d in buf.shape) for buf in func.params]
    head = blocks[-1] if blocks else "func"
    names = [p.name for p in func.params]
    args = ", ".join(f"{n} {s}" for n, s in zip(names[:-1], shapes[:-1]))
    return f"{head}({args} -> {shapes[-1] if shapes else '?'})"


def load_run(work_dir: str) -> RunData:
    """Read ``work_dir`` (see the module docstring); a ``.sqlite``/``.db`` file gives its
    records only."""
    notes: list[str] = []
    log = read_measure_log(measure_log_path(work_dir))
    names: dict[str, str] = {}
    for line in log:
        if line.get("shash") is not None and line.get("task") not in (None, "main"):
            names[str(line["shash"])] = str(line["task"])
    workloads: list[WorkloadData] = []
    is_sqlite = os.path.isfile(work_dir) and work_dir.lower().endswith(SQLITE_SUFFIXES)
    if is_sqlite or os.path.isfile(os.path.join(work_dir, WORKLOAD_FILE)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a torn line of a live run
            db = (
                SQLiteDatabase(work_dir)
                if is_sqlite
                else JSONDatabase(
                    os.path.join(work_dir, WORKLOAD_FILE),
                    os.path.join(work_dir, TUNING_RECORD_FILE),
                    allow_missing=True,
                )
            )
            try:
                records = db.get_all_tuning_records()
            finally:
                db.close()
        by_workload: dict[int, WorkloadData] = {}
        trial_of: dict[int, dict[str, int]] = {}
        for record in records:
            wl = record.workload
            data = by_workload.get(id(wl))
            if data is None:
                shash = str(wl.shash)
                try:
                    flop = max(1.0, float(estimate_flops(wl.mod)))
                except Exception:  # noqa: BLE001 - an exotic module: GFLOPS unknown
                    flop = 1.0
                data = WorkloadData(
                    names.get(shash) or _describe(wl.mod),
                    shash,
                    wl.mod,
                    flop,
                    [],
                    [],
                    [ln for ln in log if str(ln.get("shash")) == shash],
                )
                by_workload[id(wl)] = data
                trial_of[id(wl)] = {}
                workloads.append(data)
            key = measurement_key(record)
            j = trial_of[id(wl)].get(key)
            if j is None:  # a new schedule: a trial
                trial_of[id(wl)][key] = len(data.records)
                data.records.append(record)
                data.latencies.append(record.mean_run_sec)
                data.current.append(record.mean_run_sec)
            else:  # the same schedule again: the latest valid record counts
                data.remeasurements += 1
                if record.is_valid or not math.isfinite(data.current[j]):
                    data.current[j] = record.mean_run_sec
    else:
        notes.append(f"no database in {work_dir} yet")
    if not log:
        notes.append(
            "no measurement log (logs/measurements.jsonl): the wall-time curve, the "
            "cost model's predictions and the trial allocation need a run started "
            "with 'metaschedule tune' (or the MeasureLog callback)"
        )
    return RunData(
        work_dir, workloads, log, _profiles(work_dir, log), notes, _default_times(work_dir)
    )


def _default_times(work_dir: str) -> dict[str, float]:
    """The default schedules' seconds by workload hash (``tune_relax`` writes them)."""
    path = os.path.join(work_dir, DEFAULT_SCHEDULES_FILE)
    if not os.path.isfile(path):
        return {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a malformed file: no defaults
        return {shash: sec for (shash, _target), sec in load_default_times(path).items()}


def _describe(mod) -> str:
    try:
        return describe_workload(mod)
    except Exception:  # noqa: BLE001 - a description is a nicety
        return f"workload {next(iter(mod))}"


def _profiles(work_dir: str, log: list[dict[str, Any]]) -> list[dict[str, float]]:
    """The Profiler split of each run: ``logs/profile.json`` (written when a run ends),
    then, for a run still going, the last snapshot in the measurement log."""
    runs: list[dict[str, float]] = []
    try:
        with open(os.path.join(work_dir, PROFILE_PATH)) as f:
            runs = [dict(r) for r in json.load(f).get("runs", [])]
    except (OSError, ValueError, AttributeError, TypeError):
        runs = []
    last_by_run: dict[float, dict[str, float]] = {}
    for line in log:
        if isinstance(line.get("profile"), dict):
            last_by_run[line["run"]] = line["profile"]
    if len(last_by_run) > len(runs):  # a run in progress (or one killed before its end)
        runs.extend(list(last_by_run.values())[len(runs) :])
    return runs
