"""Small helpers shared by the tuner's components.

``derived_object`` keeps TVM's decorator name: in TVM it registers a Python subclass with
the FFI; here there is no FFI, so it checks at class-definition time that the subclass
implements every abstract method of its ``Py*`` base, and returns the class unchanged.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import pickle
import signal
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T", bound=type)


def derived_object(cls: T) -> T:
    """Check that ``cls`` implements all abstract methods of its base; return it.

    Raises:
        TypeError: naming the methods still abstract, so a missing override fails where
            the class is defined instead of where it is first instantiated.
    """
    if not isinstance(cls, type):
        raise TypeError(f"@derived_object decorates a class, got {type(cls).__name__}")
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    if missing:
        bases = ", ".join(b.__name__ for b in cls.__mro__[1:] if b is not object)
        raise TypeError(
            f"@derived_object class {cls.__qualname__} must implement {', '.join(missing)} "
            f"(abstract in its bases: {bases})"
        )
    return cls


def resolve_function(spec: str | Callable | None, default: Callable, what: str) -> Callable:
    """Turn ``spec`` into a callable: None gives ``default``; a string is a dotted import
    path ("package.module.func" or "package.module:func"); a callable is returned as is.
    """
    if spec is None:
        return default
    if callable(spec):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"{what} must be None, a callable or a dotted name, got {spec!r}")
    module_name, sep, attr = spec.partition(":")
    if not sep:
        module_name, _, attr = spec.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"{what}={spec!r} is not a dotted name like 'package.module.func'")
    try:
        module = importlib.import_module(module_name)
        func = getattr(module, attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"{what}={spec!r} cannot be imported: {err}") from err
    if not callable(func):
        raise TypeError(f"{what}={spec!r} names a {type(func).__name__}, not a function")
    return func


def check_picklable(obj: Any, what: str) -> None:
    """Raise a clear error if ``obj`` cannot be sent to a worker process."""
    try:
        pickle.dumps(obj)
    except Exception as err:
        raise TypeError(
            f"{what} must be picklable to reach the worker processes (a module-level function "
            f"or a dotted name like 'package.module.func'); got {obj!r}: {err}"
        ) from err


def cpu_count() -> int:
    """CPUs this process may run on (the affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


# Imported once by the fork server, so that every worker starts with them loaded.
_WORKER_PRELOAD = [
    "metaschedule.builder.local_builder",
    "metaschedule.runner.local_runner",
    "metaschedule.codegen",
    "metaschedule.runtime",
]

MAIN_GUARD_HINT = (
    "worker processes import the main module: if this runs from a script, put the script's "
    'work under `if __name__ == "__main__":`'
)


def worker_context() -> Any:
    """The multiprocessing context for worker pools.

    "forkserver" where the platform has it: workers fork from a clean, single-threaded
    server process, so they never inherit the parent's threads or an initialised OpenMP
    runtime (forking after OpenMP has run is a known way to hang the child); the server
    preloads the tuner's worker-side modules, so workers start in milliseconds. "spawn"
    elsewhere. Either way, as with any non-fork start method, workers import the main
    module, so scripts need an ``if __name__ == "__main__":`` guard.
    """
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_WORKER_PRELOAD)  # takes effect when the server starts
        return ctx
    return multiprocessing.get_context("spawn")


def describe_exit(exitcode: int | None) -> str:
    """'signal SIGSEGV' for a negative exit code, 'exit code 3' otherwise."""
    if exitcode is None:
        return "unknown exit status"
    if exitcode < 0:
        try:
            return f"signal {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit code {exitcode}"


class WorkerPool:
    """A pebble process pool: per-task timeouts, and a dead worker is replaced.

    Workers start lazily; the pool stops on :meth:`close`, when it is garbage collected,
    or when the interpreter exits.
    """

    def __init__(self, max_workers: int, initializer: Callable | None = None):
        self.max_workers = max_workers
        self.initializer = initializer
        self._start()

    def _start(self) -> None:
        import weakref

        from pebble import ProcessPool

        self._pool = ProcessPool(
            max_workers=self.max_workers, initializer=self.initializer, context=worker_context()
        )
        self._pending: set = set()  # futures not done yet, to cancel on close
        self._finalizer = weakref.finalize(self, _stop_pool, self._pool)

    def schedule(self, function: Callable, args: tuple, timeout: float | None = None) -> Any:
        """Submit ``function(*args)``; a ``concurrent.futures`` future of its result.

        A pool that broke (its workers could not start) is replaced by a new one first.
        """
        try:
            future = self._pool.schedule(function, args=args, timeout=timeout)
        except RuntimeError:  # pebble: "Unexpected error within the Pool"
            self.close()
            self._start()
            future = self._pool.schedule(function, args=args, timeout=timeout)
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)
        return future

    def close(self) -> None:
        """Stop now: pending futures are cancelled and the workers terminated."""
        for future in list(self._pending):
            future.cancel()
        self._finalizer()


def _stop_pool(pool: Any) -> None:
    pool.stop()
    pool.join()
