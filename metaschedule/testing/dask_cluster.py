"""A small Dask fleet in this process, for tests and benchmarks of the RPC runner.

Two worker processes (each under a nanny, so a killed worker comes back): one offers
the device resource ``DEVICE_KEY`` (it measures), the other offers nothing (it builds).
"""

from __future__ import annotations

import atexit
import logging
import os
import time
from typing import Any

from ..runner.rpc_config import RPCConfig, workers_with_key
from ..runner.rpc_runner import default_run_evaluator

__all__ = [
    "DEVICE_KEY",
    "hanging_run_evaluator",
    "local_fleet",
    "measuring_worker",
    "rpc_config",
    "slow_run_evaluator",
]

DEVICE_KEY = "device-test"
_fleet: Any = None


def local_fleet() -> Any:
    """The process-wide ``LocalCluster`` (started on first use, closed at exit)."""
    global _fleet
    if _fleet is None:
        from distributed import LocalCluster, Nanny

        quiet = logging.CRITICAL  # killing a worker on purpose is not news
        cluster = LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=quiet,
        )
        cluster.worker_spec["measure"] = {
            "cls": Nanny,
            "options": {"nthreads": 1, "resources": {DEVICE_KEY: 1}, "silence_logs": quiet},
        }
        cluster.sync(cluster._correct_state)
        atexit.register(cluster.close)
        _fleet = cluster
    return _fleet


def rpc_config(key: str = DEVICE_KEY, session_timeout_sec: int = 10) -> RPCConfig:
    """An RPCConfig pointing at :func:`local_fleet`."""
    host, port = local_fleet().scheduler_address.rsplit(":", 1)
    return RPCConfig(host, int(port), key, session_timeout_sec=session_timeout_sec)


def measuring_worker(client: Any, key: str = DEVICE_KEY, wait_sec: float = 30.0) -> tuple[str, int]:
    """(address, pid) of the worker offering ``key``, waiting for it to (re)join."""
    config = rpc_config(key)
    (address,) = workers_with_key(client, config, wait_sec=wait_sec)
    pid = client.run(os.getpid, workers=[address])[address]
    return address, pid


def slow_run_evaluator(
    session: Any, rt_mod: Any, device: str, config: Any, args: Any
) -> list[float]:
    """An RPC f_run_evaluator that sleeps 1 s before timing (room to kill its worker)."""
    time.sleep(1.0)
    return default_run_evaluator(session, rt_mod, device, config, args)


def hanging_run_evaluator(
    session: Any, rt_mod: Any, device: str, config: Any, args: Any
) -> list[float]:
    """An RPC f_run_evaluator that never returns (to test the per-measurement timeout)."""
    while True:
        time.sleep(1.0)
