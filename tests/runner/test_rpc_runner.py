"""RPCRunner on an in-process Dask fleet: tuning, crashes, timeouts, a killed worker."""

import os
import signal
import time

import numpy as np
import pytest

pytest.importorskip("distributed")

from metaschedule.arg_info import ArgInfo
from metaschedule.builder import BuilderInput, LocalBuilder
from metaschedule.codegen import build
from metaschedule.runner import (
    EvaluatorConfig,
    RPCConfig,
    RPCRunner,
    Runner,
    RunnerInput,
)
from metaschedule.schedule import Schedule
from metaschedule.target import Target
from metaschedule.testing import dask_cluster
from metaschedule.testing.faulty_kernels import segfault_kernel
from metaschedule.testing.tuning_records import matmul
from metaschedule.tir_integration import compile_tir, tune_tir

FAST = EvaluatorConfig(number=2, repeat=2, min_repeat_ms=0)
N = 32

pytestmark = [pytest.mark.compiler]


@pytest.fixture(scope="module")
def fleet():
    return dask_cluster.local_fleet()


@pytest.fixture(scope="module")
def artifacts():
    funcs = {"matmul": matmul(N), "segfault": segfault_kernel()}
    with LocalBuilder(max_workers=2, timeout_sec=60) as builder:
        results = builder.build([BuilderInput(f, Target("cpu")) for f in funcs.values()])
    assert all(r.error_msg is None for r in results), results
    return {
        name: RunnerInput(r.artifact_path, "cpu", ArgInfo.from_prim_func(f))
        for (name, f), r in zip(funcs.items(), results)
    }


def template(sch: Schedule) -> None:
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2))
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=16))
    sch.reorder(i0, j0, i1, k, j1)
    sch.vectorize(j1)


@pytest.mark.slow
def test_tune_tir_with_rpc_runner_and_dask_builder_from_the_environment(
    fleet, tmp_path, monkeypatch
):
    config = dask_cluster.rpc_config()
    monkeypatch.setenv("MS_RPC_TRACKER_HOST", config.tracker_host)
    monkeypatch.setenv("TVM_TRACKER_PORT", str(config.tracker_port))  # TVM's name works too
    monkeypatch.setenv("MS_RPC_TRACKER_KEY", config.tracker_key)
    runner = Runner.create("rpc")
    assert isinstance(runner, RPCRunner) and runner.rpc_config == config
    runner.close()
    db = tune_tir(
        matmul(N),
        "cpu",
        str(tmp_path),
        4,
        num_trials_per_iter=4,
        space=template,
        strategy="replay-trace",
        cost_model="random",
        builder="dask",
        runner="rpc",
        seed=0,
    )
    records = db.get_all_tuning_records()
    # the 4 trials, then the final selection's re-measurements (through the fleet too)
    assert len(records) >= 4 and all(r.is_valid for r in records)
    sch = compile_tir(db, matmul(N), "cpu")
    rng = np.random.default_rng(1)
    a, b = rng.random((N, N), dtype=np.float32), rng.random((N, N), dtype=np.float32)
    c = np.zeros((N, N), np.float32)
    build(sch.mod, "cpu")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_futures_crash_and_the_rest_go_on(fleet, artifacts):
    with RPCRunner(dask_cluster.rpc_config(), FAST, alloc_repeat=2, max_workers=2) as runner:
        futures = runner.run([artifacts["matmul"], artifacts["segfault"], artifacts["matmul"]])
        deadline = time.time() + 60
        while not all(f.done() for f in futures) and time.time() < deadline:
            time.sleep(0.05)
        ok, crashed, ok2 = (f.result() for f in futures)
    assert ok.error_msg is None and len(ok.run_secs) == 4 and all(0 < s < 1 for s in ok.run_secs)
    assert ok2.error_msg is None
    assert "crashed" in crashed.error_msg and "SIGSEGV" in crashed.error_msg


def test_a_measurement_past_session_timeout_is_an_error(fleet, artifacts):
    config = dask_cluster.rpc_config(session_timeout_sec=1)
    f_hang = "metaschedule.testing.dask_cluster.hanging_run_evaluator"
    with RPCRunner(config, FAST, f_run_evaluator=f_hang) as runner:
        (result,) = (f.result() for f in runner.run([artifacts["matmul"]]))
    assert "timed out after 1" in result.error_msg


def test_killing_the_measuring_worker_fails_only_its_candidate(fleet, artifacts):
    config = dask_cluster.rpc_config()
    slow = "metaschedule.testing.dask_cluster.slow_run_evaluator"
    with RPCRunner(config, FAST, f_run_evaluator=slow) as runner:
        futures = runner.run([artifacts["matmul"]] * 2)
        fleet_state = runner._fleet
        _, pid = dask_cluster.measuring_worker(fleet_state.client)
        deadline = time.time() + 30
        while not fleet_state.started and time.time() < deadline:
            time.sleep(0.02)
        assert fleet_state.started, "no measurement started"
        os.kill(pid, signal.SIGKILL)
        first, second = (f.result() for f in futures)
    assert first.error_msg is not None and "died while measuring" in first.error_msg
    assert second.error_msg is None and len(second.run_secs) == 2  # on the restarted worker


def test_no_worker_with_the_key_is_a_clear_error(fleet, artifacts):
    config = dask_cluster.rpc_config(key="device-nowhere", session_timeout_sec=1)
    with pytest.raises(
        RuntimeError, match="no Dask worker .* offers the resource 'device-nowhere'"
    ):
        config.connect_tracker()
    with pytest.raises(RuntimeError, match='--resources "device-nowhere=1"'):
        RPCRunner(config).run([artifacts["matmul"]])
    session = dask_cluster.rpc_config().connect_server()
    try:
        assert session.run(os.getpid) > 0  # runs on the measuring worker
        assert session.worker.startswith("tcp://")
    finally:
        session.close()


def test_config_reads_the_environment_and_checks(monkeypatch):
    for name in (
        "MS_RPC_TRACKER_HOST",
        "TVM_TRACKER_HOST",
        "MS_RPC_TRACKER_KEY",
        "TVM_TRACKER_KEY",
        "MS_RPC_TRACKER_PORT",
        "TVM_TRACKER_PORT",
    ):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="tracker_host .*MS_RPC_TRACKER_HOST"):
        RPCRunner()
    monkeypatch.setenv("TVM_TRACKER_HOST", "sched")
    monkeypatch.setenv("TVM_TRACKER_KEY", "device-xeon")
    config = RPCConfig._normalized(None)
    assert config.address == "tcp://sched:8786" and config.tracker_key == "device-xeon"
    assert RPCConfig("tcp://h:99", None, "k").address == "tcp://h:99"
    with pytest.raises(ValueError, match="tracker_port must be an integer"):
        RPCConfig._normalized(RPCConfig("h", "x", "k"))
    with pytest.raises(ConnectionError, match="no Dask scheduler answers at tcp://127.0.0.1:9"):
        RPCConfig("127.0.0.1", 9, "k", session_timeout_sec=1).connect_tracker()


def test_candidates_fail_when_no_worker_with_the_key_remains(fleet, artifacts):
    with RPCRunner(dask_cluster.rpc_config(), FAST) as runner:
        runner.run([])  # connected while the measuring worker is there
        # ... which then "goes away": the candidates ask for a key no worker offers
        gone = runner.rpc_config._replace(tracker_key="device-gone")
        runner.rpc_config = runner._fleet.config = gone
        runner._fleet.grace_sec = 0.5
        start = time.time()
        (result,) = (f.result() for f in runner.run([artifacts["matmul"]]))
    assert "no Dask worker" in result.error_msg and "'device-gone'" in result.error_msg
    assert time.time() - start < 30


def test_initializer_runs_once_per_host_process(fleet, artifacts, tmp_path):
    marker = tmp_path / "initialized"

    def initializer():  # a closure: hooks travel with cloudpickle
        with open(marker, "a") as f:
            f.write("x")

    with RPCRunner(dask_cluster.rpc_config(), FAST, initializer=initializer) as runner:
        results = [f.result() for f in runner.run([artifacts["matmul"]] * 3)]
    assert all(r.error_msg is None for r in results)
    assert marker.read_text() == "x"
