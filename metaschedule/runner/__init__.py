"""Runners: measure built artifacts, returning futures of the results."""

from .base import (
    PyRunner,
    PyRunnerFuture,
    Runner,
    RunnerFuture,
    RunnerInput,
    RunnerResult,
    create,
)
from .config import EvaluatorConfig
from .local_runner import (
    LocalRunner,
    LocalRunnerFuture,
    default_alloc_argument,
    default_cleanup,
    default_run_evaluator,
)

__all__ = [
    "EvaluatorConfig",
    "LocalRunner",
    "LocalRunnerFuture",
    "PyRunner",
    "PyRunnerFuture",
    "Runner",
    "RunnerFuture",
    "RunnerInput",
    "RunnerResult",
    "create",
    "default_alloc_argument",
    "default_cleanup",
    "default_run_evaluator",
]
