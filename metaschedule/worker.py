"""A supervised pool of worker processes, each a fresh ``python -P -m metaschedule._worker_main``.

Why a fresh interpreter: ``multiprocessing``'s spawn and forkserver children import the
user's main module, so a script, ``python -c`` or a notebook that builds or measures at
top level (without ``if __name__ == "__main__":``) breaks them. Our workers run
:func:`main` as their main program and never see the user's; what they must run arrives as a
message: the function and its arguments pickled with ``cloudpickle``, which ships
importable functions by reference and the user's own (``__main__``, lambdas, closures)
by value.

The protocol, over the child's stdin and stdout (the child moves its own ``print``
output and any C-level writes to stderr, so they cannot corrupt a message): every
message is an 8-byte length and a pickled tuple.

- parent -> child ``("init", sys_path, preload, pickled_initializer)``; the child
  extends its ``sys.path`` with the parent's (so functions shipped by reference import
  as they do in the parent), imports the ``preload`` modules, runs the initializer,
  and answers ``("ready",)`` or
  ``("init_error", text)`` and exits;
- parent -> child ``("call", payload)``; the child acknowledges ``("taken",)`` (a
  worker that dies before that did not start the task, which goes to a new worker),
  then answers ``("ok", value)`` or
  ``("error", exception, traceback_text)``; EOF on stdin ends the child.

Supervision: one thread per worker slot takes tasks from a shared queue, and every
wait it makes has a deadline or notices the worker's death at once (EOF on its pipe).
A worker that dies (segfault, ``kill -9``, out of memory) fails the task it held with
:class:`WorkerDiedError` naming the signal and is replaced for the next task; a task
past its timeout kills its worker (with everything the worker started: each worker
leads its own process group) and fails with :class:`WorkerTimeoutError`. A worker that
cannot start (the initializer raises, the interpreter exits; or, three times in a
row, it is killed while starting or gives no ``ready`` within ``start_timeout``)
breaks the pool: every task fails at once with
:class:`WorkerStartError` saying why, instead of waiting for a worker that never comes.
Workers are killed on :meth:`WorkerPool.close`, when the pool is garbage collected, at
interpreter exit, and (Linux) when the thread that started them dies with its process.

Isolation: workers start as ``python -P`` (:func:`isolated_python`), so the current
folder is not first on their ``sys.path``: a ``numpy/`` or ``cloudpickle.py`` lying in
the folder a tuner was started from is never imported in place of the installed one.
The parent's ``sys.path`` (which holds that folder for ``python -c``, ``-m`` or a
notebook) is appended *after* the worker's own, so the user's modules that functions
shipped by reference need still import, but nothing there shadows an installed module.
"""

from __future__ import annotations

import functools
import os
import pickle
import queue
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from .utils import describe_exit

__all__ = [
    "PoolClosedError",
    "WorkerDiedError",
    "WorkerPool",
    "WorkerStartError",
    "WorkerTimeoutError",
    "isolated_python",
]

_HEADER = struct.Struct("<Q")
_POLL_SEC = 0.05
_PARENT_ENV = "METASCHEDULE_WORKER_PARENT"
#: attempts in a row to start a worker killed while starting, before the pool is broken
MAX_START_ATTEMPTS = 3


class WorkerStartError(RuntimeError):
    """The pool's worker processes cannot start (the message says why).

    ``retry``: whether the cause may be transient (killed by a signal, slow to start).
    """

    def __init__(self, message: str, retry: bool = False):
        super().__init__(message)
        self.retry = retry


class WorkerDiedError(RuntimeError):
    """The worker running the task died; ``exitcode`` is negative for a signal."""

    def __init__(self, exitcode: int | None):
        self.exitcode = exitcode
        super().__init__(f"worker died: {describe_exit(exitcode)}")


class WorkerTimeoutError(TimeoutError):
    """The task ran past its timeout; its worker was killed."""


class PoolClosedError(RuntimeError):
    """The pool was closed while the task was pending or running."""


def _dumps(obj: Any) -> bytes:
    import cloudpickle  # type: ignore[import-untyped]

    return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


# --------------------------------------------------------------------------- pipes
class _EOF(Exception):
    """The other end closed the pipe (the worker died or exited)."""


class _Deadline(Exception):
    """The deadline passed before the message was complete."""


class _Stopped(Exception):
    """The pool closed while waiting."""


def _wait_fd(fd: int, write: bool, deadline: float | None, stop: threading.Event) -> None:
    while True:
        if stop.is_set():
            raise _Stopped
        wait = _POLL_SEC if deadline is None else min(_POLL_SEC, deadline - time.monotonic())
        if wait <= 0:
            raise _Deadline
        try:
            r, w, _ = select.select([] if write else [fd], [fd] if write else [], [], wait)
        except (OSError, ValueError):  # the descriptor was closed
            raise _EOF from None
        if r or w:
            return


def _send(fd: int, obj: bytes, deadline: float | None, stop: threading.Event) -> None:
    data = memoryview(_HEADER.pack(len(obj)) + obj)
    while data:
        _wait_fd(fd, True, deadline, stop)
        try:
            n = os.write(fd, data)
        except BlockingIOError:
            continue
        except OSError:  # EPIPE: the worker is gone
            raise _EOF from None
        data = data[n:]


def _recv_exact(fd: int, n: int, deadline: float | None, stop: threading.Event) -> bytes:
    chunks, left = [], n
    while left:
        _wait_fd(fd, False, deadline, stop)
        try:
            chunk = os.read(fd, min(left, 1 << 20))
        except BlockingIOError:
            continue
        except OSError:
            raise _EOF from None
        if not chunk:
            raise _EOF
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _recv(fd: int, deadline: float | None, stop: threading.Event) -> Any:
    (size,) = _HEADER.unpack(_recv_exact(fd, _HEADER.size, deadline, stop))
    return pickle.loads(_recv_exact(fd, size, deadline, stop))


# --------------------------------------------------------------------------- parent side
def isolated_python(
    module: str | None = None, code: str | None = None, *, safe_path: bool | None = None
) -> list[str]:
    """The command line of a fresh interpreter running ``module`` (as ``-m``) or ``code``
    (as ``-c``) whose ``sys.path`` does not start with the current folder.

    Python 3.11+ (``safe_path``): ``-P``. Before, ``-I`` would also drop ``PYTHONPATH``
    (which may be how metaschedule is found), so ``-c`` code first deletes the current
    folder that ``-c`` put at ``sys.path[0]`` (``site`` ran before it was added, so
    nothing was imported from there yet), and then runs ``module`` with :mod:`runpy`.
    """
    if (module is None) == (code is None):
        raise ValueError("give exactly one of module and code")
    if safe_path is None:
        safe_path = sys.version_info >= (3, 11)
    if safe_path:
        return [sys.executable, "-P", *(("-m", module) if module else ("-c", code))]
    if module is not None:
        code = f"import runpy; runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    return [sys.executable, "-c", f"import sys; del sys.path[0]; {code}"]


class _Worker:
    """One child process and the parent's ends of its pipes."""

    def __init__(self, env: dict[str, str]):
        self.proc = subprocess.Popen(
            isolated_python("metaschedule._worker_main"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group: Ctrl-C is the parent's to handle
            close_fds=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.ready = False
        self.wfd = self.proc.stdin.fileno()
        self.rfd = self.proc.stdout.fileno()
        os.set_blocking(self.wfd, False)

    def send_kill(self) -> None:
        """SIGKILL the worker and its process group (its compilers); safe from any thread."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.kill()
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """Kill, reap and close the pipes; only by the thread that owns the worker."""
        self.send_kill()
        self.exitcode()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass

    def exitcode(self) -> int | None:
        try:
            return self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - unkillable (D state)
            return None


class _Task:
    __slots__ = ("args", "function", "future", "timeout")

    def __init__(self, function: Callable, args: tuple, timeout: float | None, future: Future):
        self.function, self.args, self.timeout, self.future = function, args, timeout, future


class _PoolState:
    """What the slot threads share; the :class:`WorkerPool` object only points here, so
    that dropping the last reference to the pool can stop it."""

    def __init__(self, initializer, preload, start_timeout, env):
        self.tasks: queue.Queue[_Task] = queue.Queue()
        self.stop = threading.Event()
        self.broken: WorkerStartError | None = None
        self.lock = threading.Lock()
        self.workers: set[_Worker] = set()
        self.start_timeout = start_timeout
        self.env = env
        # The initializer is pickled apart: the child unpickles it once sys.path is set.
        self.init_message = _dumps(("init", list(sys.path), list(preload), _dumps(initializer)))

    def fail_queued(self, make_error: Callable[[], BaseException] | None) -> None:
        while True:
            try:
                task = self.tasks.get_nowait()
            except queue.Empty:
                return
            if make_error is None:
                task.future.cancel()
            elif task.future.set_running_or_notify_cancel():
                task.future.set_exception(make_error())

    def start_worker(self) -> _Worker:
        """A new worker, initialized and ready; WorkerStartError otherwise."""
        try:
            worker = _Worker(self.env)
        except OSError as err:
            raise WorkerStartError(
                f"cannot start a worker process ({sys.executable}): {err}"
            ) from err
        with self.lock:
            self.workers.add(worker)
        deadline = time.monotonic() + self.start_timeout
        try:
            _send(worker.wfd, self.init_message, deadline, self.stop)
            reply = _recv(worker.rfd, deadline, self.stop)
        except _Deadline:
            self.discard(worker)
            raise WorkerStartError(
                f"a worker process did not become ready within {self.start_timeout} s "
                "(its initializer may hang)",
                retry=True,
            ) from None
        except _EOF:
            self.discard(worker)
            code = worker.exitcode()
            raise WorkerStartError(
                f"a worker process exited while starting ({describe_exit(code)}); "
                "its error output is above",
                retry=code is None or code < 0,  # killed from outside: try again
            ) from None
        except BaseException:
            self.discard(worker)
            raise
        if reply[0] != "ready":
            self.discard(worker)
            text = str(reply[1]).rstrip()
            raise WorkerStartError(
                f"a worker process failed to start: "
                f"{text.splitlines()[-1] if text else '?'}\n{text}",
                retry=False,
            )
        worker.ready = True
        return worker

    def discard(self, worker: _Worker) -> None:
        worker.kill()
        with self.lock:
            self.workers.discard(worker)

    def run_slot(self) -> None:
        """The body of one slot thread: keep a worker, feed it tasks."""
        worker: _Worker | None = None
        failed_starts = 0
        try:
            while not self.stop.is_set():
                if worker is None and self.broken is None:
                    try:
                        worker = self.start_worker()
                        failed_starts = 0
                    except _Stopped:
                        return
                    except WorkerStartError as err:
                        failed_starts += 1
                        if err.retry and failed_starts < MAX_START_ATTEMPTS:
                            continue
                        self.broken = err
                        message = str(err)
                        self.fail_queued(functools.partial(WorkerStartError, message))
                        continue
                try:
                    task = self.tasks.get(timeout=_POLL_SEC)
                except queue.Empty:
                    continue
                if not task.future.set_running_or_notify_cancel():
                    continue
                if self.broken is not None or worker is None:
                    task.future.set_exception(WorkerStartError(str(self.broken)))
                    continue
                if worker.proc.poll() is not None:
                    self.discard(worker)  # died while idle: the task goes to a new one
                    worker = self.restart_for(task)
                    if worker is None:
                        continue
                try:
                    worker = self.run_task(worker, task)
                except BaseException as err:  # noqa: BLE001 - never leave a future pending
                    if not task.future.done():
                        task.future.set_exception(err)
                    if worker is not None:
                        self.discard(worker)
                    worker = None
        finally:
            if worker is not None:
                self.discard(worker)

    def restart_for(self, task: _Task) -> _Worker | None:
        """A fresh worker for ``task``; None when none starts (the pool is then broken)
        or the pool closed (``task`` then fails with PoolClosedError)."""
        error: WorkerStartError | None = None
        for _ in range(MAX_START_ATTEMPTS):
            try:
                return self.start_worker()
            except _Stopped:
                task.future.set_exception(PoolClosedError("the pool was closed"))
                return None
            except WorkerStartError as err:
                error = err
                if not err.retry:
                    break
        self.broken = error
        message = str(error)
        self.fail_queued(functools.partial(WorkerStartError, message))
        task.future.set_exception(WorkerStartError(message))
        return None

    def run_task(self, worker: _Worker, task: _Task) -> _Worker | None:
        """Run ``task`` on ``worker``; the worker, or None when it had to go."""
        try:
            payload = _dumps((task.function, task.args))
        except Exception as err:  # noqa: BLE001 - e.g. an argument that cannot be pickled
            task.future.set_exception(err)
            return worker
        deadline = None if task.timeout is None else time.monotonic() + task.timeout
        message = _dumps(("call", payload))
        try:
            for attempt in range(MAX_START_ATTEMPTS):
                try:  # the worker acknowledges the task before running it
                    _send(worker.wfd, message, deadline, self.stop)
                    _recv(worker.rfd, deadline, self.stop)
                    break
                except _EOF:  # it died before taking the task: give it to a new worker
                    if attempt == MAX_START_ATTEMPTS - 1:
                        raise
                    self.discard(worker)
                    new_worker = self.restart_for(task)
                    if new_worker is None:
                        return None
                    worker = new_worker
            reply = _recv(worker.rfd, deadline, self.stop)
        except _Deadline:
            self.discard(worker)
            task.future.set_exception(
                WorkerTimeoutError(f"timed out after {task.timeout} s (worker killed)")
            )
            return None
        except _Stopped:
            task.future.set_exception(PoolClosedError("the pool was closed"))
            self.discard(worker)
            return None
        except _EOF:
            code = worker.exitcode()
            self.discard(worker)
            if self.stop.is_set():
                task.future.set_exception(PoolClosedError("the pool was closed"))
            else:
                task.future.set_exception(WorkerDiedError(code))
            return None
        if reply[0] == "ok":
            task.future.set_result(reply[1])
        elif reply[0] == "error" and len(reply) == 3 and isinstance(reply[1], BaseException):
            task.future.set_exception(reply[1])
        else:
            task.future.set_exception(RuntimeError(f"unexpected reply from a worker: {reply!r}"))
        return worker

    def shutdown(self) -> None:
        self.stop.set()
        self.fail_queued(None)
        with self.lock:
            workers = list(self.workers)
        for worker in workers:  # slot threads waiting on them see EOF at once, and close
            worker.send_kill()


def _shutdown(state: _PoolState, threads: list[threading.Thread]) -> None:
    state.shutdown()
    for thread in threads:
        if thread is not threading.current_thread():
            thread.join(timeout=2)


class WorkerPool:
    """A pool of ``max_workers`` supervised worker processes (see the module docstring).

    Args:
        max_workers: worker processes, started at once in the background.
        initializer: run once in each worker when it starts.
        preload: modules each worker imports when it starts.
        start_timeout: seconds a worker may take to start (initializer included).
        env: extra environment variables of the workers.
    """

    def __init__(
        self,
        max_workers: int,
        initializer: Callable[[], Any] | None = None,
        *,
        preload: Sequence[str] = (),
        start_timeout: float = 60.0,
        env: dict[str, str] | None = None,
    ):
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        child_env = dict(os.environ)
        child_env.update(env or {})
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        child_env[_PARENT_ENV] = str(os.getpid())
        child_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (package_root, child_env.get("PYTHONPATH", "")) if p
        )
        self.max_workers = max_workers
        self._state = _PoolState(initializer, preload, start_timeout, child_env)
        self._threads = [
            threading.Thread(target=self._state.run_slot, name=f"ms-worker-{i}", daemon=True)
            for i in range(max_workers)
        ]
        for thread in self._threads:
            thread.start()
        self._finalizer = weakref.finalize(self, _shutdown, self._state, self._threads)

    @property
    def broken(self) -> WorkerStartError | None:
        """Why the workers could not start, or None."""
        return self._state.broken

    def schedule(
        self, function: Callable, args: tuple = (), timeout: float | None = None
    ) -> Future:
        """Run ``function(*args)`` in a worker; a ``concurrent.futures.Future``.

        The future fails with WorkerTimeoutError, WorkerDiedError, WorkerStartError or
        PoolClosedError, or with the exception the function raised.
        """
        future: Future = Future()
        if self._state.stop.is_set():
            future.set_exception(PoolClosedError("the pool is closed"))
        elif self._state.broken is not None:
            future.set_exception(WorkerStartError(str(self._state.broken)))
        else:
            self._state.tasks.put(_Task(function, args, timeout, future))
        return future

    def worker_pids(self) -> list[int]:
        """The process ids of the live, started workers (for tests and diagnostics)."""
        with self._state.lock:
            return [w.proc.pid for w in self._state.workers if w.ready and w.proc.poll() is None]

    def close(self) -> None:
        """Stop now: workers are killed; pending and running tasks fail (cancelled or
        PoolClosedError)."""
        self._finalizer()


# --------------------------------------------------------------------------- child side
def _set_parent_death_signal() -> None:
    """Linux: die with the parent, even when it is killed with SIGKILL."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover
        pass


def _child_send(out, obj: Any) -> None:
    try:
        data = _dumps(obj)
    except Exception as err:  # noqa: BLE001 - a result or exception that cannot be pickled
        data = _dumps(
            ("error", RuntimeError(f"cannot send the result back: {err!r}"), traceback.format_exc())
        )
    out.write(_HEADER.pack(len(data)) + data)
    out.flush()


def _child_recv(inp) -> Any:
    header = inp.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    data = inp.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)


def main() -> None:
    """The worker's main program: serve calls until stdin closes."""
    inp = os.fdopen(os.dup(0), "rb")
    out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)  # print() and C printf go to stderr, never into a message
    _set_parent_death_signal()
    parent = os.environ.get(_PARENT_ENV)
    if parent and os.getppid() != int(parent):  # the parent died before the line above
        return
    hello = _child_recv(inp)
    if hello is None:
        return
    _, sys_path, preload, initializer_bytes = hello
    sys.path[:] = list(dict.fromkeys([*sys.path, *sys_path]))
    try:
        import importlib

        for name in preload:
            importlib.import_module(name)
        initializer = pickle.loads(initializer_bytes)
        if initializer is not None:
            initializer()
    except BaseException:  # noqa: BLE001 - report, then exit
        _child_send(out, ("init_error", traceback.format_exc()))
        sys.exit(1)
    _child_send(out, ("ready",))
    while True:
        msg = _child_recv(inp)
        if msg is None:
            return
        _child_send(out, ("taken",))
        try:
            function, args = pickle.loads(msg[1])
            value = function(*args)
        except Exception as err:  # noqa: BLE001 - the parent's future carries it
            tb = traceback.format_exc()
            try:
                _dumps(err)
            except Exception:  # noqa: BLE001
                err = RuntimeError(f"{type(err).__name__}: {err}")
            _child_send(out, ("error", err, tb))
        else:
            _child_send(out, ("ok", value))
