"""``MeasureLog``: a measure callback that appends one JSON line per measured batch to
``work_dir/logs/measurements.jsonl``, for the report.

The database holds what was measured; this log adds when (wall clock), which task the
scheduler chose, what the cost model predicted before it learned from the batch, and the
run's Profiler split so far. Each line is one ``write`` on an ``O_APPEND`` file, so a
report read while tuning runs sees whole lines, or a torn last one that it skips.

A line::

    {"v": 1, "run": 1764000000.1, "time": 1764000012.5, "task_id": 0, "task": "main",
     "shash": "123...", "flop": 67108864, "weight": 1.0, "trials_global": 64,
     "latencies": [2.1e-05, null, ...], "errors": [null, "run", ...],
     "predicted": [0.8, 0.1, ...] or null, "profile": {"Total": 12.1, ...} or null}

Put it before ``UpdateCostModel`` (``metaschedule tune`` does), so the predictions are
those the search used::

    callbacks = [MeasureLog(work_dir), *ms.MeasureCallback.create("default")]
    ms.tune_tir(func, "cpu", work_dir, 64, measure_callbacks=callbacks)
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import TYPE_CHECKING, Any

from ..logging import LOG_DIR
from ..measure_callback.base import PyMeasureCallback
from ..profiler import Profiler
from ..utils import derived_object

if TYPE_CHECKING:
    from ..builder import BuilderResult
    from ..measure_candidate import MeasureCandidate
    from ..runner import RunnerResult
    from ..task_scheduler import TaskScheduler

__all__ = ["MEASURE_LOG", "MeasureLog", "measure_log_path", "read_measure_log"]

MEASURE_LOG = "measurements.jsonl"


def measure_log_path(work_dir: str) -> str:
    """``work_dir/logs/measurements.jsonl``."""
    return os.path.join(work_dir, LOG_DIR, MEASURE_LOG)


@derived_object
class MeasureLog(PyMeasureCallback):
    """Append a line per measured batch to ``work_dir/logs/measurements.jsonl``.

    Args:
        work_dir: the run's folder.
        predict: record the cost model's scores of the batch (a learned model that is
            trained only: a model in warm-up answers at random, from its own generator).
    """

    def __init__(self, work_dir: str, predict: bool = True) -> None:
        self.path = measure_log_path(work_dir)
        self.predict = predict
        self.run_id = time.time()

    def apply(
        self,
        task_scheduler: TaskScheduler,
        task_id: int,
        measure_candidates: list[MeasureCandidate],
        builder_results: list[BuilderResult],
        runner_results: list[RunnerResult],
    ) -> None:
        task = task_scheduler.tasks[task_id]
        latencies: list[float | None] = []
        errors: list[str | None] = []
        for built, ran in zip(builder_results, runner_results):
            secs = ran.run_secs or []
            error = (
                "build"
                if built.error_msg is not None
                else ("run" if ran.error_msg is not None or not secs else None)
            )
            errors.append(error)
            latencies.append(None if error else sum(secs) / len(secs))
        line: dict[str, Any] = {
            "v": 1,
            "run": self.run_id,
            "time": time.time(),
            "task_id": task_id,
            "task": task.name,
            "shash": _shash(task_scheduler, task.ctx.mod),
            "flop": task.flop,
            "weight": task.task_weight,
            "trials_global": task_scheduler.max_trials_global,
            "latencies": latencies,
            "errors": errors,
            "predicted": self._predictions(task_scheduler, task.ctx, measure_candidates),
            "profile": _profile(),
        }
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        data = (json.dumps(line, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def _predictions(self, task_scheduler, ctx, candidates) -> list[float | None] | None:
        model = task_scheduler.cost_model
        if not self.predict or model is None or not getattr(model, "is_trained", False):
            return None
        try:
            with Profiler.timeit("MeasureCallback/MeasureLog/Predict"):
                scores = model.predict(ctx, list(candidates))
            return [float(s) if math.isfinite(float(s)) else None for s in scores]
        except Exception:  # noqa: BLE001 - the log is a by-product; tuning goes on
            return None


def _shash(task_scheduler, mod) -> str | None:
    database = task_scheduler.database
    if database is None:
        return None
    try:
        return str(database.commit_workload(mod).shash)
    except Exception:  # noqa: BLE001 - a custom database may not support it
        return None


def _profile() -> dict[str, float] | None:
    profiler = Profiler.current()
    return None if profiler is None else profiler.get()


def read_measure_log(path: str) -> list[dict[str, Any]]:
    """The lines of a measurement log; a torn or malformed line is skipped (a run may
    still be writing). A missing file gives []."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:  # missing (no log yet), or not a folder
        return []
    out = []
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict) and "latencies" in obj and "task_id" in obj:
            out.append(obj)
    return out
