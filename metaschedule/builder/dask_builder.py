"""DaskBuilder: build candidates on the workers of a Dask cluster.

Each build is one Dask task. On the worker it runs in an isolated child process (see
:mod:`metaschedule.runner.rpc_host`), so a build that crashes or runs past
``timeout_sec`` fails alone. The built library comes back as bytes and is written here,
in a fresh temporary folder per artifact as the local builder does, so the runner
(local or RPC) and ``RemoveBuildArtifact`` see an ordinary local path.

Deadlines: with ``timeout_sec`` set, the worker waits for its child's reply at most
``B = max(30, 3 * timeout_sec)`` seconds and the tuner for each result at most ``B + 10``
(from when it starts waiting for that one: the results are collected in order, so the
builds before it are done); past either, the build is an error result.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Any

from ..registry import register
from ..runner.local_runner import _Deadline
from ..runner.rpc_config import RPCConfig, _connect
from ..runner.rpc_host import call_isolated, prestart
from ..utils import derived_object, resolve_function
from .base import BuilderInput, BuilderResult, PyBuilder
from .local_builder import T_BUILD, T_EXPORT, _worker_build, default_build

if TYPE_CHECKING:
    from distributed import Client, Security

__all__ = ["DaskBuilder"]


def _build_in_child(
    f_build: Any,
    f_export: Any,
    mod: Any,
    target: Any,
    params: Any,
    options: Any,
    timeout_sec: float | None,
) -> tuple[str, Any]:
    """Runs in the worker's child process: ("ok", library bytes) or ("error", message)."""
    deadline = _Deadline(timeout_sec)
    deadline.resume()
    try:
        status, value = _worker_build(f_build, f_export, mod, target, params, options, timeout_sec)
        if status != "ok":
            return status, value.replace("LocalBuilder:", "DaskBuilder:", 1)
        with open(value, "rb") as f:
            data = f.read()
        shutil.rmtree(os.path.dirname(value), ignore_errors=True)  # the worker's copy
        return "ok", data
    finally:
        deadline.pause()


#: seconds the tuner allows past the worker's own bound, for the result's way back
_TRANSPORT_SLACK_SEC = 10.0


def _wait_bound(timeout_sec: float | None) -> float | None:
    return None if timeout_sec is None else max(30.0, 3.0 * timeout_sec)


def _build_task(*args: Any) -> tuple[str, Any]:
    timeout_sec = args[-1]
    return call_isolated(
        _build_in_child, args, "DaskBuilder", timeout_sec, wait_sec=_wait_bound(timeout_sec)
    )


@register("builder", "dask")
@derived_object
class DaskBuilder(PyBuilder):
    """Build on a Dask cluster; results are local paths as with :class:`LocalBuilder`.

    Args:
        rpc_config: where the scheduler is (``tracker_key`` is not needed for building;
            unset fields come from the environment as for :class:`RPCConfig`).
        timeout_sec: seconds one build may take (None: no limit).
        f_build: the build function or its dotted name (default: :func:`default_build`).
        f_export: the export function or its dotted name (default: ``default_export``);
            it must write a file whose path it returns.
        resources: Dask resources a build needs, e.g. ``{"build": 1}`` to keep builds
            off the measuring hosts (default: none, any worker builds).
        security: a ``distributed.Security`` (TLS certificates) for the connection; it
            replaces ``rpc_config.security`` (default: that, or ``MS_RPC_TLS_*``).

    The connection is made at the first :meth:`build`. Hosts need metaschedule and a
    C compiler installed.
    """

    def __init__(
        self,
        rpc_config: RPCConfig | None = None,
        timeout_sec: float | None = 30.0,
        f_build: None | str | T_BUILD = None,
        f_export: None | str | T_EXPORT = None,
        resources: dict[str, float] | None = None,
        security: Security | None = None,
    ):
        if timeout_sec is not None and timeout_sec <= 0:
            raise ValueError(f"timeout_sec must be positive or None, got {timeout_sec}")
        for name, f in (("f_build", f_build), ("f_export", f_export)):
            resolve_function(f, default_build, name)  # fail early on a bad name
        if security is not None:
            rpc_config = (rpc_config or RPCConfig())._replace(security=security)
        self.rpc_config = RPCConfig._normalized(rpc_config, need_key=False)
        self.timeout_sec = timeout_sec
        self.f_build = f_build
        self.f_export = f_export
        self.resources = dict(resources or {})
        self._client: Client | None = None

    def build(self, build_inputs: list[BuilderInput]) -> list[BuilderResult]:
        if self._client is None:
            client = _connect(self.rpc_config, "DaskBuilder")
            workers = self._workers(client)
            if not workers:
                client.close()
                raise RuntimeError(
                    f"DaskBuilder: no Dask worker at {self.rpc_config.address} offers the "
                    f"resources {self.resources}; start one with: dask worker "
                    f"{self.rpc_config.address} --nthreads 1"
                    + "".join(f' --resources "{k}={v}"' for k, v in self.resources.items())
                )
            client.run(prestart, workers=workers, wait=False)  # children start importing
            self._client = client
        futures = [
            self._client.submit(
                _build_task,
                self.f_build,
                self.f_export,
                inp.mod,
                inp.target,
                inp.params,
                inp.codegen_options,
                self.timeout_sec,
                resources=self.resources or None,
                pure=False,
                retries=0,
            )
            for inp in build_inputs
        ]
        return [self._result(f) for f in futures]

    def _workers(self, client: Client) -> list[str]:
        info = client.scheduler_info(n_workers=-1)["workers"]
        return [
            address
            for address, worker in info.items()
            if all(
                (worker.get("resources") or {}).get(k, 0) >= v for k, v in self.resources.items()
            )
        ]

    def _result(self, future: Any) -> BuilderResult:
        bound = _wait_bound(self.timeout_sec)
        try:
            status, value = future.result(
                timeout=None if bound is None else bound + _TRANSPORT_SLACK_SEC
            )
        except TimeoutError:
            future.cancel()
            return BuilderResult(
                None,
                f"DaskBuilder: no result within {bound + _TRANSPORT_SLACK_SEC:.0f} s "
                "(max(30, 3 x timeout_sec) and the way back); the workers may be stuck, "
                "busy or gone; the build task was cancelled",
            )
        except Exception as err:  # noqa: BLE001 - e.g. KilledWorker: data for the tuner
            return BuilderResult(
                None, f"DaskBuilder: the build task failed: {type(err).__name__}: {err}"
            )
        if status != "ok":
            return BuilderResult(None, value)
        # named after this process, as LocalBuilder's: a killed tuner's folders are found
        # and removed by the next builder (local_builder.remove_stale_build_dirs)
        folder = tempfile.mkdtemp(prefix=f"metaschedule-build-{os.getpid()}-")
        path = os.path.join(folder, "artifact.so")
        with open(path, "wb") as f:
            f.write(value)
        os.chmod(path, 0o755)
        return BuilderResult(path, None)

    def close(self) -> None:
        """Disconnect from the scheduler; a later ``build`` connects again."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> DaskBuilder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
