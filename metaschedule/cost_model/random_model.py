"""``RandomModel``: uniform random scores, for tuning without a learned model."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

from ..registry import register
from .base import CostModel

if TYPE_CHECKING:
    from ..measure_candidate import MeasureCandidate
    from ..runner import RunnerResult

__all__ = ["RandomModel"]


@register("cost_model", "random")
class RandomModel(CostModel):
    """Scores drawn uniformly from ``[0, max_range)`` by the model's own generator.

    Args:
        seed: seed of the model's ``numpy.random.Generator`` (None: from the OS).
        path: load the generator state from this file (what :meth:`save` wrote).
        max_range: upper end of the scores.

    Where TVM keeps a legacy ``np.random`` state tuple, this keeps a ``Generator``;
    :meth:`save` writes its bit-generator state as JSON.
    """

    def __init__(
        self, *, seed: int | None = None, path: str | None = None, max_range: int | None = 100
    ) -> None:
        self.max_range = 100 if max_range is None else max_range
        if not self.max_range > 0:
            raise ValueError(f"RandomModel: max_range must be positive, got {max_range!r}")
        self.rng = np.random.default_rng(seed)
        if path is not None:
            self.load(path)

    def load(self, path: str) -> None:
        """Restore the generator state written by :meth:`save`."""
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
        if not isinstance(obj, dict) or "bit_generator" not in obj:
            raise ValueError(f"RandomModel.load: {path} does not hold a saved RandomModel state")
        bitgen = getattr(np.random, obj["bit_generator"])()
        bitgen.state = obj
        self.rng = np.random.Generator(bitgen)

    def save(self, path: str) -> None:
        """Write the generator state to ``path`` as JSON."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.rng.bit_generator.state, f)

    def update(
        self, context: Any, candidates: list[MeasureCandidate], results: list[RunnerResult]
    ) -> None:
        """Nothing to learn."""

    def predict(self, context: Any, candidates: list[MeasureCandidate]) -> np.ndarray:
        """``len(candidates)`` uniform scores in ``[0, max_range)``."""
        return self.rng.random(len(candidates)) * self.max_range
