"""What the learned cost models share: the training data, warm-up, adaptive retraining."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

from ..feature_extractor import FeatureExtractor
from ..profiler import Profiler
from .base import CostModel, check_lengths
from .metric import TrainingData, costs_of, read_archive, workload_key, write_archive

if TYPE_CHECKING:
    from ..measure_candidate import MeasureCandidate
    from ..runner import RunnerResult


class LearnedCostModel(CostModel):
    """A cost model trained on measured candidates (XGBModel, MLPModel).

    Subclasses set ``extractor``, ``num_warmup_samples``, ``adaptive_training`` and
    ``rng``, and implement ``is_trained``, ``_train`` and ``predict_features``.
    """

    data: TrainingData
    last_train_size: int
    extractor: Any
    num_warmup_samples: int
    adaptive_training: bool
    rng: np.random.Generator

    @property
    def is_trained(self) -> bool:
        raise NotImplementedError

    def _train(self) -> None:
        raise NotImplementedError

    def predict_features(self, features: list[np.ndarray]) -> np.ndarray:
        raise NotImplementedError

    @property
    def warming_up(self) -> bool:
        """True until trained on ``num_warmup_samples``: predictions are random."""
        return not self.is_trained or self.data_size < self.num_warmup_samples

    @property
    def data_size(self) -> int:
        """Number of measured candidates learned from."""
        return len(self.data)

    def update(
        self, context: Any, candidates: list[MeasureCandidate], results: list[RunnerResult]
    ) -> None:
        """Add the measured candidates to the training data and retrain when due.

        Training starts once ``num_warmup_samples`` are known; with adaptive training
        the model is retrained only after the data grew by a fifth.
        """
        check_lengths(candidates, results, f"{type(self).__name__}.update")
        if not candidates:
            return
        with Profiler.timeit("FeatureExtractor"):
            features = self.extractor.extract_from(context, candidates)
        self.data.add(workload_key(context), features, costs_of(results))
        if self.data_size < self.num_warmup_samples:
            return
        grown = self.data_size - self.last_train_size
        if self.adaptive_training and self.is_trained and grown < self.last_train_size / 5:
            return
        self._train()

    def predict(self, context: Any, candidates: list[MeasureCandidate]) -> np.ndarray:
        """Scores of ``candidates`` (higher is better); random during warm-up, unless
        the model is ``informed`` (pre-trained)."""
        if not self.informed:
            return self.rng.random(len(candidates))
        if not candidates:
            return np.zeros(0)
        with Profiler.timeit("FeatureExtractor"):
            features = self.extractor.extract_from(context, candidates)
        with Profiler.timeit("CostModel/Predict"):
            return self.predict_features(features)

    # ------------------------------------------------------------------ persistence
    def _write_archive(
        self, path: str, name: str, meta: dict[str, Any], model: dict[str, bytes]
    ) -> None:
        """Write the tar file ``path``: ``meta.json`` (the format ``metaschedule.<name>/1``,
        the counters, ``meta`` and the generator state), ``data.npz`` (the training data)
        and the ``model`` members."""
        meta = {
            "format": f"metaschedule.{name}/1",
            "last_train_size": self.last_train_size,
            **meta,
            "rng": self.rng.bit_generator.state,
        }
        members = {"meta.json": json.dumps(meta).encode(), "data.npz": self.data.to_bytes()}
        write_archive(path, {**members, **model})

    def _read_archive(self, path: str, name: str) -> tuple[dict[str, Any], dict[str, bytes]]:
        """Restore the training data, counters and generator state that
        :meth:`_write_archive` wrote to ``path``; returns its meta and all its members.

        Raises:
            ValueError: ``path`` was not written by ``<name>.save``.
        """
        members = read_archive(path, name)
        if "meta.json" not in members or "data.npz" not in members:
            raise ValueError(
                f"{name}.load: {path!r} lacks meta.json/data.npz; it was not "
                f"written by {name}.save (members: {sorted(members)})"
            )
        meta = json.loads(members["meta.json"])
        self.data = TrainingData.from_bytes(members["data.npz"])
        self.last_train_size = int(meta["last_train_size"])
        self.rng = generator_from_state(meta["rng"])
        return meta, members


def resolve_extractor(extractor: str | FeatureExtractor, owner: str) -> FeatureExtractor:
    """The feature extractor of a learned model: ``extractor`` itself, or created from a kind.

    Raises:
        TypeError: neither a FeatureExtractor nor a kind (``owner`` names the model).
    """
    if isinstance(extractor, str):
        extractor = FeatureExtractor.create(extractor)
    if not isinstance(extractor, FeatureExtractor):
        raise TypeError(
            f"{owner}: extractor must be a FeatureExtractor or a kind, "
            f"got {type(extractor).__name__}"
        )
    return extractor


def generator_from_state(state: dict[str, Any]) -> np.random.Generator:
    """A numpy Generator restored from ``Generator.bit_generator.state``."""
    bitgen = getattr(np.random, state["bit_generator"])()
    bitgen.state = state
    return np.random.Generator(bitgen)
