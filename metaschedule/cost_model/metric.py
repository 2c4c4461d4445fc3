"""What the learned cost models share: training targets, ranking metrics, saved data.

* :func:`costs_of` turns runner results into mean run times (``inf`` for failures).
* :class:`TrainingData` keeps per-candidate feature matrices and costs grouped by
  workload, and gives the normalised throughput targets ``min_cost / cost`` of each
  workload (1 for its fastest candidate, 0 for failures).
* :func:`average_peak_score` and :func:`rank_correlation` score predictions.
* :func:`write_archive` / :func:`read_archive` store named byte blobs in one tar file.
"""

from __future__ import annotations

import io
import math
import tarfile
from typing import TYPE_CHECKING, Any

import numpy as np

from ..tir.structural import structural_hash

if TYPE_CHECKING:
    from ..runner import RunnerResult

__all__ = [
    "TrainingData",
    "average_peak_score",
    "costs_of",
    "rank_correlation",
    "read_archive",
    "workload_key",
    "write_archive",
]


def costs_of(results: list[RunnerResult]) -> np.ndarray:
    """Mean run time of each result; ``inf`` where it failed or has no valid time."""
    out = np.full(len(results), np.inf)
    for i, r in enumerate(results):
        secs = getattr(r, "run_secs", None)
        if getattr(r, "error_msg", None) is None and secs:
            mean = float(np.mean([float(s) for s in secs]))
            if math.isfinite(mean) and mean > 0:
                out[i] = mean
    return out


def workload_key(context: Any) -> str:
    """Key grouping training samples by workload: the structural hash of ``context.mod``."""
    mod = getattr(context, "mod", None)
    if mod is None:
        return ""
    return format(structural_hash(mod) & (2**64 - 1), "016x")


class TrainingData:
    """Feature matrices and costs of measured candidates, grouped by workload."""

    def __init__(self) -> None:
        self.features: list[np.ndarray] = []
        self.costs: list[float] = []
        self.keys: list[str] = []

    def __len__(self) -> int:
        return len(self.costs)

    def add(self, key: str, features: list[np.ndarray], costs: np.ndarray) -> None:
        """Append one workload's samples; every matrix must have the stored width."""
        width = self.width()
        for f in features:
            if f.ndim != 2 or (width is not None and f.shape[1] != width):
                raise ValueError(
                    f"feature matrices must be 2-D with {width} columns (the width of the "
                    f"stored training data); got shape {f.shape}. Use one feature extractor "
                    "per cost model"
                )
            width = f.shape[1]
        self.features += [np.asarray(f, dtype=np.float32) for f in features]
        self.costs += [float(c) for c in costs]
        self.keys += [key] * len(features)

    def width(self) -> int | None:
        return self.features[0].shape[1] if self.features else None

    def targets(self) -> np.ndarray:
        """``min_cost / cost`` within each workload; 0 for failed candidates."""
        costs = np.asarray(self.costs, dtype=np.float64)
        keys = np.asarray(self.keys)
        out = np.zeros(len(costs))
        for key in np.unique(keys):
            mask = keys == key
            best = costs[mask].min()
            if math.isfinite(best):
                out[mask] = best / costs[mask]
        return out

    def to_bytes(self) -> bytes:
        """The data as a numpy ``.npz`` archive (no pickles)."""
        rows = np.array([len(f) for f in self.features], dtype=np.int64)
        width = self.width() or 0
        feats = (
            np.concatenate(self.features)
            if self.features
            else np.zeros((0, width), dtype=np.float32)
        )
        buf = io.BytesIO()
        np.savez(
            buf,
            features=feats,
            rows=rows,
            costs=np.asarray(self.costs, dtype=np.float64),
            keys=np.asarray(self.keys, dtype=str),
        )
        return buf.getvalue()

    @staticmethod
    def from_bytes(blob: bytes) -> TrainingData:
        with np.load(io.BytesIO(blob), allow_pickle=False) as z:
            feats, rows, costs, keys = z["features"], z["rows"], z["costs"], z["keys"]
        data = TrainingData()
        splits: np.ndarray | list[int] = np.cumsum(rows)[:-1] if len(rows) else []
        data.features = (
            [np.ascontiguousarray(f) for f in np.split(feats, splits)] if len(rows) else []
        )
        data.costs = [float(c) for c in costs]
        data.keys = [str(k) for k in keys]
        return data


def pooled(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Sum ``values`` (one per feature row) over each candidate's ``rows`` rows."""
    group = np.repeat(np.arange(len(rows)), rows)
    return np.bincount(group, weights=values, minlength=len(rows))


def average_peak_score(pred: np.ndarray, target: np.ndarray, n: int) -> float:
    """How good the top-``n`` predicted candidates really are (1.0: as good as it gets).

    Takes the ``n`` candidates with the highest predictions, in predicted order, and
    averages the running best of their true targets, divided by the best true target.
    """
    target = np.asarray(target, dtype=np.float64)
    if len(target) == 0 or target.max() <= 0:
        return 0.0
    order = np.argsort(-np.asarray(pred), kind="stable")[:n]
    curve = np.maximum.accumulate(target[order]) / target.max()
    return float(curve.mean())


def rank_correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation of ``a`` and ``b`` (average ranks for ties)."""
    ra, rb = _ranks(np.asarray(a, dtype=np.float64)), _ranks(np.asarray(b, dtype=np.float64))
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = math.sqrt(float((ra * ra).sum() * (rb * rb).sum()))
    return float((ra * rb).sum() / denom) if denom else 0.0


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=np.float64)
    for v in np.unique(x):  # average the ranks of ties
        mask = x == v
        if mask.sum() > 1:
            ranks[mask] = ranks[mask].mean()
    return ranks


def write_archive(path: str, members: dict[str, bytes]) -> None:
    """Write ``members`` (name -> bytes) into the tar file ``path``."""
    with tarfile.open(path, "w") as tar:
        for name, blob in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))


def read_archive(path: str, who: str) -> dict[str, bytes]:
    """Read every member of the tar file ``path``; ``who`` names the caller in errors."""
    try:
        with tarfile.open(path, "r") as tar:
            out = {}
            for m in tar.getmembers():
                f = tar.extractfile(m)
                if f is not None:
                    out[m.name] = f.read()
            return out
    except (tarfile.TarError, OSError) as err:
        raise ValueError(
            f"{who}.load: cannot read {path!r} as a saved model archive: {err}"
        ) from err
