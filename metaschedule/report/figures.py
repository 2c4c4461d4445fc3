"""The report's plots (matplotlib, Agg backend): each function draws one figure from
:class:`~metaschedule.report.data.RunData` and saves it as a PNG."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .data import RunData, WorkloadData
from .model_latency import model_latency_series

__all__ = [
    "allocation_figure",
    "curve_figure",
    "distribution_figure",
    "import_pyplot",
    "model_latency_figure",
    "prediction_figure",
    "profile_figure",
    "spearman",
]

#: the profiler phases that do not nest in one another (see metaschedule.profiler)
TOP_LEVEL_PHASES = (
    "GenerateDesignSpace",
    "SearchStrategy/PreTuning",
    "SearchStrategy/GenerateCandidates",
    "SearchStrategy/NotifyRunnerResults",
    "Builder",
    "Runner",
)


def import_pyplot():
    """``matplotlib.pyplot`` on the Agg backend, or a clear error."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError(
            "the report draws its plots with matplotlib, which is not "
            "installed: pip install 'metaschedule[report]'"
        ) from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def _running_best_gflops(latencies: list[float], flop: float) -> np.ndarray:
    best = np.minimum.accumulate(np.array(latencies, dtype=float)) if latencies else np.zeros(0)
    with np.errstate(divide="ignore"):
        return np.where(np.isfinite(best) & (best > 0), flop / best / 1e9, 0.0)


def curve_figure(wl: WorkloadData, path: str) -> str:
    """Best GFLOPS against trials (database order) and against wall time (the log)."""
    plt = import_pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.4))
    best = _running_best_gflops(wl.latencies, wl.flop)
    ax1.step(np.arange(1, len(best) + 1), best, where="post", color="tab:blue")
    ax1.set_xlabel("trials")
    ax1.set_ylabel("best GFLOPS")
    ax1.set_title("tuning curve by trials")
    ax1.set_ylim(bottom=0)
    ax1.grid(alpha=0.3)
    times, lats = [], []
    for line in wl.batches:
        for lat in line["latencies"]:
            times.append(float(line["time"]))
            lats.append(math.inf if lat is None else float(lat))
    if times:
        start = min(float(line["run"]) for line in wl.batches)
        t = (np.array(times) - start) / 60.0
        ax2.step(
            np.concatenate([[0.0], t]),
            np.concatenate([[0.0], _running_best_gflops(lats, wl.flop)]),
            where="post",
            color="tab:green",
        )
        ax2.set_xlabel("wall time since the first run started (min)")
        ax2.set_ylim(bottom=0)
    else:
        ax2.text(
            0.5,
            0.5,
            "no measurement log:\nwall times unknown",
            ha="center",
            va="center",
            transform=ax2.transAxes,
        )
    ax2.set_ylabel("best GFLOPS")
    ax2.set_title("tuning curve by wall time")
    ax2.grid(alpha=0.3)
    return _save(fig, path)


def distribution_figure(wl: WorkloadData, path: str) -> str:
    """A histogram of the GFLOPS of every valid measured candidate."""
    plt = import_pyplot()
    fig, ax = plt.subplots(figsize=(10, 3.0))
    lat = np.array([s for s in wl.latencies if math.isfinite(s) and s > 0])
    failed = wl.trials - len(lat)
    if len(lat):
        gflops = wl.flop / lat / 1e9
        ax.hist(gflops, bins=min(40, max(5, len(lat) // 2)), color="tab:purple", alpha=0.8)
        ax.axvline(
            gflops.max(),
            color="black",
            linestyle="--",
            linewidth=1,
            label=f"best {gflops.max():.2f}",
        )
        ax.legend(loc="upper right")
    else:
        ax.text(0.5, 0.5, "no valid measurement", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("GFLOPS")
    ax.set_ylabel("candidates")
    ax.set_title(f"measured candidates: {len(lat)} valid, {failed} failed")
    ax.grid(alpha=0.3)
    return _save(fig, path)


def spearman(x: Any, y: Any) -> float:
    """Spearman's rank correlation (ties get their mean rank); nan if undefined."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 2:
        return math.nan

    def ranks(v):
        order = np.argsort(v, kind="mergesort")
        r = np.empty(len(v))
        r[order] = np.arange(len(v), dtype=float)
        for value in np.unique(v):  # mean rank of ties
            tie = v == value
            r[tie] = r[tie].mean()
        return r

    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def prediction_pairs(wl: WorkloadData) -> tuple[np.ndarray, np.ndarray]:
    """(predicted score, measured GFLOPS) of the logged candidates that have both."""
    pred, meas = [], []
    for line in wl.batches:
        scores = line.get("predicted")
        if not scores:
            continue
        for score, lat in zip(scores, line["latencies"]):
            if score is not None and lat is not None and lat > 0:
                pred.append(float(score))
                meas.append(wl.flop / float(lat) / 1e9)
    return np.array(pred), np.array(meas)


def prediction_figure(wl: WorkloadData, path: str) -> str | None:
    """The cost model's score against measured GFLOPS; None when nothing was predicted."""
    pred, meas = prediction_pairs(wl)
    if len(pred) == 0:
        return None
    plt = import_pyplot()
    fig, ax = plt.subplots(figsize=(10, 3.4))
    ax.scatter(pred, meas, s=30, alpha=0.7, color="tab:orange")
    ax.set_xlabel("cost model score (before learning from the batch)")
    ax.set_ylabel("measured GFLOPS")
    rho = spearman(pred, meas)
    ax.set_title(
        f"predictions vs measurements: {len(pred)} candidates, Spearman "
        f"{'n/a' if math.isnan(rho) else f'{rho:.2f}'}"
    )
    ax.grid(alpha=0.3)
    return _save(fig, path)


def profile_split(profile: dict[str, float]) -> dict[str, float]:
    """Seconds of the top-level phases, the measure callbacks together, and the rest."""
    out = {name: float(profile.get(name, 0.0)) for name in TOP_LEVEL_PHASES}
    out["MeasureCallback (all)"] = sum(
        float(v)
        for k, v in profile.items()
        if k.startswith("MeasureCallback/") and k.count("/") == 1
    )
    total = float(profile.get("Total", 0.0))
    out["other"] = max(0.0, total - sum(out.values()))
    return {k: v for k, v in out.items() if v > 0}


def profile_figure(data: RunData, path: str) -> str | None:
    """Where the time of the runs went (Profiler), summed over runs; None without one."""
    if not data.profiles:
        return None
    summed: dict[str, float] = {}
    for run in data.profiles:
        for k, v in run.items():
            summed[k] = summed.get(k, 0.0) + float(v)
    split = profile_split(summed)
    if not split:
        return None
    plt = import_pyplot()
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(split) + 1.2))
    names = list(split)[::-1]
    secs = [split[n] for n in names]
    total = float(summed.get("Total", sum(secs))) or 1.0
    ax.barh(names, secs, color="tab:cyan")
    for i, s in enumerate(secs):
        ax.text(s, i, f" {s:.1f} s ({100 * s / total:.0f}%)", va="center")
    ax.set_xlabel("seconds")
    ax.set_xlim(0, max(secs) * 1.3)
    ax.set_title(f"time split (Profiler): {total:.1f} s in {len(data.profiles)} run(s)")
    return _save(fig, path)


def allocation_figure(data: RunData, path: str) -> str | None:
    """Trials given to each task over the run (the task scheduler's choices); None
    without a measurement log."""
    if not data.log:
        return None
    plt = import_pyplot()
    names: dict[str, str] = {}
    for wl in data.workloads:
        names[wl.shash] = wl.name
    keys = []
    for line in data.log:
        key = str(line.get("shash") or line.get("task"))
        if key not in keys:
            keys.append(key)
    counts = {k: [0] for k in keys}
    x = [0]
    for line in data.log:
        key = str(line.get("shash") or line.get("task"))
        x.append(x[-1] + len(line["latencies"]))
        for k in keys:
            counts[k].append(counts[k][-1] + (len(line["latencies"]) if k == key else 0))
    fig, ax = plt.subplots(figsize=(10, 3.2))
    ax.stackplot(
        x, *[counts[k] for k in keys], labels=[names.get(k, k)[:40] for k in keys], alpha=0.85
    )
    ax.set_xlabel("trials measured in all")
    ax.set_ylabel("trials per task (stacked)")
    ax.set_title(f"task scheduler: trials per task ({len(keys)} task(s))")
    ax.legend(loc="upper left", fontsize="small")
    ax.grid(alpha=0.3)
    return _save(fig, path)


def model_latency_figure(data: RunData, path: str) -> str | None:
    """The model's estimated latency (sum of best x calls) against tuning wall time
    (:mod:`.model_latency`); None without a point."""
    points = model_latency_series(data.log, data.default_times)
    if not points:
        return None
    plt = import_pyplot()
    fig, ax = plt.subplots(figsize=(10, 3.2))
    minutes = [p.wall_sec / 60 for p in points]
    ax.step(minutes, [p.latency_sec * 1e3 for p in points], where="post", marker=".")
    ax.set_xlabel("tuning wall time (min)")
    ax.set_ylabel("estimated latency (ms)")
    ax.set_title(
        f"model: sum over tasks of best latency x calls, {points[0].latency_sec * 1e3:.4g} "
        f"-> {points[-1].latency_sec * 1e3:.4g} ms in {points[-1].trials} trials"
    )
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    return _save(fig, path)
