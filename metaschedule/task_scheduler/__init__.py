"""Task schedulers: decide which task to tune next and run the tuning loop."""

from .base import PyTaskScheduler, TaskScheduler, create
from .gradient_based import GradientBased
from .round_robin import RoundRobin
from .task_record import TaskRecord
from .warm_start import WarmStart

__all__ = [
    "GradientBased",
    "PyTaskScheduler",
    "RoundRobin",
    "TaskRecord",
    "TaskScheduler",
    "WarmStart",
    "create",
]
