"""RPCRunner: measure on a fleet of hosts through dask.distributed (TVM's RPCRunner).

Each candidate becomes one Dask task that needs one unit of the resource
``rpc_config.tracker_key``; measuring hosts run a worker that has one unit, so a host
measures one candidate at a time while all hosts measure in parallel. The artifact
travels inside the task as bytes (no shared disk): the worker writes it to a temporary
file, and the seed's hooks run in an isolated child process on the host
(:func:`~metaschedule.runner.rpc_host.call_isolated`): ``f_create_session`` →
``f_upload_module`` → ``f_alloc_argument`` → ``f_run_evaluator`` (under the host-wide
measurement lock of the local runner) → ``f_cleanup``.

Failures are results: a kernel that crashes, or runs past ``session_timeout_sec``
(loading, allocating and timing; waiting for the host is not counted), kills only the
child process. A worker that dies in the middle of a measurement (seen through the
scheduler's ``remove-worker`` event and the task's own start event) fails that candidate
only; the others stay queued and run when the worker is back or on other hosts. When no
worker offers the key for ``max(30, 3 * session_timeout_sec)`` seconds, pending
candidates fail instead of waiting forever.

Deadlines: once a measurement started on a host, ``B = max(30, 3 * session_timeout_sec)``
seconds (plus ``cooldown_sec``) bound every wait for it. On the host, the child waits
for the measurement lock at most ``B - session_timeout_sec - 5`` s (the 5 for a child
that has to start) and the worker waits for the child's reply at most ``B``, then kills
it; the tuner waits for the task's result at most ``B + 10`` s after its start event
(the 10 for the way back), then fails the candidate. Each is an error result.

Trust: the task carries the config without ``security``; the certificates stay here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..registry import register
from ..utils import derived_object, resolve_function
from .base import PyRunner, RunnerFuture, RunnerInput, RunnerResult
from .config import EvaluatorConfig
from .local_runner import MeasurementLockTimeout, _Deadline, host_measurement_lock
from .local_runner import default_alloc_argument as local_alloc
from .local_runner import default_run_evaluator as local_run
from .rpc_config import RPCConfig, _connect, workers_with_key
from .rpc_host import RPCSession, call_isolated, prestart

if TYPE_CHECKING:
    from ..runtime import Module

__all__ = [
    "T_ALLOC_ARGUMENT",
    "T_CLEANUP",
    "T_CREATE_SESSION",
    "T_RUN_EVALUATOR",
    "T_UPLOAD_MODULE",
    "RPCRunner",
    "RPCRunnerFuture",
    "default_alloc_argument",
    "default_cleanup",
    "default_create_session",
    "default_run_evaluator",
    "default_upload_module",
]

T_ARG_INFO_JSON_OBJ_LIST = list[Any]
T_ARGUMENT_LIST = list[Any]
T_CREATE_SESSION = Callable[[RPCConfig], RPCSession]
T_UPLOAD_MODULE = Callable[[RPCSession, str, str], "Module"]
T_ALLOC_ARGUMENT = Callable[[RPCSession, str, T_ARG_INFO_JSON_OBJ_LIST, int], list[T_ARGUMENT_LIST]]
T_RUN_EVALUATOR = Callable[
    [RPCSession, "Module", str, EvaluatorConfig, list[T_ARGUMENT_LIST]], list[float]
]
T_CLEANUP = Callable[["RPCSession | None", "str | None"], None]

_TOPIC = "metaschedule-rpc-start"
#: seconds the tuner allows past the host's own bound, for the result's way back
_TRANSPORT_SLACK_SEC = 10.0
#: seconds of the bound kept for a host's child process to start (import metaschedule)
_CHILD_START_SEC = 5.0


# --------------------------------------------------------------------------- default hooks
def default_create_session(rpc_config: RPCConfig) -> RPCSession:
    """The session of the host this runs on (inside a measurement)."""
    return RPCSession(str(rpc_config.tracker_key), worker=os.environ.get("_MS_RPC_WORKER"))


def default_upload_module(session: RPCSession, local_path: str, remote_path: str) -> Module:
    """Put the artifact (written on the host from the task's bytes) at ``remote_path``
    and load it."""
    session.upload(local_path, remote_path)
    return session.load_module(remote_path)


def default_alloc_argument(
    session: RPCSession, device: str, args_info: T_ARG_INFO_JSON_OBJ_LIST, alloc_repeat: int
) -> list[T_ARGUMENT_LIST]:
    """As the local runner's: ``alloc_repeat`` sets of random numpy arguments."""
    return local_alloc(device, args_info, alloc_repeat)


def default_run_evaluator(
    session: RPCSession,
    rt_mod: Module,
    device: str,
    evaluator_config: EvaluatorConfig,
    repeated_args: list[T_ARGUMENT_LIST],
) -> list[float]:
    """As the local runner's: time the entry function on each argument set."""
    return local_run(rt_mod, device, evaluator_config, repeated_args)


def default_cleanup(session: RPCSession | None, remote_path: str | None) -> None:
    """Delete the uploaded artifact."""
    if session is not None and remote_path is not None:
        session.remove(remote_path)


# --------------------------------------------------------------------------- host side
_initialized: set[bytes] = set()  # initializers already run in this child process


def _measure_in_child(
    worker_address: str,
    local_path: str,
    device_type: str,
    args_info: list,
    rpc_config: RPCConfig,
    evaluator_config: EvaluatorConfig,
    alloc_repeat: int,
    cooldown_sec: float,
    hooks: tuple,
    initializer: bytes | None,
) -> tuple[str, Any]:
    """Runs in the host's child process: ("ok", run_secs) or ("error", message)."""
    import traceback

    import cloudpickle

    f_create, f_upload, f_alloc, f_run, f_cleanup = hooks
    os.environ["_MS_RPC_WORKER"] = worker_address  # for default_create_session
    deadline = _Deadline(float(rpc_config.session_timeout_sec))
    stage = "preparing the run"
    session = remote_path = None
    deadline.resume()
    try:
        if initializer is not None and initializer not in _initialized:
            stage = "running the initializer"
            cloudpickle.loads(initializer)()
            _initialized.add(initializer)
        create = resolve_function(f_create, default_create_session, "f_create_session")
        upload = resolve_function(f_upload, default_upload_module, "f_upload_module")
        alloc = resolve_function(f_alloc, default_alloc_argument, "f_alloc_argument")
        evaluate = resolve_function(f_run, default_run_evaluator, "f_run_evaluator")
        cleanup = resolve_function(f_cleanup, default_cleanup, "f_cleanup")
        stage = "creating the session"
        session = create(rpc_config)
        remote_path = os.path.join(
            tempfile.gettempdir(),
            f"metaschedule-rpc-{uuid.uuid4().hex}-{os.path.basename(local_path)}",
        )
        stage = "uploading the module"
        rt_mod = upload(session, local_path, remote_path)
        stage = "allocating the arguments"
        repeated_args = alloc(session, device_type, args_info, alloc_repeat)
        deadline.pause()
        stage = "waiting for the measurement lock"
        lock_wait = max(
            1.0, rpc_config.wait_bound_sec - rpc_config.session_timeout_sec - _CHILD_START_SEC
        )
        with host_measurement_lock(timeout_sec=lock_wait):
            if cooldown_sec > 0:
                time.sleep(cooldown_sec)
            stage = "running the kernel"
            deadline.resume()
            try:
                costs = evaluate(session, rt_mod, device_type, evaluator_config, repeated_args)
            finally:
                deadline.pause()
        deadline.resume()
        stage = "cleaning up"
        cleanup(session, remote_path)
        return "ok", [float(c) for c in costs]
    except MeasurementLockTimeout as err:
        with contextlib.suppress(Exception):
            resolve_function(f_cleanup, default_cleanup, "f_cleanup")(session, remote_path)
        return "error", f"RPCRunner: not measured on {worker_address}: {err}"
    except Exception as err:  # noqa: BLE001 - every failure is data for the tuner
        if stage != "cleaning up" and remote_path is not None:
            with contextlib.suppress(Exception):  # the first error is the one to report
                resolve_function(f_cleanup, default_cleanup, "f_cleanup")(session, remote_path)
        return "error", (
            f"RPCRunner: failed while {stage}: {type(err).__name__}: {err}\n"
            f"Traceback on the measuring host:\n{traceback.format_exc()}"
        )
    finally:
        deadline.pause()


def _measure_task(data: bytes, name: str, *args: Any) -> tuple[str, Any]:
    """The Dask task: announce the start, stage the artifact, measure in the child."""
    from distributed import get_worker

    worker = get_worker()
    worker.log_event(_TOPIC, {"key": worker.get_current_task(), "worker": worker.address})
    folder = tempfile.mkdtemp(prefix="metaschedule-rpc-stage-")
    try:
        local_path = os.path.join(folder, name)
        with open(local_path, "wb") as f:
            f.write(data)
        rpc_config, cooldown_sec = args[2], args[5]
        return call_isolated(
            _measure_in_child,
            (worker.address, local_path, *args),
            "RPCRunner",
            rpc_config.session_timeout_sec,
            wait_sec=rpc_config.wait_bound_sec + cooldown_sec,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --------------------------------------------------------------------------- tuner side
class _Fleet:
    """The client and what it learns from the scheduler's events."""

    def __init__(self, config: RPCConfig):
        self.config = config
        self.client = _connect(config, "RPCRunner")
        self.lock = threading.Lock()
        self.started: dict[str, str] = {}  # task key -> worker that started it
        self.started_at: dict[str, float] = {}  # task key -> when we heard of the start
        self.lost: dict[str, str] = {}  # task key -> why it failed outside the task
        self.wakeups: dict[str, threading.Event] = {}
        self.last_seen_worker = time.monotonic()
        # how long pending candidates wait for a worker with the key to come (back)
        self.grace_sec = max(30.0, 3.0 * config.session_timeout_sec)
        try:
            found = workers_with_key(self.client, config, wait_sec=config.session_timeout_sec)
            self.client.run(prestart, workers=found, wait=False)  # import while we build
            self.client.subscribe_topic(_TOPIC, self._on_start)
            self.client.subscribe_topic("all", self._on_cluster_event)
        except BaseException:
            self.client.close()
            raise

    def _on_start(self, event: tuple) -> None:
        msg = event[1]
        with self.lock:
            if msg.get("key") in self.wakeups:
                self.started[msg["key"]] = msg["worker"]
                self.started_at[msg["key"]] = time.monotonic()

    def _on_cluster_event(self, event: tuple) -> None:
        msg = event[1]
        if not isinstance(msg, dict) or msg.get("action") != "remove-worker":
            return
        worker = msg.get("worker")
        with self.lock:
            for key in msg.get("processing-tasks") or ():
                if self.started.get(key) == worker and key not in self.lost:
                    self.lost[key] = (
                        f"RPCRunner: the Dask worker {worker} died while measuring this "
                        "candidate (the other candidates go on)"
                    )
                    self.wakeups[key].set()

    def forget(self, key: str) -> None:
        with self.lock:
            self.started.pop(key, None)
            self.started_at.pop(key, None)
            self.lost.pop(key, None)
            self.wakeups.pop(key, None)

    def has_key_worker(self) -> bool:
        """Whether some worker offers the key now (refreshes the grace period)."""
        try:
            workers_with_key(self.client, self.config, wait_sec=0.0)
        except (RuntimeError, OSError):
            return time.monotonic() - self.last_seen_worker < self.grace_sec
        self.last_seen_worker = time.monotonic()
        return True

    def close(self) -> None:
        for topic in (_TOPIC, "all"):  # first, or the scheduler logs events it cannot send
            try:
                self.client.unsubscribe_topic(topic)
            except (ValueError, OSError):
                pass
        self.client.close()


class RPCRunnerFuture(RunnerFuture):
    """A measurement in flight on the fleet: a Dask future and what the events say."""

    def __init__(self, future: Any, fleet: _Fleet, key: str, bound_sec: float | None = None):
        self._future = future
        self._fleet = fleet
        self._key = key
        # the longest to wait once the task started on a host (None: the config's bound)
        self._bound_sec = (
            fleet.config.wait_bound_sec + _TRANSPORT_SLACK_SEC if bound_sec is None else bound_sec
        )
        self._result: RunnerResult | None = None
        future.add_done_callback(lambda _: fleet.wakeups.get(key, threading.Event()).set())
        super().__init__(self.done, self.result)

    def done(self) -> bool:
        if self._result is not None:
            return True
        return self._future.done() or self._key in self._fleet.lost or self._overdue()

    def _overdue(self) -> bool:
        """Whether the measurement started more than the bound ago."""
        started = self._fleet.started_at.get(self._key)
        return started is not None and time.monotonic() - started > self._bound_sec

    def result(self) -> RunnerResult:
        if self._result is None:
            self._result = self._wait()
            self._fleet.forget(self._key)
            self._future = None
        return self._result

    def _wait(self) -> RunnerResult:
        fleet, key = self._fleet, self._key
        wakeup = fleet.wakeups.get(key) or threading.Event()
        last_check = time.monotonic()
        while not self._future.done():
            if key in fleet.lost:
                self._future.cancel()
                return RunnerResult(None, fleet.lost[key])
            wakeup.wait(0.5)
            if self._overdue():
                if self._future.done():
                    break
                self._future.cancel()
                return RunnerResult(
                    None,
                    f"RPCRunner: no result from {fleet.started.get(key)} within "
                    f"{self._bound_sec:.0f} s of the measurement's start (max(30, 3 x "
                    "session_timeout_sec) and the way back); the host may be stuck or "
                    "overloaded; the candidate was not measured",
                )
            if time.monotonic() - last_check > 2.0 and not self._future.done():
                last_check = time.monotonic()
                if not fleet.has_key_worker():
                    self._future.cancel()
                    return RunnerResult(
                        None,
                        f"RPCRunner: no Dask worker at {fleet.config.address} has offered the "
                        f"resource {fleet.config.tracker_key!r} for {fleet.grace_sec:.0f} s; "
                        "the candidate was not measured",
                    )
        if key in fleet.lost:
            return RunnerResult(None, fleet.lost[key])
        try:
            status, value = self._future.result()
        except Exception as err:  # noqa: BLE001 - e.g. KilledWorker, CancelledError
            return RunnerResult(None, f"RPCRunner: the task failed: {type(err).__name__}: {err}")
        if status == "ok":
            return RunnerResult(value, None)
        return RunnerResult(None, value)


@register("runner", "rpc")
@derived_object
class RPCRunner(PyRunner):
    """Measure artifacts on the hosts of a Dask cluster; see the module docstring.

    Args:
        rpc_config: the scheduler and device key (default ``RPCConfig()``, filled from
            ``MS_RPC_TRACKER_HOST/PORT/KEY`` or ``TVM_TRACKER_HOST/PORT/KEY``).
        evaluator_config: the timing loop's settings (default ``EvaluatorConfig()``).
        cooldown_sec: idle seconds on the host before each measurement.
        alloc_repeat: argument sets to allocate; each is timed.
        f_create_session, f_upload_module, f_alloc_argument, f_run_evaluator, f_cleanup:
            the seed's hooks, as functions or dotted names (defaults: the
            ``default_*`` functions of this module). ``device`` in their signatures is
            the device type string, as in the local runner.
        max_workers: at most this many candidates submitted to the cluster at once
            (None: all of a batch; the hosts' resources bound the parallelism anyway).
        initializer: run once in each host process that measures, before it measures.

    The connection is made at the first :meth:`run`, which raises ConnectionError if
    the scheduler does not answer and RuntimeError if no worker offers the key.
    Functions travel with cloudpickle, so closures work; hosts need metaschedule
    installed. Differs from TVM: the hooks run on the host, not on the tuner's side.
    """

    def __init__(
        self,
        rpc_config: RPCConfig | None = None,
        evaluator_config: EvaluatorConfig | None = None,
        cooldown_sec: float = 0.0,
        alloc_repeat: int = 1,
        f_create_session: T_CREATE_SESSION | str | None = None,
        f_upload_module: T_UPLOAD_MODULE | str | None = None,
        f_alloc_argument: T_ALLOC_ARGUMENT | str | None = None,
        f_run_evaluator: T_RUN_EVALUATOR | str | None = None,
        f_cleanup: T_CLEANUP | str | None = None,
        max_workers: int | None = None,
        initializer: Callable[[], None] | None = None,
    ):
        if cooldown_sec < 0:
            raise ValueError(f"cooldown_sec must be non-negative, got {cooldown_sec}")
        if alloc_repeat < 1:
            raise ValueError(f"alloc_repeat must be at least 1, got {alloc_repeat}")
        if max_workers is not None and max_workers < 1:
            raise ValueError(f"max_workers must be at least 1 or None, got {max_workers}")
        for name, f, default in (
            ("f_create_session", f_create_session, default_create_session),
            ("f_upload_module", f_upload_module, default_upload_module),
            ("f_alloc_argument", f_alloc_argument, default_alloc_argument),
            ("f_run_evaluator", f_run_evaluator, default_run_evaluator),
            ("f_cleanup", f_cleanup, default_cleanup),
        ):
            resolve_function(f, default, name)  # fail early on a bad name
        self.rpc_config = RPCConfig._normalized(rpc_config)
        self.evaluator_config = EvaluatorConfig._normalized(evaluator_config)
        self.cooldown_sec = float(cooldown_sec)
        self.alloc_repeat = int(alloc_repeat)
        self.f_create_session = f_create_session
        self.f_upload_module = f_upload_module
        self.f_alloc_argument = f_alloc_argument
        self.f_run_evaluator = f_run_evaluator
        self.f_cleanup = f_cleanup
        self.max_workers = max_workers
        self.initializer = initializer
        self._fleet: _Fleet | None = None
        self._queue: list[tuple[RunnerInput, _Slot]] = []
        self._in_flight: list[_Slot] = []

    def _hooks(self) -> tuple:
        return (
            self.f_create_session,
            self.f_upload_module,
            self.f_alloc_argument,
            self.f_run_evaluator,
            self.f_cleanup,
        )

    def run(self, runner_inputs: list[RunnerInput]) -> list[RunnerFuture]:
        if self._fleet is None:
            self._fleet = _Fleet(self.rpc_config)
        slots: list[RunnerFuture] = []
        for inp in runner_inputs:
            slot = _Slot(self)
            try:
                with open(inp.artifact_path, "rb") as f:
                    slot.data = f.read()
            except OSError as err:
                slot.future = _Failed(f"RPCRunner: cannot read the artifact: {err}")
            else:
                self._queue.append((inp, slot))
            slots.append(slot)
        self._pump()
        return slots

    def _pump(self) -> None:
        """Submit queued inputs while fewer than ``max_workers`` are in flight."""
        self._in_flight = [s for s in self._in_flight if not s.settled()]
        while self._queue and (self.max_workers is None or len(self._in_flight) < self.max_workers):
            inp, slot = self._queue.pop(0)
            data, slot.data = slot.data or b"", None
            slot.future = self._submit(inp, data)
            self._in_flight.append(slot)

    def _submit(self, inp: RunnerInput, data: bytes) -> RunnerFuture:
        import cloudpickle

        fleet = self._fleet
        if fleet is None:
            raise RuntimeError("RPCRunner: not connected (call run, not _submit)")
        key = f"metaschedule-measure-{uuid.uuid4().hex}"
        with fleet.lock:
            fleet.wakeups[key] = threading.Event()
        args = (
            inp.device_type,
            [a.as_json() for a in inp.args_info],
            self.rpc_config._replace(security=None),  # the certificates stay here
            self.evaluator_config,
            self.alloc_repeat,
            self.cooldown_sec,
            self._hooks(),
            None if self.initializer is None else cloudpickle.dumps(self.initializer),
        )
        future = fleet.client.submit(
            _measure_task,
            data,
            os.path.basename(inp.artifact_path) or "artifact.so",
            *args,
            key=key,
            resources={self.rpc_config.tracker_key: 1},
            priority=self.rpc_config.session_priority,
            pure=False,
            retries=0,
        )
        return RPCRunnerFuture(future, fleet, key, self._wait_bound_sec())

    def _wait_bound_sec(self) -> float:
        """The longest the tuner waits for a measurement once it started on a host."""
        return self.rpc_config.wait_bound_sec + self.cooldown_sec + _TRANSPORT_SLACK_SEC

    def close(self) -> None:
        """Disconnect from the scheduler; pending measurements fail."""
        for _, slot in self._queue:
            slot.future = _Failed("RPCRunner: cancelled (the runner was closed)")
        self._queue.clear()
        for slot in self._in_flight:
            if not slot.settled():
                slot.future = _Failed("RPCRunner: cancelled (the runner was closed)")
        self._in_flight.clear()
        if self._fleet is not None:
            self._fleet.close()
            self._fleet = None

    def __enter__(self) -> RPCRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Failed(RunnerFuture):
    def __init__(self, message: str):
        result = RunnerResult(None, message)
        super().__init__(lambda: True, lambda: result)


class _Slot(RunnerFuture):
    """The future handed out by ``run``: queued until ``max_workers`` lets it go."""

    def __init__(self, runner: RPCRunner):
        self.runner = runner
        self.data: bytes | None = None
        self.future: RunnerFuture | None = None
        super().__init__(self.done, self.result)

    def settled(self) -> bool:
        return self.future is not None and self.future.done()

    def done(self) -> bool:
        if self.future is None:
            self.runner._pump()
        return self.settled()

    def result(self) -> RunnerResult:
        while self.future is None:
            waiting = next((s.future for s in self.runner._in_flight if s.future), None)
            if waiting is not None:
                waiting.result()  # wait for one in flight, then submit more
            self.runner._pump()
        return self.future.result()
