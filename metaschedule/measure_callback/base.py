"""The measure callback interface: what happens to each measured batch.

After a task's batch is measured, the task scheduler calls every callback's ``apply``
with the candidates and their builder and runner results. The default callbacks (TVM's)
add the records to the database, delete the built artifacts and train the cost model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Literal, Union

from .. import registry

if TYPE_CHECKING:
    from ..builder import BuilderResult
    from ..measure_candidate import MeasureCandidate
    from ..runner import RunnerResult
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

        Read the task through ``task_scheduler.task_view(task_id)``, a
        :class:`~metaschedule.measure_callback.task_view.TaskView` (its TuneContext, name,
        module, trial count, and the scheduler's database and cost model), rather than the
        scheduler's internals.
        """

    @staticmethod
    def create(kind: Literal["default"] | str) -> list[MeasureCallback]:
        """The callbacks of ``kind``: "default" is ``[AddToDatabase(),
        RemoveBuildArtifact(), UpdateCostModel()]`` (:mod:`.default_callbacks`).

        Raises:
            ValueError: an unknown kind (the message lists the known ones).
        """
        return registry.create("measure_callback", kind)

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
    raise TypeError(
        "measure_callbacks must be 'default', a MeasureCallback or a list of them, "
        f"got {callbacks!r}"
    )
