"""The pre-trained XGBoost cost model: trained on a corpus of measured schedules.

``XGBModel`` starts from it (``pretrained=True``, the default), so the first batch of a
new workload is ranked by what other workloads taught, and fine-tunes it on the task's
own measurements. Its features include the workload's and the CPU's
(``PerStoreFeature(extract_workload=True, extract_isa=True)``), so one model spans
workloads and ISAs.

Where ``pretrained=True`` looks, first found wins (``pretrained=False`` opts out):

1. the user's own, written by ``metaschedule corpus train`` (``~/.cache/metaschedule/
   xgb_pretrained.tar``, or under ``$XDG_CACHE_HOME``);
2. the one shipped in the package (``metaschedule/cost_model/data/xgb_pretrained.tar``).

A file is a tar archive: ``meta.json`` (format, extractor settings, the corpus parts and
held-out workloads it was trained on) and ``model.ubj`` (the booster, xgboost's binary
JSON).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..feature_extractor import PerStoreFeature
from ..runner import RunnerResult
from .corpus import CorpusPart, find_parts, isa_to_json
from .metric import TrainingData, costs_of, read_archive, write_archive

__all__ = [
    "PretrainedModel",
    "corpus_training_data",
    "default_path",
    "load_pretrained",
    "shipped_path",
    "train_pretrained",
    "user_path",
]

logger = logging.getLogger(__name__)

FORMAT = "metaschedule.pretrained-xgb/1"
#: the extractor a pre-trained model uses (features of the schedule, workload and CPU)
EXTRACTOR_SETTINGS = {"extract_workload": True, "extract_isa": True, "extract_prior": True}
#: the workload names of a corpus part (written by benchmarks/corpus.py)
NAMES_FILE = "workload_names.json"


def shipped_path() -> str:
    """The model shipped with the package (it may be absent in a source checkout)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "xgb_pretrained.tar")


def user_path() -> str:
    """Where ``metaschedule corpus train`` writes the user's own model by default."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "metaschedule", "xgb_pretrained.tar")


def default_path() -> str | None:
    """The model ``pretrained=True`` loads (module docstring), or None if there is none."""
    for path in (user_path(), shipped_path()):
        if os.path.exists(path):
            return path
    return None


@dataclass
class PretrainedModel:
    """A loaded pre-trained model: the booster's bytes and what it was trained with."""

    path: str
    booster_raw: bytes
    extractor_settings: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    def booster(self, params: dict[str, Any]) -> Any:
        """A fresh ``xgboost.Booster`` holding the model."""
        import xgboost as xgb

        booster = xgb.Booster(params=params)
        booster.load_model(bytearray(self.booster_raw))
        return booster


_LOADED: dict[tuple[str, float], PretrainedModel] = {}


def load_pretrained(path: str) -> PretrainedModel:
    """Read a pre-trained model file (cached per path and modification time).

    Raises:
        ValueError: ``path`` is missing or not a pre-trained model of this format.
    """
    try:
        key = (os.path.abspath(path), os.path.getmtime(path))
    except OSError as err:
        raise ValueError(f"pre-trained cost model {path!r}: {err.strerror}") from None
    if key in _LOADED:
        return _LOADED[key]
    members = read_archive(path, "pretrained model")
    try:
        meta = json.loads(members["meta.json"])
        booster_raw = members["model.ubj"]
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ValueError(f"format {meta.get('format') if isinstance(meta, dict) else meta!r}")
        extractor = dict(meta["extractor"])
    except (KeyError, ValueError, TypeError) as err:
        raise ValueError(
            f"{path!r} is not a {FORMAT} file ({type(err).__name__}: {err}); write one with "
            "`metaschedule corpus train`"
        ) from None
    model = PretrainedModel(path, booster_raw, extractor, meta)
    _LOADED[key] = model
    return model


# ----------------------------------------------------------------------------- training
def part_workload_names(part: CorpusPart) -> dict[str, str]:
    """Structural hash (decimal string) -> workload name, where the part names them."""
    path = os.path.join(part.path, NAMES_FILE)
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        names = json.load(f)
    return {str(k): str(v) for k, v in names.items()} if isinstance(names, dict) else {}


def corpus_training_data(
    parts: Sequence[CorpusPart],
    extractor: Any,
    holdout: Iterable[str] = (),
    progress: Any = None,
) -> tuple[TrainingData, TrainingData, dict[str, Any]]:
    """Features and costs of every record of ``parts``: the training data, the held-out
    data (workloads named in ``holdout``), and counts. Samples are grouped (and their
    targets normalised) per part and workload. Records that do not replay are skipped and
    counted."""
    held = set(holdout)
    train, test = TrainingData(), TrainingData()
    info: dict[str, Any] = {"parts": [], "skipped": 0, "held_out": sorted(held)}
    for part in parts:
        names = part_workload_names(part)
        by_workload: dict[int, list[Any]] = {}
        for record in part.database().get_all_tuning_records():
            by_workload.setdefault(record.workload.shash, []).append(record)
        counts = {"train": 0, "held_out": 0}
        for shash, records in by_workload.items():
            name = names.get(str(shash), str(shash))
            ctx = SimpleNamespace(mod=records[0].workload.mod, target=part.target, isa=part.isa)
            candidates, results = [], []
            for record in records:
                try:
                    candidates.append(record.as_measure_candidate())
                except Exception:  # noqa: BLE001 - a record that no longer replays
                    info["skipped"] += 1
                    continue
                results.append(RunnerResult(record.run_secs, None))
            if not candidates:
                continue
            features = extractor.extract_from(ctx, candidates)
            costs = costs_of(results)
            costs[costs >= 1e9] = np.inf  # a failure recorded as [1e10]
            into = test if name in held else train
            into.add(f"{part.path}:{shash}:{name}", features, costs)
            counts["held_out" if name in held else "train"] += len(candidates)
            if progress is not None:
                progress(f"{os.path.basename(part.path)}/{name}: {len(candidates)} records")
        info["parts"].append(
            {"path": part.path, "isa": isa_to_json(part.isa), "target": str(part.target), **counts}
        )
    return train, test, info


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties); nan below 3 samples."""
    if len(a) < 3:
        return float("nan")

    def ranks(x: np.ndarray) -> np.ndarray:
        order = np.argsort(x, kind="stable")
        r = np.empty(len(x))
        r[order] = np.arange(len(x))
        for v in np.unique(x):  # ties share their mean rank
            tie = x == v
            if tie.sum() > 1:
                r[tie] = r[tie].mean()
        return r

    ra, rb = ranks(np.asarray(a, float)), ranks(np.asarray(b, float))
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def held_out_spearman(
    model: Any, data: TrainingData, column: int | None = None
) -> dict[str, float]:
    """Per held-out workload (``name@part``): Spearman of the model's scores against
    measured throughput (``1 / cost``) over the records that ran; with ``column``, of
    that feature instead (negated: the prior's estimated time, for comparison)."""
    out: dict[str, float] = {}
    keys = np.array(data.keys)
    costs = np.array(data.costs)
    for key in dict.fromkeys(data.keys):
        idx = np.flatnonzero((keys == key) & np.isfinite(costs))
        if len(idx) < 3:
            continue
        if column is None:
            scores = model.predict_features([data.features[i] for i in idx])
        else:
            scores = np.array([-data.features[i][0, column] for i in idx])
        out[key.rsplit(":", 1)[-1] + f"@{key.split(':')[0]}"] = spearman(scores, 1 / costs[idx])
    return out


def train_pretrained(
    corpus: Iterable[str],
    out: str | None = None,
    holdout: Iterable[str] = (),
    *,
    max_depth: int = 8,
    eta: float = 0.1,
    max_rounds: int = 400,
    patience: int = 50,
    progress: Any = None,
) -> dict[str, Any]:
    """Train a pre-trained model on the corpora at ``corpus`` and write it to ``out``
    (default: :func:`user_path`). Workloads named in ``holdout`` are left out of the
    training and scored: the summary gives each one's Spearman rank correlation.

    Returns:
        a summary: the output path, sample counts, boosting rounds, held-out Spearman.

    Raises:
        ValueError: no corpus part, or no training sample.
    """
    from .xgb_model import XGBConfig, XGBModel  # local: xgb_model imports this module

    corpus = list(corpus)
    parts = find_parts(corpus)
    extractor = PerStoreFeature(**EXTRACTOR_SETTINGS)
    start = time.perf_counter()
    train, test, info = corpus_training_data(parts, extractor, holdout, progress)
    if not len(train):
        raise ValueError(f"the corpus {list(corpus)} holds no training sample")
    model = XGBModel(
        extractor=extractor,
        config=XGBConfig(max_depth=max_depth, eta=eta),
        num_warmup_samples=1,
        early_stopping_rounds=patience,
        adaptive_training=False,
        pretrained=False,
    )
    model.data = train
    model.max_rounds = max_rounds
    model._train()
    out = out or user_path()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    summary = {
        "format": FORMAT,
        "extractor": extractor.settings(),
        "trained": time.strftime("%Y-%m-%d %H:%M:%S"),
        "samples": len(train),
        "held_out_samples": len(test),
        "rounds": model.booster.num_boosted_rounds(),
        "seconds": round(time.perf_counter() - start, 1),
        **info,
    }
    summary["held_out_spearman"] = held_out_spearman(model, test) if len(test) else {}
    if len(test) and extractor.extract_prior:  # the analytic prior alone, to compare with
        column = extractor.feature_names.index("prior_log_ns")
        summary["held_out_prior_spearman"] = held_out_spearman(model, test, column)
    tmp = f"{out}.tmp{os.getpid()}"
    write_archive(
        tmp,
        {
            "meta.json": json.dumps(summary).encode(),
            "model.ubj": bytes(model.booster.save_raw("ubj")),
        },
    )
    os.replace(tmp, out)
    summary["path"] = out
    summary["bytes"] = os.path.getsize(out)
    return summary
