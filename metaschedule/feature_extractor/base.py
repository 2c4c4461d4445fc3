"""The feature extractor interface: measure candidates to per-candidate feature matrices."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .. import registry

if TYPE_CHECKING:
    from ..measure_candidate import MeasureCandidate

__all__ = ["FeatureExtractor", "PyFeatureExtractor"]


class FeatureExtractor(ABC):
    """Extracts features from measure candidates for a cost model.

    Where TVM returns a list of ``runtime.Tensor``, this returns numpy arrays: one
    2-D float32 array ``[rows, feature_vector_length]`` per candidate.
    """

    @abstractmethod
    def extract_from(self, context: Any, candidates: list[MeasureCandidate]) -> list[np.ndarray]:
        """One feature matrix per candidate, in order.

        Args:
            context: the TuneContext (its ``target`` and ``mod`` may be consulted).
            candidates: the measure candidates.
        """

    @staticmethod
    def create(
        kind: Literal["per-store-feature"] | str, *args: Any, **kwargs: Any
    ) -> FeatureExtractor:
        """Create a feature extractor of a registered kind ("per-store-feature"; see
        :mod:`metaschedule.registry`).

        Raises:
            ValueError: an unknown kind (the message lists the known ones).
        """
        return registry.create("feature_extractor", kind, *args, **kwargs)


class PyFeatureExtractor(FeatureExtractor):
    """The base for feature extractors written by users (TVM's name; no FFI here).

    Subclass it, decorate with ``@derived_object`` and implement :meth:`extract_from`.
    """

    def __str__(self) -> str:
        return f"{type(self).__name__}({id(self):#x})"
