"""Every wait has a deadline: a wait that runs out is an error result, never a tuner that
waits forever or an exception out of it. The bounds are made small here (monkeypatched)
so that the tests do not wait for the real ones."""

import time

import pytest

from metaschedule.arg_info import ArgInfo
from metaschedule.builder import BuilderInput, LocalBuilder
from metaschedule.runner import EvaluatorConfig, LocalRunner, RunnerInput, rpc_host
from metaschedule.target import Target
from metaschedule.testing.tuning_records import matmul

FAST = EvaluatorConfig(number=1, repeat=1, min_repeat_ms=0)


@pytest.fixture(scope="module")
def artifact():
    func = matmul(8)
    with LocalBuilder(max_workers=1, timeout_sec=60) as builder:
        (built,) = builder.build([BuilderInput(func, Target("cpu"))])
    assert built.error_msg is None, built.error_msg
    return RunnerInput(built.artifact_path, "cpu", ArgInfo.from_prim_func(func))


def test_a_hosts_wait_for_its_child_is_bounded():
    status, message = rpc_host.call_isolated(time.sleep, (60,), "Test", 1.0, wait_sec=0.5)
    assert status == "error" and "no reply from the host's child process within 0.5 s" in message
    # the killed child was replaced: the next call is served
    assert rpc_host.call_isolated(sum, ([1, 2],), "Test", wait_sec=60) == 3


@pytest.mark.compiler
def test_local_runner_tasks_are_bounded(artifact, monkeypatch):
    """The cooldown runs outside the timed part (no SIGALRM there): only the pool's bound
    on the task stops a worker that does not answer."""
    monkeypatch.setattr(LocalRunner, "_task_bound", lambda self: 1.0)
    with LocalRunner(evaluator_config=FAST, cooldown_sec=60) as runner:
        (result,) = (f.result() for f in runner.run([artifact]))
    assert result.run_secs is None and "gave no result in time" in result.error_msg


def test_local_runner_task_bound_covers_the_lock_and_the_cooldown():
    runner = LocalRunner(timeout_sec=20, lock_timeout_sec=100, cooldown_sec=1)
    assert runner._task_bound() == 60 + 100 + 1
    assert LocalRunner(timeout_sec=1)._task_bound() == 30 + 600


@pytest.mark.compiler
def test_dask_builder_results_are_bounded(monkeypatch):
    pytest.importorskip("distributed")
    from metaschedule.builder import DaskBuilder, dask_builder
    from metaschedule.testing import dask_cluster
    from metaschedule.testing.dummy_object import with_fault

    dask_cluster.local_fleet()
    monkeypatch.setattr(dask_builder, "_TRANSPORT_SLACK_SEC", -29.0)  # 30 - 29: 1 s
    fault = "metaschedule.testing.dummy_object.fault_injecting_build"
    with DaskBuilder(dask_cluster.rpc_config(), timeout_sec=3, f_build=fault) as builder:
        (hung,) = builder.build([BuilderInput(with_fault(matmul(8), "hang"), Target("cpu"))])
    assert hung.artifact_path is None
    assert "DaskBuilder: no result within 1 s" in hung.error_msg


@pytest.mark.compiler
def test_rpc_runner_futures_are_bounded_once_started(artifact, monkeypatch):
    pytest.importorskip("distributed")
    from metaschedule.runner import RPCRunner
    from metaschedule.testing import dask_cluster

    dask_cluster.local_fleet()
    monkeypatch.setattr(RPCRunner, "_wait_bound_sec", lambda self: 1.0)
    config = dask_cluster.rpc_config(session_timeout_sec=2)  # the host stops it at 2 s
    hang = "metaschedule.testing.dask_cluster.hanging_run_evaluator"
    with RPCRunner(config, FAST, f_run_evaluator=hang) as runner:
        (result,) = (f.result() for f in runner.run([artifact]))
    assert result.run_secs is None
    assert "within 1 s of the measurement's start" in result.error_msg
