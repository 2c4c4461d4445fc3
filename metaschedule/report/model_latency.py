"""The model's estimated latency against tuning wall time, from the measurement log.

A model's latency is estimated as ``compile_relax`` would build it: the sum over its
tasks of ``weight x`` (calls per inference) the faster of the task's best tuned latency
and its default schedule's time (``default_schedules.json``, written by ``tune_relax``).
The series has a point at time 0 when every task has a default time (the untuned model),
then one after each measured batch once every task of the log has a time. Wall time is
counted from each run's start, runs back to back (a resumed run adds its own time).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["LatencyPoint", "model_latency_series", "model_latency_table", "num_tasks"]


@dataclass(frozen=True)
class LatencyPoint:
    """The estimate after a batch: tuning seconds so far, trials so far, model seconds."""

    wall_sec: float
    trials: int
    latency_sec: float


def _key(line: Mapping[str, Any]) -> str:
    return str(line.get("shash") or line.get("task"))


def num_tasks(log: list[dict[str, Any]]) -> int:
    """How many tasks the log measured (the report shows a model section from two on)."""
    return len({_key(line) for line in log})


def model_latency_series(
    log: list[dict[str, Any]], default_times: Mapping[str, float] | None = None
) -> list[LatencyPoint]:
    """The estimated model latency over tuning time (module docstring).

    Args:
        log: the measurement log's lines (:func:`~.measure_log.read_measure_log`).
        default_times: the default schedule's seconds per workload structural hash.
    """
    defaults = dict(default_times or {})
    weights: dict[str, float] = {}
    for line in log:
        weights[_key(line)] = float(line.get("weight") or 1.0)
    if not weights:
        return []
    best = {k: defaults.get(k, math.inf) for k in weights}

    def estimate() -> float:
        return sum(weights[k] * best[k] for k in weights)

    points: list[LatencyPoint] = []
    if math.isfinite(estimate()):
        points.append(LatencyPoint(0.0, 0, estimate()))
    offset, run, run_start, last, trials = 0.0, None, 0.0, 0.0, 0
    for line in log:
        if line.get("run") != run:  # a new run starts where the last one ended
            offset += last - run_start
            run = line.get("run")
            run_start = last = float(line.get("run") or line.get("time") or 0.0)
        last = max(last, float(line.get("time") or last))
        valid = [x for x in line["latencies"] if x is not None and math.isfinite(x)]
        trials += len(line["latencies"])
        key = _key(line)
        best[key] = min([best[key], *valid])
        if math.isfinite(estimate()):
            points.append(LatencyPoint(offset + last - run_start, trials, estimate()))
    return points


def model_latency_table(points: list[LatencyPoint], max_rows: int = 8) -> str:
    """An HTML table of the points where the estimate improved (at most ``max_rows``,
    the first and the last kept)."""
    rows = [p for i, p in enumerate(points) if i == 0 or p.latency_sec < points[i - 1].latency_sec]
    if points and rows[-1] is not points[-1]:
        rows.append(points[-1])
    if len(rows) > max_rows:
        step = (len(rows) - 1) / (max_rows - 1)
        rows = [rows[round(i * step)] for i in range(max_rows)]
    start = points[0].latency_sec if points else math.nan
    cells = [
        (
            f"{p.wall_sec:.1f}",
            str(p.trials),
            f"{p.latency_sec * 1e3:.4g}",
            f"{start / p.latency_sec:.2f}x",
        )
        for p in rows
    ]
    head = "".join(
        f"<th>{h}</th>"
        for h in ("tuning time (s)", "trials", "est. model latency (ms)", "speedup vs first")
    )
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in cells
    )
    return f"<table><tr>{head}</tr>{body}</table>"
