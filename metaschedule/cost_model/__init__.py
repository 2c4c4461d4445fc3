"""Cost models: score measure candidates and learn from measurements."""

from .base import CostModel, PyCostModel
from .mlp_model import MLPModel
from .prior import AnalyticPrior
from .random_model import RandomModel
from .xgb_model import XGBConfig, XGBModel

__all__ = [
    "AnalyticPrior",
    "CostModel",
    "MLPModel",
    "PyCostModel",
    "RandomModel",
    "XGBConfig",
    "XGBModel",
]
