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
from .rpc_config import RPCConfig
from .rpc_host import RPCSession
from .rpc_runner import RPCRunner, RPCRunnerFuture

__all__ = [
    "EvaluatorConfig",
    "LocalRunner",
    "LocalRunnerFuture",
    "PyRunner",
    "PyRunnerFuture",
    "RPCConfig",
    "RPCRunner",
    "RPCRunnerFuture",
    "RPCSession",
    "Runner",
    "RunnerFuture",
    "RunnerInput",
    "RunnerResult",
    "create",
    "default_alloc_argument",
    "default_cleanup",
    "default_run_evaluator",
]
