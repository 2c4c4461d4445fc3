"""LocalRunner: measure built artifacts in worker processes on this machine.

Isolation: every measurement runs in a worker process of a pool. A kernel that crashes
kills only its worker, one that runs past ``timeout_sec`` is killed, and either way the
candidate gets a ``RunnerResult`` with an error message while the pool replaces the
worker and the next candidate runs.

No overlap: the timed part of a measurement holds an exclusive lock on the user's lock
file (``fcntl.flock``; :func:`measurement_lock_path`), so measurements never overlap,
not even those of two tuners of the same user on the same machine. The file is the
user's own (``$XDG_RUNTIME_DIR``, else a 0700 folder in ``$TMPDIR`` named with the
uid; created 0600): another user can neither hold it to stall us nor plant a link in
its place. The kernel releases the lock when its holder dies, so a crashed or killed
measurement cannot leave it held; one that hangs holding it stalls the others for
``lock_timeout_sec`` at most, after which they fail with a message naming its pid.
Two workers let the next candidate load its library and allocate its arguments while
the current one is timed (the default arguments are generated once per worker and
workload, then copied); a candidate that fails before it is timed (e.g. its library
does not load) finishes without waiting.

OpenMP: each pool of workers measures under one wait policy chosen from the host's load
when it starts (``config.openmp_worker_env``: a brief spin on a quiet machine, passive
waiting on a busy one, the user's ``OMP_WAIT_POLICY``/``GOMP_SPINCOUNT`` if set); a pool
whose spinning workers see a busy machine is replaced before the next batch. Every
result records the policy and why (``omp_wait_policy``, ``omp_policy_basis``).

Timeouts: ``timeout_sec`` bounds loading, allocating and timing one candidate, not the
time spent waiting for the lock (``lock_timeout_sec``) or cooling down. It is enforced
inside the worker by ``SIGALRM`` left at its default action, which terminates the
process even in the middle of a C call that never returns to Python. The runner's own
wait for a worker's answer is bounded as well: ``max(30, 3 * timeout_sec)`` plus the
lock's and the cooldown's time, after which the worker is killed and the candidate
fails.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import stat
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..arg_info import ArgInfo
from ..registry import register
from ..runtime import Module, load_module
from ..runtime.aligned import aligned_copy
from ..runtime.timer import HostLoad
from ..tir.dtype import is_bool, is_float, numpy_dtype
from ..utils import (
    check_picklable,
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
from .base import PyRunner, RunnerFuture, RunnerInput, RunnerResult
from .config import (
    CONFIRM_QUIET_SECONDS,
    EvaluatorConfig,
    openmp_policy_outdated,
    openmp_policy_record,
    openmp_worker_env,
    sample_host_load,
)

__all__ = [
    "T_ALLOC_ARGUMENT",
    "T_CLEANUP",
    "T_RUN_EVALUATOR",
    "DEFAULT_LOCK_TIMEOUT_SEC",
    "LocalRunner",
    "LocalRunnerFuture",
    "MeasurementLockTimeout",
    "default_alloc_argument",
    "default_cleanup",
    "default_run_evaluator",
    "host_measurement_lock",
    "measurement_lock_holder",
    "measurement_lock_path",
]

T_ARG_INFO_JSON_OBJ_LIST = list[Any]
T_ARGUMENT_LIST = list[Any]
T_ALLOC_ARGUMENT = Callable[[str, T_ARG_INFO_JSON_OBJ_LIST, int], list[T_ARGUMENT_LIST]]
T_RUN_EVALUATOR = Callable[["Module", str, EvaluatorConfig, list[T_ARGUMENT_LIST]], list[float]]
T_CLEANUP = Callable[[], None]

# One worker times a candidate while the other prepares the next.
_NUM_WORKERS = 2
# Imported by each worker when it starts, so the first measurement does not pay for them.
_PRELOAD = ("metaschedule.runner.local_runner", "metaschedule.runtime")


# --------------------------------------------------------------------------- defaults
def default_alloc_argument(
    device: str, args_info: T_ARG_INFO_JSON_OBJ_LIST, alloc_repeat: int
) -> list[T_ARGUMENT_LIST]:
    """``alloc_repeat`` sets of numpy arrays for the arguments described by ``args_info``.

    Floats are uniform in [0, 1) (no denormals to slow a kernel down), booleans random,
    integers zero: an integer argument may be an index, and zero is in bounds. Every
    array starts on a 64-byte boundary, as TVM's runner allocates them (numpy's own arrays
    straddle cache lines with every vector: see :mod:`metaschedule.runtime.aligned`).
    ``device`` is the device type; arrays live on the host and the runtime moves them.
    """
    rng = np.random.default_rng(0)
    infos = [ArgInfo.from_json(a) for a in args_info]
    repeated = []
    for _ in range(alloc_repeat):
        args = []
        for info in infos:
            dtype = numpy_dtype(info.dtype)
            if is_float(info.dtype):
                value = rng.random(info.shape, dtype=np.float32).astype(dtype)
            elif is_bool(info.dtype):
                value = rng.integers(0, 2, info.shape).astype(dtype)
            else:
                value = np.zeros(info.shape, dtype=dtype)
            args.append(aligned_copy(value))
        repeated.append(args)
    return repeated


#: argument sets a worker keeps, pristine, by their description (see _default_arguments)
_ARGUMENT_CACHE_SIZE = 4
_argument_cache: dict[str, list[T_ARGUMENT_LIST]] = {}


def _default_arguments(
    device: str, args_info: T_ARG_INFO_JSON_OBJ_LIST, alloc_repeat: int
) -> list[T_ARGUMENT_LIST]:
    """:func:`default_alloc_argument`'s arrays, generated once per worker for each
    description and copied for every measurement: the candidates of a workload share
    their arguments, and generating them (tens of ms for a few MB) would otherwise run
    on one core while the other worker's kernel is timed on both. A copy, not the
    cached arrays themselves, so a kernel that writes where it should not cannot change
    the inputs of the next one; aligned as the originals."""
    key = json.dumps([device, args_info, alloc_repeat], sort_keys=True, default=str)
    pristine = _argument_cache.pop(key, None)
    if pristine is None:
        pristine = default_alloc_argument(device, args_info, alloc_repeat)
    _argument_cache[key] = pristine  # most recently used last
    while len(_argument_cache) > _ARGUMENT_CACHE_SIZE:
        del _argument_cache[next(iter(_argument_cache))]
    return [[aligned_copy(a) for a in args] for args in pristine]


def default_run_evaluator(
    rt_mod: Module,
    device: str,
    evaluator_config: EvaluatorConfig,
    repeated_args: list[T_ARGUMENT_LIST],
) -> list[float]:
    """Time the module's entry function on each argument set; all repeats, in seconds."""
    evaluator = rt_mod.time_evaluator(
        getattr(rt_mod, "entry_name", "main"),
        number=evaluator_config.number,
        repeat=evaluator_config.repeat,
        min_repeat_ms=evaluator_config.min_repeat_ms,
        enable_cpu_cache_flush=evaluator_config.enable_cpu_cache_flush,
        warmup=evaluator_config.warmup,
        num_probes=evaluator_config.num_probes,
        max_total_ms=evaluator_config.max_total_ms,
    )
    costs: list[float] = []
    for args in repeated_args:
        costs.extend(float(c) for c in evaluator(*args).results)
    return costs


def default_cleanup() -> None:
    """Nothing to clean up locally."""


def _default_load(path: str) -> Module:
    return load_module(path)


# --------------------------------------------------------------------------- host lock
#: seconds a measurement waits for the measurement lock by default
DEFAULT_LOCK_TIMEOUT_SEC = 600.0


class MeasurementLockTimeout(TimeoutError):
    """The measurement lock stayed held by another process past the timeout.

    ``holder`` is that process's id (None where it cannot be known)."""

    def __init__(self, path: str, timeout_sec: float, holder: int | None):
        self.path, self.timeout_sec, self.holder = path, timeout_sec, holder
        who = "a process this system does not name" if holder is None else f"process {holder}"
        command = _command_line(holder)
        super().__init__(
            f"waited {timeout_sec} s for the measurement lock {path}, held by {who}"
            f"{f' ({command})' if command else ''}; it is measuring or stuck while holding "
            "it: let it finish, stop it, or give a longer lock_timeout_sec"
        )


def _command_line(pid: int | None) -> str:
    if pid is None:
        return ""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return " ".join(f.read().replace(b"\0", b" ").decode(errors="replace").split())[:80]
    except OSError:
        return ""


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


def _own_runtime_dir() -> str | None:
    """``$XDG_RUNTIME_DIR`` when it is a folder of ours that nobody else may write."""
    folder = os.environ.get("XDG_RUNTIME_DIR")
    if not folder or not os.path.isabs(folder):
        return None
    try:
        st = os.stat(folder)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode) and st.st_uid == _uid() and not st.st_mode & 0o022:
        return folder
    return None


def measurement_lock_path() -> str:
    """The file whose exclusive lock every measurement of this user on this host holds:
    ``$XDG_RUNTIME_DIR/metaschedule-measure.lock`` when that folder is ours, else
    ``$TMPDIR/metaschedule-<uid>/measure.lock`` (default ``/tmp``)."""
    folder = _own_runtime_dir()
    if folder is not None:
        return os.path.join(folder, "metaschedule-measure.lock")
    return os.path.join(tempfile.gettempdir(), f"metaschedule-{_uid()}", "measure.lock")


def _private_folder(folder: str) -> None:
    """Create ``folder`` 0700, or check that the one there is ours and closed to others
    (in a shared ``/tmp`` another user may have made it first, or put a link there)."""
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != _uid() or st.st_mode & 0o022:
        raise PermissionError(
            f"the measurement lock's folder {folder} is not a folder of this user (uid "
            f"{_uid()}) closed to others (found uid {st.st_uid}, mode "
            f"{stat.filemode(st.st_mode)}); another user may have created it: remove it, "
            "or point TMPDIR or XDG_RUNTIME_DIR at a folder of yours"
        )


def _open_lock(path: str) -> int:
    """A read-write descriptor of the lock file (created 0600; never through a link)."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    return os.open(path, flags, 0o600)


class _LockWaiter:
    """A thread blocked in ``flock`` for a caller that waits a bounded time: it wakes the
    moment the lock is free (no polling); a caller that gave up leaves it the descriptor,
    which it closes (so releases the lock) as soon as it gets it."""

    def __init__(self, fd: int):
        import fcntl

        self.fd, self.error = fd, None
        self.finished, self.mutex, self.abandoned = threading.Event(), threading.Lock(), False

        def wait() -> None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError as err:
                self.error = err
            with self.mutex:
                if self.abandoned:
                    os.close(fd)
                else:
                    self.finished.set()

        threading.Thread(target=wait, name="ms-measure-lock", daemon=True).start()

    def wait(self, timeout_sec: float) -> bool:
        """Whether the lock was taken within ``timeout_sec`` (False: the descriptor is
        the thread's now)."""
        self.finished.wait(timeout_sec)
        with self.mutex:
            if not self.finished.is_set():
                self.abandoned = True
                return False
        if self.error is not None:
            raise self.error
        return True


def measurement_lock_holder(path: str | None = None) -> int | None:
    """The id of the process holding the host measurement lock, read from ``/proc/locks``
    (Linux); None when it is free, or where that cannot be known."""
    path = path or measurement_lock_path()
    try:
        st = os.stat(path)
        with open("/proc/locks") as f:
            table = f.read()
    except OSError:
        return None
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in table.splitlines():
        parts = line.split()  # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF"
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == device and parts[4].isdigit():
            return int(parts[4])
    return None


@contextmanager
def host_measurement_lock(
    path: str | None = None, timeout_sec: float | None = None
) -> Iterator[None]:
    """Hold the user's measurement lock (:func:`measurement_lock_path`) for the block.

    Args:
        path: another lock file (default: the user's).
        timeout_sec: the longest to wait for it (None: as long as it takes).

    Raises:
        MeasurementLockTimeout: another process held it for ``timeout_sec``.
        PermissionError: the lock's folder is not the user's own (the message says why).
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no host lock, one runner at a time
        yield
        return
    if path is None:
        path = measurement_lock_path()
        if _own_runtime_dir() is None:  # the folder in $TMPDIR is ours to make
            _private_folder(os.path.dirname(path))
    fd = _open_lock(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if timeout_sec is None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            elif not _LockWaiter(fd).wait(timeout_sec):
                fd = -1  # the waiter's now
                raise MeasurementLockTimeout(
                    path, timeout_sec, measurement_lock_holder(path)
                ) from None
        yield
    finally:
        if fd >= 0:
            os.close(fd)  # closing the only descriptor releases the lock


def _quiet_load_sample(
    seconds: float = 0.1, lock_timeout_sec: float | None = None
) -> dict[str, Any]:
    """The load of other processes, seen while no measurement runs (ours or another
    tuner's of this user); if the lock stays held past ``lock_timeout_sec``, the load
    seen with the holder running (it counts as others' load)."""
    try:
        with host_measurement_lock(timeout_sec=lock_timeout_sec):
            return sample_host_load(seconds)
    except MeasurementLockTimeout:
        return sample_host_load(seconds)


class _Deadline:
    """A budget of seconds enforced by SIGALRM at its default action (termination)."""

    def __init__(self, seconds: float | None):
        self.left = seconds

    def resume(self) -> None:
        if self.left is not None:
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.setitimer(signal.ITIMER_REAL, max(self.left, 1e-3))

    def pause(self) -> None:
        if self.left is not None:
            remaining, _ = signal.setitimer(signal.ITIMER_REAL, 0)
            self.left = remaining


def _worker_run(
    artifact_path: str,
    device_type: str,
    args_info: list,
    config: EvaluatorConfig,
    alloc_repeat: int,
    cooldown_sec: float,
    timeout_sec: float | None,
    f_alloc_argument: Any,
    f_run_evaluator: Any,
    f_cleanup: Any,
    lock_timeout_sec: float | None = DEFAULT_LOCK_TIMEOUT_SEC,
) -> tuple[str, Any]:
    """Runs in a worker: ("ok", (run_secs, info)) or ("error", message)."""
    # Let SIGTERM (closing the runner) kill at once, even inside a kernel that never
    # returns to Python to run a Python-level handler.
    previous_sigterm = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    deadline = _Deadline(timeout_sec)
    stage = "preparing the run"
    deadline.resume()
    try:
        omp_policy = openmp_policy_record()  # the runner's choice, before libgomp loads
        alloc = resolve_function(f_alloc_argument, default_alloc_argument, "f_alloc_argument")
        evaluate = resolve_function(f_run_evaluator, default_run_evaluator, "f_run_evaluator")
        cleanup = resolve_function(f_cleanup, default_cleanup, "f_cleanup")
        stage = f"loading the artifact {artifact_path}"
        rt_mod = _default_load(artifact_path)
        stage = "allocating the arguments"
        if alloc is default_alloc_argument:
            repeated_args = _default_arguments(device_type, args_info, alloc_repeat)
        else:
            repeated_args = alloc(device_type, args_info, alloc_repeat)
        deadline.pause()
        stage = "waiting for the measurement lock"
        with host_measurement_lock(timeout_sec=lock_timeout_sec):
            if cooldown_sec > 0:
                time.sleep(cooldown_sec)
            stage = "running the kernel"
            deadline.resume()
            load = HostLoad.now()
            try:
                costs = evaluate(rt_mod, device_type, config, repeated_args)
            finally:
                deadline.pause()
            info = {
                **config.protocol(),
                **omp_policy,
                **load.until(HostLoad.now()),
            }
        deadline.resume()
        stage = "cleaning up"
        cleanup()
        return "ok", ([float(c) for c in costs], info)
    except MeasurementLockTimeout as err:
        return "error", f"LocalRunner: not measured: {err}"
    except Exception as err:  # noqa: BLE001 - every failure is data for the tuner
        return "error", (
            f"LocalRunner: failed while {stage}: {type(err).__name__}: {err}\n"
            f"Traceback in the runner worker:\n{traceback.format_exc()}"
        )
    finally:
        deadline.pause()
        signal.signal(signal.SIGTERM, previous_sigterm)


# --------------------------------------------------------------------------- runner
class LocalRunnerFuture(RunnerFuture):
    """A measurement in flight in the local pool, or an already known result.

    Created either from a pool future (as :class:`LocalRunner` does) or, as in TVM, from
    ``res`` or ``error_message``.
    """

    def __init__(
        self,
        res: list[float] | None = None,
        error_message: str | None = None,
        *,
        future: Any = None,
        timeout_sec: float | None = None,
        pool: WorkerPool | None = None,
        on_info: Callable[[dict[str, Any]], None] | None = None,
    ):
        if future is None and (res is None) == (error_message is None):
            raise ValueError("give exactly one of res and error_message (or a pool future)")
        self._future = future
        self._pool = pool  # keeps the workers alive while the measurement is pending
        self._timeout_sec = timeout_sec
        self._on_info = on_info  # told the info of a successful measurement
        self._result = None if future is not None else RunnerResult(res, error_message)
        super().__init__(self.done, self.result)

    def done(self) -> bool:
        return self._result is not None or self._future.done()

    def result(self) -> RunnerResult:
        if self._result is None:
            self._result = self._convert()
            self._pool = None
        return self._result

    def _convert(self) -> RunnerResult:
        try:
            status, value = self._future.result()
        except WorkerDiedError as err:
            if err.exitcode == -signal.SIGALRM:
                msg = f"LocalRunner: timed out after {self._timeout_sec} s (the run was killed)"
            else:
                msg = (
                    f"LocalRunner: the kernel crashed (worker died: {describe_exit(err.exitcode)})"
                )
            return RunnerResult(None, msg)
        except WorkerTimeoutError as err:
            return RunnerResult(
                None,
                f"LocalRunner: the worker gave no result in time ({err}): it hung outside "
                "the timed part (loading, or waiting for the measurement lock)",
            )
        except (CancelledError, PoolClosedError):
            return RunnerResult(None, "LocalRunner: cancelled (the runner was closed)")
        except WorkerStartError as err:
            raise RuntimeError(f"LocalRunner: the runner workers cannot start: {err}") from None
        except Exception as err:  # noqa: BLE001 - e.g. an input that cannot be pickled
            return RunnerResult(None, f"LocalRunner: could not run: {type(err).__name__}: {err}")
        if status == "ok":
            run_secs, info = value
            if self._on_info is not None:
                self._on_info(info)
            return RunnerResult(run_secs, None, info)
        return RunnerResult(None, value)


@register("runner", "local")
@derived_object
class LocalRunner(PyRunner):
    """Measure artifacts on this machine; see the module docstring for the guarantees.

    Args:
        timeout_sec: seconds to load, allocate and time one candidate (None: no limit).
        evaluator_config: the timing loop's settings (default ``EvaluatorConfig()``).
        cooldown_sec: idle seconds on the host before each measurement.
        alloc_repeat: argument sets to allocate; each is timed.
        f_alloc_argument: function or dotted name (default :func:`default_alloc_argument`).
        f_run_evaluator: function or dotted name (default :func:`default_run_evaluator`).
        f_cleanup: function or dotted name, run in the worker after each measurement.
        initializer: run once in each worker when it starts (must be picklable).
        lock_timeout_sec: the longest a candidate waits for the measurement lock (None:
            no limit); past it, the candidate is an error result naming the process
            that holds the lock.

    ``device`` in the function signatures is the input's device type string. As for
    :class:`~metaschedule.builder.LocalBuilder`, the workers are fresh interpreters that
    never import the caller's main module (no ``__main__`` guard needed), and functions
    travel by cloudpickle or as dotted names. A worker that dies mid-measurement (a
    kernel that segfaults, ``kill -9``) fails only that candidate, with a message naming
    the signal, and is replaced. Futures keep the workers alive until they are done;
    :meth:`close` cancels pending measurements (their results say so). A future's
    ``result()`` raises RuntimeError when the workers cannot start at all (e.g. the
    initializer raises), at once rather than waiting.
    """

    def __init__(
        self,
        timeout_sec: float | None = 30,
        evaluator_config: EvaluatorConfig | None = None,
        cooldown_sec: float = 0.0,
        alloc_repeat: int = 1,
        f_alloc_argument: T_ALLOC_ARGUMENT | str | None = None,
        f_run_evaluator: T_RUN_EVALUATOR | str | None = None,
        f_cleanup: T_CLEANUP | str | None = None,
        initializer: Callable[[], None] | None = None,
        lock_timeout_sec: float | None = DEFAULT_LOCK_TIMEOUT_SEC,
    ):
        if timeout_sec is not None and timeout_sec <= 0:
            raise ValueError(f"timeout_sec must be positive or None, got {timeout_sec}")
        if lock_timeout_sec is not None and lock_timeout_sec <= 0:
            raise ValueError(f"lock_timeout_sec must be positive or None, got {lock_timeout_sec}")
        if cooldown_sec < 0:
            raise ValueError(f"cooldown_sec must be non-negative, got {cooldown_sec}")
        if alloc_repeat < 1:
            raise ValueError(f"alloc_repeat must be at least 1, got {alloc_repeat}")
        for name, f, default in (
            ("f_alloc_argument", f_alloc_argument, default_alloc_argument),
            ("f_run_evaluator", f_run_evaluator, default_run_evaluator),
            ("f_cleanup", f_cleanup, default_cleanup),
        ):
            resolve_function(f, default, name)  # fail early on a bad name
            check_picklable(f, name)
        if initializer is not None:
            check_picklable(initializer, "initializer")
        self.timeout_sec = timeout_sec
        self.evaluator_config = EvaluatorConfig._normalized(evaluator_config)
        self.cooldown_sec = float(cooldown_sec)
        self.alloc_repeat = int(alloc_repeat)
        self.f_alloc_argument = f_alloc_argument
        self.f_run_evaluator = f_run_evaluator
        self.f_cleanup = f_cleanup
        self.initializer = initializer
        self.lock_timeout_sec = lock_timeout_sec
        self._pool: WorkerPool | None = None
        self._policy_outdated = False  # a worker spins on a machine that became busy

    def _note_info(self, info: dict[str, Any]) -> None:
        basis = info.get("omp_policy_basis") or {}
        if openmp_policy_outdated(basis.get("decision"), info.get("others_cores")):
            self._policy_outdated = True

    def _new_pool(self) -> WorkerPool:
        """Workers whose OpenMP wait policy follows the load seen now (see
        :func:`.config.openmp_worker_env`; libgomp reads it once per process)."""
        sample = functools.partial(_quiet_load_sample, lock_timeout_sec=self.lock_timeout_sec)
        env = openmp_worker_env(sample, functools.partial(sample, CONFIRM_QUIET_SECONDS))
        return WorkerPool(_NUM_WORKERS, self.initializer, preload=_PRELOAD, env=env)

    def run(self, runner_inputs: list[RunnerInput]) -> list[RunnerFuture]:
        if self._pool is None:
            self._pool = self._new_pool()
        elif self._pool.broken is not None:  # try anew: the cause may have been fixed
            self._pool.close()
            self._pool = self._new_pool()
        elif self._policy_outdated:
            # workers spinning on a machine that became busy: fresh ones choose again;
            # the old pool lives on until its pending measurements are done
            self._pool = self._new_pool()
        self._policy_outdated = False
        futures: list[RunnerFuture] = []
        for inp in runner_inputs:
            args = (
                inp.artifact_path,
                inp.device_type,
                [a.as_json() for a in inp.args_info],
                self.evaluator_config,
                self.alloc_repeat,
                self.cooldown_sec,
                self.timeout_sec,
                self.f_alloc_argument,
                self.f_run_evaluator,
                self.f_cleanup,
                self.lock_timeout_sec,
            )
            future = self._pool.schedule(_worker_run, args, timeout=self._task_bound())
            futures.append(
                LocalRunnerFuture(
                    future=future,
                    timeout_sec=self.timeout_sec,
                    pool=self._pool,
                    on_info=self._note_info,
                )
            )
        return futures

    def _task_bound(self) -> float | None:
        """The longest the pool waits for one candidate's answer once a worker took it:
        ``max(30, 3 * timeout_sec)``, plus the lock's wait and the cooldown."""
        if self.timeout_sec is None or self.lock_timeout_sec is None:
            return None
        return max(30.0, 3.0 * self.timeout_sec) + self.lock_timeout_sec + self.cooldown_sec

    def close(self) -> None:
        """Stop the worker processes; measurements still pending become errors."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
