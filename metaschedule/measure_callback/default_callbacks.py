"""The default measure callbacks (TVM's ``MeasureCallback.create("default")``)."""

from __future__ import annotations

from ..registry import register
from .add_to_database import AddToDatabase
from .base import MeasureCallback
from .remove_build_artifact import RemoveBuildArtifact
from .update_cost_model import UpdateCostModel

__all__ = ["default_callbacks"]


@register("measure_callback", "default")
def default_callbacks() -> list[MeasureCallback]:
    """Add records to the database, delete build artifacts, then train the cost model."""
    return [AddToDatabase(), RemoveBuildArtifact(), UpdateCostModel()]
