"""Configuration of the measurement loop, and the protocol a measurement records."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from ..runtime.timer import HostLoad

__all__ = [
    "CONFIRM_QUIET_SECONDS",
    "OPENMP_PASSIVE_ENV",
    "POLICY_BASIS_ENV",
    "QUIET_LOADAVG_PER_CORE",
    "QUIET_OTHERS_SHARE",
    "QUIET_SPIN_COUNT",
    "EvaluatorConfig",
    "OpenMPPolicy",
    "WorkerEnv",
    "choose_openmp_policy",
    "openmp_policy_outdated",
    "openmp_policy_record",
    "openmp_worker_env",
    "sample_host_load",
    "use_load_following_openmp",
    "use_passive_openmp",
]

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
_RECORD: dict[str, Any] | None = None  # ... and why (openmp_policy_record)


def _policy_string() -> str:
    policy = os.environ.get("OMP_WAIT_POLICY", "default")
    spin = os.environ.get("GOMP_SPINCOUNT")
    return policy if spin is None else f"{policy} (GOMP_SPINCOUNT={spin})"


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
    _POLICY = _policy_string()
    return _POLICY


# ------------------------------------------------------------------ load-following policy
#: GOMP_SPINCOUNT on a quiet machine: threads spin this many iterations at a barrier
#: before sleeping, so the barriers of a short kernel and the gaps between timed calls
#: need no wake-up. One iteration (a load and a ``pause``) took 26-49 ns on this
#: project's 2-core EPYC, so 10^4 spin for 0.3-0.5 ms, longer than a short kernel's
#: barriers and the gaps between its timed calls; libgomp's default, 3*10^5, spins
#: 8-15 ms. On a busy machine every spin count lost 3-60x against passive waiting
#: (``benchmarks/omp_wait_policy.py``), hence passive there.
QUIET_SPIN_COUNT = 10000
#: The machine is quiet when other processes used at most this share of its cores (at
#: least 0.15 of a core) while the worker looked ...
QUIET_OTHERS_SHARE = 0.1
#: ... and the 1-minute load average is at most this many runnable tasks per core: the
#: machine is not oversubscribed (it lags, and counts our own builder's bursts: the
#: instant sample decides, this only rules out a machine busy all along).
QUIET_LOADAVG_PER_CORE = 1.0
#: When only the load average says busy, the others are watched this many seconds more
#: and, quiet all along, the machine is quiet: the average lags a minute behind and
#: counts this process's own recent work (a tuning or a timing that just ended, its
#: builds), which made a run started after another one measure every kernel passive.
CONFIRM_QUIET_SECONDS = 1.0


class OpenMPPolicy(NamedTuple):
    """The OpenMP environment measurements run under and why (a pure decision).

    Spinning threads take the cores from other processes and lose 10-100x when those
    compete (matmul-128: 27.7 GFLOPS passive, 0.2 spinning under load); sleeping
    threads pay a wake-up per parallel region and barrier, 35-55% of a short kernel on a
    quiet machine. So a measurement spins briefly when the machine is quiet and sleeps
    at once when it is busy.
    """

    env: dict[str, str]
    reason: str  # "quiet", "busy", "unknown load"


def choose_openmp_policy(
    others_cores: float | None, loadavg_1m: float | None, cores: int
) -> OpenMPPolicy:
    """The policy for a machine of ``cores`` cores where other processes used
    ``others_cores`` cores (None: unknown) and the load average is ``loadavg_1m``."""
    if others_cores is None:
        return OpenMPPolicy(dict(OPENMP_PASSIVE_ENV), "unknown load")
    cores = max(int(cores), 1)
    quiet = others_cores <= max(QUIET_OTHERS_SHARE * cores, 0.15)
    if loadavg_1m is not None:
        quiet = quiet and loadavg_1m <= QUIET_LOADAVG_PER_CORE * cores
    if quiet:
        return OpenMPPolicy({"GOMP_SPINCOUNT": str(QUIET_SPIN_COUNT)}, "quiet")
    return OpenMPPolicy(dict(OPENMP_PASSIVE_ENV), "busy")


def openmp_policy_outdated(
    decision: str | None, others_cores: float | None, cores: int | None = None
) -> bool:
    """Whether a worker that chose ``decision`` should choose again, having seen other
    processes use ``others_cores`` cores while it timed: it spins (decided "quiet") and
    the machine is busy now. (Passive waiting on a machine that became quiet only costs
    short kernels their wake-ups; it stays.)"""
    if decision != "quiet" or others_cores is None:
        return False
    return choose_openmp_policy(others_cores, None, cores or os.cpu_count() or 1).reason == "busy"


def sample_host_load(seconds: float = 0.1) -> dict[str, Any]:
    """The load other processes put on the host over ``seconds`` (this process sleeps):
    ``others_cores``, ``loadavg_1m`` and ``wall_secs``, as ``HostLoad.until`` gives."""
    before = HostLoad.now()
    time.sleep(seconds)
    return before.until(HostLoad.now())


#: The variable through which a runner tells its workers why their OpenMP environment
#: is what it is (JSON: the decision, the load seen, and the variables it set).
POLICY_BASIS_ENV = "MS_OPENMP_POLICY_BASIS"


def _confirm_sample() -> dict[str, Any]:
    return sample_host_load(CONFIRM_QUIET_SECONDS)


def openmp_worker_env(
    sample: Callable[[], dict[str, Any]] = sample_host_load,
    confirm: Callable[[], dict[str, Any]] = _confirm_sample,
) -> dict[str, str]:
    """The environment for a pool of measuring workers, chosen from the load ``sample()``
    sees (:func:`choose_openmp_policy`); ``{}`` when the user set ``OMP_WAIT_POLICY`` or
    ``GOMP_SPINCOUNT`` (the workers inherit the user's). One decision for the whole pool,
    so that the candidates of a batch are measured alike. When the others were quiet and
    only the load average says busy, ``confirm()`` (a longer sample, see
    :data:`CONFIRM_QUIET_SECONDS`) decides."""
    if any(key in os.environ for key in OPENMP_PASSIVE_ENV):
        return {}
    load = sample()
    cores = os.cpu_count() or 1
    others = load.get("others_cores")
    chosen = choose_openmp_policy(others, load.get("loadavg_1m"), cores)
    basis = {"decision": chosen.reason, **load, "cores": cores}
    if chosen.reason == "busy" and choose_openmp_policy(others, None, cores).reason == "quiet":
        longer = confirm().get("others_cores")
        basis["confirm_others_cores"] = longer
        chosen = choose_openmp_policy(longer, None, cores)
        basis["decision"] = chosen.reason
    basis["env"] = chosen.env
    return {**chosen.env, POLICY_BASIS_ENV: json.dumps(basis)}


def openmp_policy_record() -> dict[str, Any]:
    """What a worker's kernels run with, as a measurement records it: ``omp_wait_policy``
    (as :func:`use_passive_openmp` gives it) and ``omp_policy_basis`` (why: the runner's
    decision with the load it saw, "user", "passive" or "libgomp loaded"). Call it before
    the first kernel library is loaded; a worker started without a runner's decision
    measures passive unless the user chose (:func:`use_passive_openmp`)."""
    global _RECORD
    if _RECORD is not None:
        return dict(_RECORD)
    raw = os.environ.get(POLICY_BASIS_ENV)
    basis: dict[str, Any] = json.loads(raw) if raw else {}
    mine = {k: os.environ.get(k) for k in OPENMP_PASSIVE_ENV}
    if basis and mine != {k: basis.get("env", {}).get(k) for k in OPENMP_PASSIVE_ENV}:
        basis = {"decision": "user"}  # changed in the worker (e.g. a WorkerEnv initializer)
    elif not basis:
        basis = {"decision": "user" if any(mine.values()) else "passive"}
    if _libgomp_loaded() and _POLICY is None:
        basis = {"decision": "libgomp loaded"}
    _RECORD = {"omp_wait_policy": use_passive_openmp(), "omp_policy_basis": basis}
    return dict(_RECORD)


def use_load_following_openmp(
    sample: Callable[[], dict[str, Any]] = sample_host_load,
) -> dict[str, Any]:
    """:func:`openmp_worker_env` applied to this process (a benchmark timing kernels
    itself), before libgomp loads; returns :func:`openmp_policy_record`."""
    if _RECORD is None and _POLICY is None and not _libgomp_loaded():
        os.environ.update(openmp_worker_env(sample))
    return openmp_policy_record()


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
