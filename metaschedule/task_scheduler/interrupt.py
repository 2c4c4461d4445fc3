"""Holding Ctrl-C while the task scheduler commits a result, so a commit is never cut in
half."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["deferred_interrupt"]


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold a Ctrl-C (SIGINT) until the block ends, then raise it; main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list = []
    try:
        previous = signal.signal(signal.SIGINT, lambda *args: caught.append(args))
    except (ValueError, TypeError):  # no signal support here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught and callable(previous):
            previous(*caught[0])
        elif caught and previous == signal.SIG_DFL:
            raise KeyboardInterrupt
