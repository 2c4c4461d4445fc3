"""What runs on a fleet host: sessions, and an isolated child process per worker thread.

A Dask worker never runs a kernel (or a build) in its own process: a kernel that
crashes would kill the worker, and one that hangs cannot be stopped from a thread.
Instead a worker keeps long-lived child Python processes (:func:`call_isolated`), one
per request in flight, fed requests over pipes. A request that crashes or times out
(SIGALRM at its default action, as in the local runner) kills only its child: the caller
gets an error and a replacement starts at once, importing while the worker does other
work (a child takes about as long to start as ``import metaschedule``);
:func:`prestart` warms one up when a runner connects. A child whose worker dies exits on
its own (it watches its parent).
"""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

from ..runtime import load_module
from ..utils import describe_exit

if TYPE_CHECKING:
    from distributed import Client

    from ..runtime import Module

__all__ = ["RPCSession", "call_isolated", "prestart"]

# A child is replaced after this many requests: every loaded library stays mapped.
_MAX_REQUESTS_PER_CHILD = 256
_HEADER = struct.Struct("!Q")


class RPCSession:
    """A measuring host, TVM's ``RPCSession`` over Dask.

    On the host (as ``default_create_session`` returns it inside a measurement) the file
    operations act on the host's disk: :meth:`upload` copies an artifact that arrived
    with the task to ``remote_path``, :meth:`load_module` loads it, :meth:`remove`
    deletes it. On the tuner's side (as :meth:`RPCConfig.connect_server` returns it) the
    session names one measuring ``worker`` and :meth:`run` calls a function there.

    Args:
        key: the device key (the Dask worker resource).
        worker: the Dask worker address, when known.
        client: a ``distributed.Client`` for :meth:`run` (tuner side only).
    """

    def __init__(self, key: str, worker: str | None = None, client: Client | None = None):
        self.key = key
        self.worker = worker
        self.client = client

    def device(self, dev_type: str) -> str:
        """The device handle hooks receive: its type string, as in the local runner."""
        return dev_type

    def upload(self, local_path: str, remote_path: str) -> str:
        """Copy ``local_path`` to ``remote_path`` on this host; ``remote_path``."""
        os.makedirs(os.path.dirname(os.path.abspath(remote_path)), exist_ok=True)
        shutil.copyfile(local_path, remote_path)
        return remote_path

    def load_module(self, remote_path: str) -> Module:
        """Load an uploaded shared library."""
        return load_module(remote_path)

    def remove(self, remote_path: str) -> None:
        """Delete an uploaded file (missing is fine)."""
        try:
            os.remove(remote_path)
        except FileNotFoundError:
            pass

    def run(self, func: Any, *args: Any, timeout: float | None = None) -> Any:
        """Call ``func(*args)`` on the session's worker, holding its device resource."""
        if self.client is None:
            return func(*args)
        future = self.client.submit(
            func, *args, workers=[self.worker], resources={self.key: 1}, pure=False
        )
        return future.result(timeout=timeout)

    def close(self) -> None:
        """Close the client of a tuner-side session."""
        if self.client is not None:
            self.client.close()
            self.client = None

    def __repr__(self) -> str:
        return f"RPCSession(key={self.key!r}, worker={self.worker!r})"


# --------------------------------------------------------------------------- parent side
class _Child:
    """One child process and its two pipes."""

    def __init__(self):
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        code = (
            f"from metaschedule.runner.rpc_host import _child_main; _child_main({req_r}, {res_w})"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], pass_fds=(req_r, res_w), stdin=subprocess.DEVNULL
        )
        os.close(req_r)
        os.close(res_w)
        self.requests = os.fdopen(req_w, "wb")
        self.responses = os.fdopen(res_r, "rb")
        self.served = 0

    def call(self, payload: bytes) -> bytes | None:
        """Send a request; its response, or None if the child died first."""
        try:
            self.requests.write(_HEADER.pack(len(payload)) + payload)
            self.requests.flush()
        except (BrokenPipeError, OSError):
            return None
        self.served += 1
        return _read_message(self.responses)

    def close(self) -> None:
        for stream in (self.requests, self.responses):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_idle: list[_Child] = []  # started children waiting for a request
_idle_lock = threading.Lock()


def _take_child() -> _Child:
    with _idle_lock:
        while _idle:
            child = _idle.pop()
            if child.proc.poll() is None:
                return child
            child.close()
    return _Child()


def _give_back(child: _Child | None) -> None:
    """Return a child to the idle list (None: start a replacement for a dead one)."""
    with _idle_lock:
        if child is not None or not _idle:
            _idle.append(child if child is not None else _Child())


async def prestart() -> None:
    """Start an idle child now if there is none. Run on workers with
    ``client.run(prestart, wait=False)``, which wants a coroutine; starting a process
    takes milliseconds (its import then runs on its own)."""
    with _idle_lock:
        if not _idle:
            _idle.append(_Child())


def call_isolated(func: Any, args: tuple, what: str, timeout_sec: float | None = None) -> Any:
    """Run ``func(*args)`` in this thread's child process; ``("ok", value)`` or
    ``("error", message)``.

    ``func`` must return a picklable value and may enforce its own deadline with
    SIGALRM (the local runner's ``_Deadline``); ``timeout_sec`` only words the message
    when the child is killed by that alarm. ``what`` names the caller in messages.
    """
    import cloudpickle

    payload = cloudpickle.dumps((func, args))
    child = _take_child()
    reply = child.call(payload)
    if reply is None:
        child.close()
        _give_back(None)  # the next request finds a child already importing
        code = child.proc.returncode
        if code == -signal.SIGALRM:
            return "error", f"{what}: timed out after {timeout_sec} s (the run was killed)"
        return "error", f"{what}: the run crashed (host process died: {describe_exit(code)})"
    if child.served >= _MAX_REQUESTS_PER_CHILD:
        child.close()
        _give_back(None)
    else:
        _give_back(child)
    return cloudpickle.loads(reply)


def _read_message(stream: Any) -> bytes | None:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    body = stream.read(size)
    return body if len(body) == size else None


# --------------------------------------------------------------------------- child side
def _watch_parent(parent: int) -> None:
    """Exit as soon as the worker that started us is gone (even mid-kernel)."""
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(3)


def _child_main(req_fd: int, res_fd: int) -> None:
    """The child's loop: read a request, run it, write the result; exit on EOF."""
    import cloudpickle

    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    requests = os.fdopen(req_fd, "rb")
    responses = os.fdopen(res_fd, "wb")
    while True:
        message = _read_message(requests)
        if message is None:
            return
        try:
            func, args = cloudpickle.loads(message)
            result = func(*args)
        except Exception as err:  # noqa: BLE001 - every failure is data for the caller
            result = ("error", f"{type(err).__name__}: {err}\n{traceback.format_exc()}")
        reply = cloudpickle.dumps(result)
        responses.write(_HEADER.pack(len(reply)) + reply)
        responses.flush()
