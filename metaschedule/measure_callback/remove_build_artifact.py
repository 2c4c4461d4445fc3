"""``RemoveBuildArtifact``: delete the built artifacts once they are measured."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..builder.base import remove_artifact
from .base import MeasureCallback

if TYPE_CHECKING:
    from ..builder import BuilderResult
    from ..measure_candidate import MeasureCandidate
    from ..runner import RunnerResult
    from ..task_scheduler import TaskScheduler

__all__ = ["RemoveBuildArtifact"]


class RemoveBuildArtifact(MeasureCallback):
    """Deletes each artifact file, then its folder if that is left empty (the local
    builder puts each artifact in a folder of its own).

    Paths that are not files (a dummy builder's ``dummy://...``, an artifact already
    gone) are left alone.
    """

    incremental = True  # each result as soon as it arrives

    def apply(
        self,
        task_scheduler: TaskScheduler,
        task_id: int,
        measure_candidates: list[MeasureCandidate],
        builder_results: list[BuilderResult],
        runner_results: list[RunnerResult],
    ) -> None:
        for result in builder_results:
            remove_artifact(result.artifact_path)
