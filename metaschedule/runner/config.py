"""Configuration of the measurement loop, and the protocol a measurement records."""

from __future__ import annotations

import os
from typing import Any, NamedTuple

__all__ = ["OPENMP_PASSIVE_ENV", "EvaluatorConfig", "WorkerEnv", "use_passive_openmp"]

#: The environment a runner worker measures under: OpenMP threads that finished their
#: share sleep at the barrier instead of spinning, so they do not take the CPU from a
#: sibling thread (or from another process) on a busy machine. libgomp reads these once,
#: when it is loaded, so they are set before a worker loads its first kernel.
OPENMP_PASSIVE_ENV = {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0"}


def _libgomp_loaded() -> bool:
    try:
        with open("/proc/self/maps") as f:
            return "libgomp" in f.read()
    except OSError:
        return False


_POLICY: str | None = None  # what this process's libgomp runs with, once known


def use_passive_openmp() -> str:
    """Set :data:`OPENMP_PASSIVE_ENV` in this (worker) process unless the user set either
    variable; returns the wait policy kernels will run with. Call it before the first
    kernel library is loaded: once libgomp is loaded the policy it read stays.
    """
    global _POLICY
    if _POLICY is not None:
        return _POLICY
    if _libgomp_loaded():
        policy = os.environ.get("OMP_WAIT_POLICY", "default")
        return f"{policy} (libgomp was loaded before the runner could set it)"
    if not any(key in os.environ for key in OPENMP_PASSIVE_ENV):  # the user's choice wins
        os.environ.update(OPENMP_PASSIVE_ENV)
    policy = os.environ.get("OMP_WAIT_POLICY", "default")
    spin = os.environ.get("GOMP_SPINCOUNT")
    _POLICY = policy if spin is None else f"{policy} (GOMP_SPINCOUNT={spin})"
    return _POLICY


class WorkerEnv(dict):
    """Environment variables for worker processes, as a picklable ``initializer``:
    ``LocalRunner(initializer=WorkerEnv({"OMP_WAIT_POLICY": "ACTIVE"}))``. A value of
    None removes the variable.

    Workers start from a fork server that keeps the environment of the moment the first
    pool started, so changing ``os.environ`` in the parent later does not reach them.
    """

    def __call__(self) -> None:
        for key, value in self.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = str(value)


class EvaluatorConfig(NamedTuple):
    """How to time one candidate (the protocol is in :mod:`metaschedule.runtime.timer`).

    Args:
        number: calls averaged into one measurement (one "repeat").
        repeat: measurements to take; the result has ``repeat`` numbers per argument set
            (fewer when ``max_total_ms`` runs out).
        min_repeat_ms: raise ``number`` until one repeat lasts at least this many ms
            (sized from the median of ``num_probes`` single-call probes).
        enable_cpu_cache_flush: flush the CPU caches before each call (not counted).
        warmup: untimed calls before timing.
        num_probes: single-call probes (at most 3) whose median sizes ``number``.
        max_total_ms: a bound on the timed part of one argument set (0: none), so that a
            kernel whose speed swings stays within the runner's timeout.

    The kernel runs ``warmup + number * repeat`` times or more. A NamedTuple, as in TVM
    (the fields after ``enable_cpu_cache_flush`` are ours and have defaults).
    """

    number: int = 3
    repeat: int = 1
    min_repeat_ms: int = 100
    enable_cpu_cache_flush: bool = False
    warmup: int = 1
    num_probes: int = 3
    max_total_ms: int = 2000

    @staticmethod
    def _normalized(config: EvaluatorConfig | None) -> EvaluatorConfig:
        """Fill in defaults and check the values."""
        if config is None:
            return EvaluatorConfig()
        if not isinstance(config, EvaluatorConfig):
            raise TypeError(f"expected an EvaluatorConfig, got {type(config).__name__}")
        config = EvaluatorConfig(
            number=int(config.number),
            repeat=int(config.repeat),
            min_repeat_ms=int(config.min_repeat_ms),
            enable_cpu_cache_flush=bool(config.enable_cpu_cache_flush),
            warmup=int(config.warmup),
            num_probes=int(config.num_probes),
            max_total_ms=int(config.max_total_ms),
        )
        if (
            config.number < 1
            or config.repeat < 1
            or config.min_repeat_ms < 0
            or config.warmup < 0
            or config.num_probes < 0
            or config.max_total_ms < 0
        ):
            raise ValueError(
                "EvaluatorConfig needs number >= 1, repeat >= 1, and min_repeat_ms, warmup, "
                f"num_probes, max_total_ms >= 0; got {config}"
            )
        return config

    def protocol(self) -> dict[str, Any]:
        """The measurement protocol as recorded with a result."""
        return {
            "warmup": self.warmup,
            "number": self.number,
            "repeat": self.repeat,
            "min_repeat_ms": self.min_repeat_ms,
            "num_probes": self.num_probes,
            "max_total_ms": self.max_total_ms,
            "cache_flush": self.enable_cpu_cache_flush,
            "statistic": "mean seconds per call in each repeat; a record ranks by the mean "
            "of its repeats",
        }
