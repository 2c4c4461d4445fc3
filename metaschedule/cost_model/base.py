"""The cost model interface: predict which candidates run fastest, learn from measurements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .. import registry

if TYPE_CHECKING:
    from ..measure_candidate import MeasureCandidate
    from ..runner import RunnerResult

__all__ = ["CostModel", "PyCostModel"]


class CostModel(ABC):
    """Scores measure candidates (higher is better) and learns from runner results."""

    @abstractmethod
    def load(self, path: str) -> None:
        """Load the model from ``path`` (what :meth:`save` wrote)."""

    @abstractmethod
    def save(self, path: str) -> None:
        """Save the model to ``path``."""

    @abstractmethod
    def update(
        self, context: Any, candidates: list[MeasureCandidate], results: list[RunnerResult]
    ) -> None:
        """Learn from measured ``candidates`` (``results`` in the same order)."""

    @abstractmethod
    def predict(self, context: Any, candidates: list[MeasureCandidate]) -> np.ndarray:
        """Predicted normalized scores, one per candidate; higher means faster."""

    @property
    def warming_up(self) -> bool:
        """Whether the model has nothing learned yet and scores at random until it has
        (ours: the evolutionary search skips evolution guided by noise). Default: False.
        """
        return False

    @property
    def informed(self) -> bool:
        """Whether the predictions carry knowledge rather than chance: not warming up, or
        warming up with a pre-trained start (the search then lets them rank its warm-up
        batches). Default: ``not warming_up``."""
        return not self.warming_up

    @staticmethod
    def create(
        kind: Literal["xgb", "mlp", "random", "none"] | str, *args: Any, **kwargs: Any
    ) -> CostModel | None:
        """Create a cost model of a registered kind (see :mod:`metaschedule.registry`):
        "xgb", "mlp", "random", or "none" (gives None, as in TVM).

        Raises:
            ValueError: an unknown kind (the message lists the known ones).
        """
        return registry.create("cost_model", kind, *args, **kwargs)


@registry.register("cost_model", "none")
def _no_cost_model() -> None:
    """TVM's "none": tune without a cost model."""
    return None


class PyCostModel(CostModel):
    """The base for cost models written by users (TVM's name; no FFI here).

    Subclass it, decorate with ``@derived_object`` and implement the four methods.
    """

    def __str__(self) -> str:
        return f"{type(self).__name__}({id(self):#x})"


def check_lengths(candidates: list, results: list, where: str) -> None:
    """Raise a ``ValueError`` if ``candidates`` and ``results`` differ in length."""
    if len(candidates) != len(results):
        raise ValueError(
            f"{where}: got {len(candidates)} candidates but {len(results)} runner results; "
            "pass one result per candidate, in order"
        )
