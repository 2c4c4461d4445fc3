"""What runs on a fleet host: sessions, and an isolated child process per worker thread.

A Dask worker never runs a kernel (or a build) in its own process: a kernel that
crashes would kill the worker, and one that hangs cannot be stopped from a thread.
Instead a worker keeps long-lived child Python processes (:func:`call_isolated`), one
per request in flight, fed requests over pipes. A request that crashes or times out
(SIGALRM at its default action, as in the local runner) kills only its child: the caller
gets an error and a replacement starts at once, importing while the worker does other
work (a child takes about as long to start as ``import metaschedule``);
:func:`prestart` warms one up when a runner connects. A child whose worker dies exits on
its own (it watches its parent). The worker's wait for a reply is bounded too
(``wait_sec`` of :func:`call_isolated`): a child that neither answers nor dies in time is
killed, so no host thread stays stuck.

A child starts isolated, ``python -P``: the folder the worker was started in is not on
its ``sys.path``, so a ``numpy/`` or ``cloudpickle.py`` lying there is never imported;
metaschedule itself is found as installed (or through ``PYTHONPATH``, which names the
package's folder).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import struct
import subprocess
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

from ..runtime import load_module
from ..utils import describe_exit
from ..worker import isolated_python

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

    def __init__(
        self,
        key: str,
        worker: str | None = None,
        client: Client | None = None,
        timeout_sec: float = 30.0,
    ):
        self.key = key
        self.worker = worker
        self.client = client
        self.timeout_sec = timeout_sec  # run()'s default bound

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
        """Call ``func(*args)`` on the session's worker, holding its device resource.

        Waits at most ``timeout`` seconds (None: ``timeout_sec``, which
        :meth:`RPCConfig.connect_server` sets to ``max(30, 3 * session_timeout_sec)``).

        Raises:
            TimeoutError: no result in time (the task is cancelled).
        """
        if self.client is None:
            return func(*args)
        wait = self.timeout_sec if timeout is None else timeout
        future = self.client.submit(
            func, *args, workers=[self.worker], resources={self.key: 1}, pure=False
        )
        try:
            return future.result(timeout=wait)
        except TimeoutError:
            if future.done():  # the function's own TimeoutError
                raise
            future.cancel()
            raise TimeoutError(
                f"RPCSession.run: {getattr(func, '__name__', func)!r} gave no result on "
                f"{self.worker} within {wait} s (cancelled); the worker may be busy or stuck, "
                "or pass a longer timeout"
            ) from None

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
        # -P: the worker's current folder is not importable in the child (see the module
        # docstring); PYTHONPATH names the package's folder for an uninstalled checkout
        env = dict(os.environ)
        if os.path.basename(_PACKAGE_ROOT) not in ("site-packages", "dist-packages"):
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p
            )
        self.proc = subprocess.Popen(
            isolated_python(code=code),
            pass_fds=(req_r, res_w),
            stdin=subprocess.DEVNULL,
            env=env,
        )
        os.close(req_r)
        os.close(res_w)
        self.requests = os.fdopen(req_w, "wb")
        self.responses = os.fdopen(res_r, "rb")
        self.served = 0
        self.timed_out = False  # killed by the parent: no response within wait_sec

    def call(self, payload: bytes, wait_sec: float | None = None) -> bytes | None:
        """Send a request; its response, or None if the child died first or gave no
        response within ``wait_sec`` (it is then killed: see :attr:`timed_out`)."""
        try:
            self.requests.write(_HEADER.pack(len(payload)) + payload)
            self.requests.flush()
        except (BrokenPipeError, OSError):
            return None
        self.served += 1
        if wait_sec is not None:
            ready, _, _ = select.select([self.responses], [], [], wait_sec)
            if not ready:
                self.timed_out = True
                self.proc.kill()
                return None
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


_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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


def call_isolated(
    func: Any,
    args: tuple,
    what: str,
    timeout_sec: float | None = None,
    wait_sec: float | None = None,
) -> Any:
    """Run ``func(*args)`` in this thread's child process; ``("ok", value)`` or
    ``("error", message)``.

    ``func`` must return a picklable value and may enforce its own deadline with
    SIGALRM (the local runner's ``_Deadline``); ``timeout_sec`` only words the message
    when the child is killed by that alarm. ``wait_sec`` bounds the wait for the reply
    (None: no bound): a child that gives none in time is killed and the call is an
    error. ``what`` names the caller in messages.
    """
    import cloudpickle

    payload = cloudpickle.dumps((func, args))
    child = _take_child()
    reply = child.call(payload, wait_sec)
    if reply is None:
        child.close()
        _give_back(None)  # the next request finds a child already importing
        code = child.proc.returncode
        if child.timed_out:
            return "error", (
                f"{what}: no reply from the host's child process within {wait_sec} s "
                "(it was killed; it may have waited for the measurement lock, or hung "
                "outside the timed part)"
            )
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
