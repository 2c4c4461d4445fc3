"""The cost model interface: predict which candidates run fastest, learn from measurements."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

if TYPE_CHECKING:
    from ..runner import RunnerResult
    from ..search_strategy import MeasureCandidate

__all__ = ["CostModel", "PyCostModel"]

#: kind -> "module:Class" of the implementation, imported on first use
_KINDS: dict[str, str | None] = {
    "xgb": "metaschedule.cost_model.xgb_model:XGBModel",
    "mlp": "metaschedule.cost_model.mlp_model:MLPModel",
    "random": "metaschedule.cost_model.random_model:RandomModel",
    "none": None,
}


class CostModel(ABC):
    """Scores measure candidates (higher is better) and learns from runner results."""

    @abstractmethod
    def load(self, path: str) -> None:
        """Load the model from ``path`` (what :meth:`save` wrote)."""

    @abstractmethod
    def save(self, path: str) -> None:
        """Save the model to ``path``."""

    @abstractmethod
    def update(self, context: Any, candidates: list[MeasureCandidate],
               results: list[RunnerResult]) -> None:
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

    @staticmethod
    def create(kind: Literal["xgb", "mlp", "random", "none"], *args, **kwargs) -> CostModel | None:
        """Create a cost model of the given kind ("none" gives None, as in TVM)."""
        if kind not in _KINDS:
            raise ValueError(f"unknown cost model kind {kind!r}; expected one of: {', '.join(_KINDS)}")
        spec = _KINDS[kind]
        if spec is None:
            return None
        module_name, cls_name = spec.split(":")
        cls = getattr(importlib.import_module(module_name), cls_name)
        return cls(*args, **kwargs)


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
