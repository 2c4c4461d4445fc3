"""Measure callbacks: act on each measured batch (database, artifacts, cost model)."""

from .add_to_database import AddToDatabase
from .base import MeasureCallback, PyMeasureCallback, create
from .default_callbacks import default_callbacks
from .remove_build_artifact import RemoveBuildArtifact
from .task_view import TaskView
from .update_cost_model import UpdateCostModel

__all__ = [
    "AddToDatabase",
    "MeasureCallback",
    "PyMeasureCallback",
    "RemoveBuildArtifact",
    "TaskView",
    "UpdateCostModel",
    "create",
    "default_callbacks",
]
