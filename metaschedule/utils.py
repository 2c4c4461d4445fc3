"""Small helpers shared by the tuner's components.

``derived_object`` keeps TVM's decorator name: in TVM it registers a Python subclass with
the FFI; here there is no FFI, so it checks at class-definition time that the subclass
implements every abstract method of its ``Py*`` base, and returns the class unchanged.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import signal
from collections.abc import Callable, Iterator
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
    import cloudpickle

    try:
        cloudpickle.dumps(obj)
    except Exception as err:
        raise TypeError(
            f"{what} must be picklable (with cloudpickle) to reach the worker processes; "
            f"pass a function or a dotted name like 'package.module.func'; got {obj!r}: {err}"
        ) from err


def cpu_count() -> int:
    """CPUs this process may run on (the affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


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


@contextlib.contextmanager
def deferred_full_collections(threshold2: int = 1000) -> Iterator[None]:
    """Within the block, Python's cyclic garbage collector seldom runs a full collection
    (its third threshold raised to ``threshold2``; restored after, when the next
    collection catches up); the young generations are collected as usual.

    A search allocates millions of IR nodes that stay alive for the batch (schedules,
    traces, memos): with the default threshold each full collection walks them all again,
    1.1 s of cbr's 9 s search in 8 collections, 0.2 s and no more memory without them.
    """
    g0, g1, g2 = gc.get_threshold()
    gc.set_threshold(g0, g1, max(g2, threshold2))
    try:
        yield
    finally:
        gc.set_threshold(g0, g1, g2)
