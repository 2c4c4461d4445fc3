"""The supervised worker pool: dead workers are replaced and named, every wait ends,
a pool that cannot start says why at once."""

import os
import signal
import threading
import time

import pytest

from metaschedule.arg_info import ArgInfo
from metaschedule.builder import BuilderInput, LocalBuilder
from metaschedule.runner import EvaluatorConfig, LocalRunner, RunnerInput
from metaschedule.testing.tuning_records import matmul
from metaschedule.worker import (
    PoolClosedError,
    WorkerDiedError,
    WorkerPool,
    WorkerStartError,
    WorkerTimeoutError,
)

FAST = EvaluatorConfig(number=1, repeat=1, min_repeat_ms=0)


def wait_for(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def test_pool_runs_functions_by_value_and_reports_their_exceptions():
    with_closure = 5
    pool = WorkerPool(1)
    try:
        assert pool.schedule(lambda x: x + with_closure, (1,)).result(timeout=60) == 6
        assert pool.schedule(os.getpid).result(timeout=60) != os.getpid()
        with pytest.raises(ZeroDivisionError):
            pool.schedule(lambda: 1 / 0).result(timeout=60)
    finally:
        pool.close()


def sleep_after_marking(marker, seconds):
    """Create ``marker`` (the task is running), then sleep."""
    open(marker, "w").close()
    time.sleep(seconds)
    return "slept"


def test_a_killed_worker_fails_its_task_with_the_signal_and_is_replaced(tmp_path):
    pool = WorkerPool(1)
    try:
        marker = str(tmp_path / "running")
        future = pool.schedule(sleep_after_marking, (marker, 30))
        wait_for(lambda: os.path.exists(marker))
        (pid,) = pool.worker_pids()
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(WorkerDiedError, match="signal SIGKILL") as info:
            future.result(timeout=30)
        assert info.value.exitcode == -signal.SIGKILL
        assert pool.schedule(os.getpid).result(timeout=60) != pid  # a new worker
    finally:
        pool.close()


def test_timeout_kills_the_worker_and_its_children():
    pool = WorkerPool(1)
    try:

        def spawn_sleeper():
            import subprocess

            subprocess.Popen(["sleep", "60"])
            time.sleep(60)

        start = time.monotonic()
        with pytest.raises(WorkerTimeoutError):
            pool.schedule(spawn_sleeper, timeout=2.0).result(timeout=60)
        assert time.monotonic() - start < 30
        assert pool.schedule(lambda: "alive").result(timeout=60) == "alive"
    finally:
        pool.close()


def failing_initializer():
    raise RuntimeError("no licence for the compiler")


@pytest.mark.parametrize(
    "initializer, match",
    [
        (failing_initializer, "no licence for the compiler"),
        (lambda: os._exit(3), "exited while starting \\(exit code 3\\)"),
    ],
)
def test_a_pool_that_cannot_start_says_why_at_once(initializer, match):
    pool = WorkerPool(2, initializer)
    try:
        start = time.monotonic()
        with pytest.raises(WorkerStartError, match=match):
            pool.schedule(os.getpid).result(timeout=60)
        with pytest.raises(WorkerStartError):  # later tasks fail at once too
            pool.schedule(os.getpid).result(timeout=1)
        assert time.monotonic() - start < 30
    finally:
        pool.close()


def test_close_fails_running_and_pending_tasks_at_once():
    pool = WorkerPool(1)
    running = pool.schedule(time.sleep, (60,))
    pending = pool.schedule(time.sleep, (60,))
    wait_for(running.running)
    start = time.monotonic()
    pool.close()
    with pytest.raises(PoolClosedError):
        running.result(timeout=10)
    assert pending.cancelled()
    assert time.monotonic() - start < 5


@pytest.mark.compiler
def test_kill_a_build_worker_mid_build_then_build_again(tmp_path):
    marker = str(tmp_path / "building")

    def slow_build(mod, target, params):
        from metaschedule.builder.local_builder import default_build

        open(marker, "w").close()
        time.sleep(30)
        return default_build(mod, target, params)

    with LocalBuilder(max_workers=1, f_build=slow_build, timeout_sec=120) as builder:
        results = []
        thread = threading.Thread(
            target=lambda: results.extend(builder.build([BuilderInput(matmul(8), "cpu")]))
        )
        thread.start()
        wait_for(lambda: os.path.exists(marker))  # the worker is inside slow_build
        for pid in builder._pool.worker_pids():
            os.kill(pid, signal.SIGKILL)
        thread.join(timeout=60)
        assert not thread.is_alive()
        (killed,) = results
        assert killed.artifact_path is None
        assert "worker died: signal SIGKILL" in killed.error_msg
        builder.f_build = None  # the next batch, with the default build, works
        (ok,) = builder.build([BuilderInput(matmul(8), "cpu")])
        assert ok.error_msg is None and os.path.isfile(ok.artifact_path)


@pytest.mark.compiler
def test_kill_a_run_worker_mid_measurement_then_measure_again(tmp_path):
    marker = str(tmp_path / "measuring")
    f = matmul(8)
    with LocalBuilder(max_workers=1) as builder:
        (built,) = builder.build([BuilderInput(f, "cpu")])
    inp = RunnerInput(built.artifact_path, "cpu", ArgInfo.from_prim_func(f))

    def slow_evaluator(rt_mod, device, config, args):
        open(marker, "w").close()
        time.sleep(30)
        return [1.0]

    with LocalRunner(evaluator_config=FAST, f_run_evaluator=slow_evaluator) as runner:
        (future,) = runner.run([inp])
        wait_for(lambda: os.path.exists(marker))
        for pid in runner._pool.worker_pids():
            os.kill(pid, signal.SIGKILL)
        result = future.result()
        assert result.run_secs is None
        assert "worker died: signal SIGKILL" in result.error_msg
        runner.f_run_evaluator = None
        (again,) = runner.run([inp])
        assert again.result().error_msg is None


def test_builder_and_runner_whose_initializer_fails_raise_quickly():
    start = time.monotonic()
    with (
        LocalBuilder(max_workers=1, initializer=failing_initializer) as builder,
        pytest.raises(
            RuntimeError, match="build workers cannot start: .*: RuntimeError: no licence"
        ),
    ):
        builder.build([BuilderInput(matmul(8), "cpu")])
    with LocalRunner(initializer=failing_initializer) as runner:
        (future,) = runner.run([RunnerInput("/nonexistent.so", "cpu", [])])
        with pytest.raises(
            RuntimeError, match="runner workers cannot start: .*: RuntimeError: no licence"
        ):
            future.result()
    assert time.monotonic() - start < 60


def test_stale_build_files_of_dead_processes_are_removed(tmp_path, monkeypatch):
    import subprocess

    from metaschedule.builder.local_builder import remove_stale_build_dirs

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    dead = subprocess.Popen(["true"])
    dead.wait()
    cache = tmp_path / "cache" / "metaschedule" / "kernels"
    cache.mkdir(parents=True)
    (tmp_path / f"metaschedule-build-{dead.pid}-abc").mkdir()
    (tmp_path / f"metaschedule-build-{dead.pid}-abc" / "artifact.so").write_text("")
    (tmp_path / f"metaschedule-build-{os.getpid()}-mine").mkdir()
    (cache / f".ms-build-{dead.pid}-xyz.c").write_text("int half")
    (cache / f".ms-build-{os.getpid()}-xyz.c").write_text("in progress")
    (cache / "0123.so").write_text("")
    assert remove_stale_build_dirs(str(tmp_path)) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "cache",
        f"metaschedule-build-{os.getpid()}-mine",
    ]
    assert sorted(p.name for p in cache.iterdir()) == [f".ms-build-{os.getpid()}-xyz.c", "0123.so"]


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux's /proc")
def test_the_build_files_of_a_zombie_are_removed(tmp_path, monkeypatch):
    """A worker killed with its tuner is a zombie until the init process reaps it, which
    may take seconds: its files are stale already."""
    import subprocess

    from metaschedule.builder.local_builder import remove_stale_build_dirs

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    zombie = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + 30
        while b") Z" not in open(f"/proc/{zombie.pid}/stat", "rb").read():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.kill(zombie.pid, 0)  # signals still reach a zombie: not enough to tell
        (tmp_path / f"metaschedule-build-{zombie.pid}-abc").mkdir()
        assert remove_stale_build_dirs(str(tmp_path)) == 1
        assert not (tmp_path / f"metaschedule-build-{zombie.pid}-abc").exists()
    finally:
        zombie.wait()


def test_tune_tir_with_workers_that_cannot_start_fails_fast_not_hangs(tmp_path):
    from metaschedule.tir_integration import tune_tir

    def template(sch):
        i, _, _ = sch.get_loops(sch.get_block("C"))
        sch.split(i, sch.sample_perfect_tile(i, n=2))

    start = time.monotonic()
    with pytest.raises(RuntimeError, match="build workers cannot start: .*no licence"):
        tune_tir(
            matmul(8),
            "cpu",
            str(tmp_path),
            4,
            num_trials_per_iter=4,
            space=template,
            strategy="replay-trace",
            cost_model="random",
            builder=LocalBuilder(max_workers=2, initializer=failing_initializer),
        )
    assert time.monotonic() - start < 60
