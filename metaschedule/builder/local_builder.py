"""LocalBuilder: build candidates in a pool of worker processes on this machine."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import traceback
from collections.abc import Callable
from concurrent.futures import CancelledError
from functools import partial
from typing import TYPE_CHECKING, Any

from ..codegen import BuildError
from ..codegen.build import build
from ..codegen.compiler import COMPILE_TIMEOUT_SEC
from ..codegen.options import CodegenOptions
from ..registry import register
from ..runtime.module import kernel_cache_dir
from ..tir.function import IRModule
from ..utils import (
    check_picklable,
    cpu_count,
    derived_object,
    describe_exit,
    resolve_function,
)
from ..worker import (
    PoolClosedError,
    WorkerDiedError,
    WorkerPool,
    WorkerStartError,
    WorkerTimeoutError,
)
from .base import BuilderInput, BuilderResult, PyBuilder, remove_artifact

if TYPE_CHECKING:
    from ..runtime import Module
    from ..target import Target

__all__ = [
    "T_BUILD",
    "T_EXPORT",
    "LocalBuilder",
    "default_build",
    "default_export",
    "remove_stale_build_dirs",
]

T_BUILD = Callable[[IRModule, "Target", "dict[str, Any] | None"], "Module"]
T_EXPORT = Callable[["Module"], str]


def default_build(
    mod: IRModule,
    target: Target,
    params: dict[str, Any] | None,
    *,
    timeout_sec: float | None = COMPILE_TIMEOUT_SEC,
) -> Module:
    """Compile ``mod`` for ``target`` with the project's code generator.

    ``params`` are ignored: a TIR module has no parameters to bind as constants.
    ``timeout_sec`` bounds the C compiler (the builder passes its own).
    """
    return build(mod, target, timeout_sec=timeout_sec)


#: the environment variable naming the process that owns the build folders (the tuner)
OWNER_ENV = "METASCHEDULE_BUILD_OWNER"
_BUILD_DIR = re.compile(r"metaschedule-build-(\d+)-")
_CACHE_TEMP = re.compile(r"\.ms-build-(\d+)-")  # codegen.compiler's files in the making


def default_export(mod: Module) -> str:
    """Export a built module as a shared library in a fresh temporary folder; its path.

    The folder is named after the process that owns it (the tuner, whose LocalBuilder
    sets ``METASCHEDULE_BUILD_OWNER`` for its workers), so that folders left by a
    killed tuner are recognised and removed by the next LocalBuilder
    (:func:`remove_stale_build_dirs`).
    """
    owner = os.environ.get(OWNER_ENV) or str(os.getpid())
    folder = tempfile.mkdtemp(prefix=f"metaschedule-build-{owner}-")
    path = os.path.join(folder, "artifact.so")
    try:
        mod.export_library(path)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return path


def remove_stale_build_dirs(directory: str | None = None) -> int:
    """Remove what builds of dead processes left (a process killed with ``kill -9``
    cannot clean up): build folders whose owner (tuner) is gone, in ``directory``
    (default: the temporary directory), and half-written compiler files of dead build
    workers in the kernel cache. How many were removed."""
    removed = _remove_dead(directory or tempfile.gettempdir(), _BUILD_DIR)
    try:
        removed += _remove_dead(kernel_cache_dir(), _CACHE_TEMP)
    except OSError:
        pass
    return removed


def _remove_dead(directory: str, pattern: re.Pattern) -> int:
    removed = 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    for name in names:
        match = pattern.match(name)
        if match is None or _alive(int(match.group(1))):
            continue
        path = os.path.join(directory, name)
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.remove(path)
            except OSError:
                continue
        removed += 1
    return removed


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs. A zombie does not: a worker killed with its tuner
    is re-parented to the init process, which may reap it only seconds later."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]  # after "pid (comm)"
    except (OSError, IndexError):
        return True  # no /proc (not Linux): os.kill's answer stands
    return state not in (b"Z", b"X")


def _worker_build(
    f_build: str | Callable | None,
    f_export: str | Callable | None,
    mod: IRModule,
    target: Target,
    params: dict[str, Any] | None,
    options: CodegenOptions | None = None,
    timeout_sec: float | None = COMPILE_TIMEOUT_SEC,
) -> tuple[str, str]:
    """Runs in a worker: ("ok", artifact_path) or ("error", message); ``options``: the
    code generator's, applied for this build; ``timeout_sec``: the builder's, which
    bounds the C compiler of the default build function too.

    Errors come back as text rather than as exceptions: an exception type that cannot
    be unpickled in the parent would otherwise hide the real message.
    """
    try:
        build = resolve_function(
            f_build, partial(default_build, timeout_sec=timeout_sec), "f_build"
        )
        export = resolve_function(f_export, default_export, "f_export")
        with (options or CodegenOptions.current()).applied():
            return "ok", export(build(mod, target, params))
    except Exception as err:  # noqa: BLE001 - every failure is data for the tuner
        if isinstance(err, BuildError):
            # The compiler's message is what the user needs; our stack is noise.
            return "error", f"LocalBuilder: build failed: {type(err).__name__}: {err}"
        return "error", (
            f"LocalBuilder: build failed: {type(err).__name__}: {err}\n"
            f"Traceback in the build worker:\n{traceback.format_exc()}"
        )


# Imported by each worker when it starts, so the first build does not pay for them.
_PRELOAD = ("metaschedule.builder.local_builder", "metaschedule.codegen")


@register("builder", "local")
@derived_object
class LocalBuilder(PyBuilder):
    """Build the given inputs on this machine, in parallel worker processes.

    Each build runs in a worker of a process pool with a per-build timeout; a build that
    raises, crashes its worker or runs past ``timeout_sec`` becomes a ``BuilderResult``
    whose ``error_msg`` says which and why, and the pool replaces a dead worker.

    Args:
        max_workers: worker processes (default: the CPUs this process may use).
        timeout_sec: seconds one build may take (None: no limit).
        f_build: the build function or its dotted name (default: :func:`default_build`).
        f_export: the export function or its dotted name (default: :func:`default_export`).
        initializer: run once in each worker when it starts (must be picklable).

    The workers are fresh interpreters running :mod:`metaschedule.worker`; they never
    import the caller's main module, so scripts, ``python -c`` and notebooks need no
    ``if __name__ == "__main__":`` guard. Functions travel by cloudpickle (by reference
    when importable, by value otherwise, e.g. when defined in a script or a notebook);
    a dotted name is imported in the worker. A worker that dies (crash, ``kill -9``,
    out of memory) fails only the build it held, with a message naming the signal, and
    is replaced. Call :meth:`close` (or use ``with``) to stop the workers early;
    otherwise they stop when the builder is garbage collected.

    Raises (from :meth:`build`):
        RuntimeError: the workers cannot start (e.g. the initializer raises); raised at
            once rather than waiting, and the next ``build`` tries anew.
    """

    def __init__(
        self,
        max_workers: int | None = None,
        timeout_sec: float | None = 30.0,
        f_build: None | str | T_BUILD = None,
        f_export: None | str | T_EXPORT = None,
        initializer: Callable[[], None] | None = None,
    ):
        if max_workers is None:
            max_workers = cpu_count()
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        if timeout_sec is not None and timeout_sec <= 0:
            raise ValueError(f"timeout_sec must be positive or None, got {timeout_sec}")
        for name, f in (("f_build", f_build), ("f_export", f_export)):
            resolve_function(f, default_build, name)  # fail early on a bad name
            check_picklable(f, name)
        if initializer is not None:
            check_picklable(initializer, "initializer")
        self.max_workers = max_workers
        self.timeout_sec = timeout_sec
        self.f_build = f_build
        self.f_export = f_export
        self.initializer = initializer
        self._pool: WorkerPool | None = None

    def build(self, build_inputs: list[BuilderInput]) -> list[BuilderResult]:
        if self._pool is None:
            remove_stale_build_dirs()
            self._pool = WorkerPool(
                self.max_workers,
                self.initializer,
                preload=_PRELOAD,
                env={OWNER_ENV: str(os.getpid())},
            )
        futures = [
            self._pool.schedule(
                _worker_build,
                (
                    self.f_build,
                    self.f_export,
                    inp.mod,
                    inp.target,
                    inp.params,
                    inp.codegen_options,
                    self.timeout_sec,
                ),
                timeout=self.timeout_sec,
            )
            for inp in build_inputs
        ]
        try:
            return [self._result(f) for f in futures]
        except BaseException:
            # Interrupted or broken: stop the builds in flight, remove what they made.
            for future in futures:
                future.cancel()
            self.close()
            for future in futures:
                if future.done() and not future.cancelled() and future.exception() is None:
                    status, value = future.result()
                    if status == "ok":
                        remove_artifact(value)
            raise

    def _result(self, future: Any) -> BuilderResult:
        try:
            status, value = future.result()
        except WorkerTimeoutError:
            return BuilderResult(
                None, f"LocalBuilder: build timed out after {self.timeout_sec} s (worker killed)"
            )
        except WorkerDiedError as err:
            return BuilderResult(
                None,
                f"LocalBuilder: the build crashed (worker died: {describe_exit(err.exitcode)})",
            )
        except WorkerStartError as err:
            raise RuntimeError(f"LocalBuilder: the build workers cannot start: {err}") from None
        except (CancelledError, PoolClosedError):
            return BuilderResult(None, "LocalBuilder: cancelled (the builder was closed)")
        except Exception as err:  # noqa: BLE001 - e.g. an input that cannot be pickled
            return BuilderResult(
                None, f"LocalBuilder: could not run the build: {type(err).__name__}: {err}"
            )
        if status == "ok":
            return BuilderResult(value, None)
        return BuilderResult(None, value)

    def close(self) -> None:
        """Stop the worker processes (and remove the files of builds they were in the
        middle of); a later ``build`` starts new ones."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None
            remove_stale_build_dirs()

    def __enter__(self) -> LocalBuilder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
