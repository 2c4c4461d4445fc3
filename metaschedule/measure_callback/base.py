"""The measure callback interface: what happens to each measured batch.

After a task's batch is measured, the task scheduler calls every callback's ``apply``
with the candidates and their builder and runner results. The default callbacks (TVM's)
add the records to the database, delete the built artifacts and train the cost model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Literal, Union

if TYPE_CHECKING:
    from ..builder import BuilderResult
    from ..runner import RunnerResult
    from ..search_strategy import MeasureCandidate
    from ..task_scheduler import TaskScheduler

__all__ = ["MeasureCallback", "PyMeasureCallback", "create"]


class MeasureCallback(ABC):
    """Acts on the results of a measured batch of one task."""

    CallbackListType = Union["list[MeasureCallback]", "MeasureCallback", Literal["default"]]

    #: False (the default): ``apply`` gets each batch once, when all of it is measured.
    #: True: ``apply`` gets the results as they arrive (sublists of the batch, each
    #: candidate exactly once), so e.g. the database holds every result at once and an
    #: interrupted run loses nothing.
    incremental: bool = False

    @abstractmethod
    def apply(
        self,
        task_scheduler: TaskScheduler,
        task_id: int,
        measure_candidates: list[MeasureCandidate],
        builder_results: list[BuilderResult],
        runner_results: list[RunnerResult],
    ) -> None:
        """Act on a measured batch of task ``task_id`` (the three lists align).

        The scheduler's state is available: ``task_scheduler.tasks[task_id].ctx`` (the
        TuneContext), ``task_scheduler.database``, ``task_scheduler.cost_model``.
        """

    @staticmethod
    def create(kind: Literal["default"]) -> list[MeasureCallback]:
        """The callbacks of ``kind``: "default" is ``[AddToDatabase(),
        RemoveBuildArtifact(), UpdateCostModel()]``."""
        from .add_to_database import AddToDatabase
        from .remove_build_artifact import RemoveBuildArtifact
        from .update_cost_model import UpdateCostModel

        if kind != "default":
            raise ValueError(f"unknown measure callback kind {kind!r}; expected one of: default")
        return [AddToDatabase(), RemoveBuildArtifact(), UpdateCostModel()]

    def __str__(self) -> str:
        return type(self).__name__


class PyMeasureCallback(MeasureCallback):
    """The base for measure callbacks written by users (TVM's name; no FFI here).

    Subclass it, decorate with ``@derived_object`` and implement :meth:`apply`.
    """


create = MeasureCallback.create


def normalize_callbacks(callbacks: MeasureCallback.CallbackListType) -> list[MeasureCallback]:
    """A list of callbacks from "default", one callback, or a list of them."""
    if isinstance(callbacks, str):
        return MeasureCallback.create(callbacks)  # type: ignore[arg-type]
    if isinstance(callbacks, MeasureCallback):
        return [callbacks]
    if isinstance(callbacks, (list, tuple)):
        bad = [c for c in callbacks if not isinstance(c, MeasureCallback)]
        if bad:
            raise TypeError(f"measure_callbacks must hold MeasureCallback objects, got {bad[0]!r}")
        return list(callbacks)
    raise TypeError("measure_callbacks must be 'default', a MeasureCallback or a list of them, "
                    f"got {callbacks!r}")
