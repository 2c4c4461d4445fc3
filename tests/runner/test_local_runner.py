"""LocalRunner: measuring built kernels in isolated workers, asynchronously, one at a time."""

import itertools
import os
import threading
import time

import numpy as np
import pytest

from metaschedule.arg_info import ArgInfo, TensorInfo
from metaschedule.builder import BuilderInput, LocalBuilder
from metaschedule.runner import (
    EvaluatorConfig,
    LocalRunner,
    Runner,
    RunnerInput,
    RunnerResult,
    default_alloc_argument,
)
from metaschedule.target import Target
from metaschedule.testing.faulty_kernels import (
    compile_error_kernel,
    infinite_loop_kernel,
    segfault_kernel,
)
from metaschedule.testing.tuning_records import matmul

FAST = EvaluatorConfig(number=2, repeat=3, min_repeat_ms=0)
INTERVALS = "metaschedule.testing.dummy_object.interval_run_evaluator"


@pytest.fixture(scope="module")
def artifacts():
    """name -> (artifact path or build error, args_info) for a few kernels, built once."""
    funcs = {
        "matmul": matmul(32),
        "matmul_small": matmul(8),
        "segfault": segfault_kernel(),
        "hang": infinite_loop_kernel(),
        "bad_c": compile_error_kernel(),
    }
    with LocalBuilder(max_workers=2, timeout_sec=30) as builder:
        results = builder.build([BuilderInput(f, Target("cpu")) for f in funcs.values()])
    return {
        name: (r.artifact_path or r.error_msg, ArgInfo.from_prim_func(f))
        for (name, f), r in zip(funcs.items(), results)
    }


def inp(artifacts, name):
    path, args_info = artifacts[name]
    return RunnerInput(path, "cpu", args_info)


@pytest.mark.compiler
def test_measure_a_matmul(artifacts):
    with LocalRunner(timeout_sec=10, evaluator_config=FAST, alloc_repeat=2) as runner:
        (future,) = runner.run([inp(artifacts, "matmul")])
        result = future.result()
    assert result.error_msg is None
    assert len(result.run_secs) == 6  # repeat x alloc_repeat
    assert all(0 < s < 1 for s in result.run_secs)
    assert future.done() and future.result() is result
    info = result.info  # the protocol and the load seen, recorded with the result
    assert info["repeat"] == FAST.repeat and info["warmup"] == FAST.warmup
    # the OpenMP wait policy the worker chose from the load it saw, and why
    decision = info["omp_policy_basis"]["decision"]
    if decision == "quiet":
        assert "GOMP_SPINCOUNT=" in info["omp_wait_policy"]
        assert info["omp_policy_basis"]["others_cores"] is not None
    elif decision in ("busy", "unknown load"):
        assert info["omp_wait_policy"] == "PASSIVE (GOMP_SPINCOUNT=0)"
    else:  # the user's OMP_WAIT_POLICY / GOMP_SPINCOUNT, as the runner's environment has it
        assert decision == "user"
        assert {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"} & set(os.environ)
    assert {"loadavg_1m", "others_cores", "statistic"} <= set(info)


@pytest.mark.compiler
def test_crash_hang_and_compile_failure_are_errors_and_the_next_candidate_runs(artifacts):
    bad_c_error, _ = artifacts["bad_c"]
    assert "too few arguments to function" in bad_c_error  # failed to compile: never run
    batch = [inp(artifacts, n) for n in ("segfault", "matmul_small", "hang", "matmul")]
    with LocalRunner(timeout_sec=1, evaluator_config=FAST) as runner:
        results = [f.result() for f in runner.run(batch)]
    crash, ok1, hang, ok2 = results
    assert crash.run_secs is None
    assert crash.error_msg == "LocalRunner: the kernel crashed (worker died: signal SIGSEGV)"
    assert hang.run_secs is None
    assert hang.error_msg == "LocalRunner: timed out after 1 s (the run was killed)"
    assert ok1.error_msg is None and len(ok1.run_secs) == 3
    assert ok2.error_msg is None and len(ok2.run_secs) == 3


@pytest.mark.compiler
def test_run_returns_at_once_and_futures_complete_out_of_order(artifacts):
    batch = [
        inp(artifacts, "hang"),
        RunnerInput("/nonexistent/artifact.so", "cpu", [TensorInfo("float32", (4,))]),
        inp(artifacts, "matmul_small"),
    ]
    with LocalRunner(timeout_sec=2, evaluator_config=FAST) as runner:
        hang, missing, ok = runner.run(batch)  # returns at once: the hang is still pending
        error = missing.result()  # fails while loading, without waiting for the hang
        assert not hang.done()
        assert "failed while loading the artifact /nonexistent/artifact.so" in error.error_msg
        assert "timed out after 2 s" in hang.result().error_msg
        assert ok.result().error_msg is None


@pytest.mark.compiler
def test_measurements_never_overlap_even_across_runners(artifacts):
    batch = [inp(artifacts, "matmul_small")] * 3
    a = LocalRunner(timeout_sec=10, f_run_evaluator=INTERVALS)
    b = LocalRunner(timeout_sec=10, f_run_evaluator=INTERVALS, cooldown_sec=0.05)
    with a, b:
        futures = a.run(batch) + b.run(batch)
        intervals = sorted(tuple(f.result().run_secs) for f in futures)
    assert len(intervals) == 6
    for (_, end), (start, _) in itertools.pairwise(intervals):
        assert start >= end


@pytest.mark.compiler
def test_cooldown_separates_measurements(artifacts):
    with LocalRunner(timeout_sec=10, f_run_evaluator=INTERVALS, cooldown_sec=0.2) as runner:
        intervals = sorted(
            tuple(f.result().run_secs) for f in runner.run([inp(artifacts, "matmul_small")] * 3)
        )
    gaps = [start - end for (_, end), (start, _) in itertools.pairwise(intervals)]
    assert all(g >= 0.19 for g in gaps)


def test_default_alloc_argument():
    infos = [["TENSOR", "float32", [3, 4]], ["TENSOR", "int64", [5]], ["TENSOR", "bool", [2, 2]]]
    sets = default_alloc_argument("cpu", infos, 2)
    assert len(sets) == 2
    f, i, b = sets[0]
    assert f.shape == (3, 4) and f.dtype == np.float32 and ((0 <= f) & (f < 1)).all()
    assert i.dtype == np.int64 and not i.any()
    assert b.dtype == np.bool_ and b.shape == (2, 2)
    np.testing.assert_array_equal(default_alloc_argument("cpu", infos, 1)[0][0], f)  # seeded
    # 64-byte aligned, as TVM's runner allocates (numpy's large arrays are not)
    big = [["TENSOR", "float32", [1, 112, 112, 64]], ["TENSOR", "float16", [7]]]
    for arr in [*sets[0], *sets[1], *default_alloc_argument("cpu", big, 1)[0]]:
        assert arr.ctypes.data % 64 == 0 and arr.flags.c_contiguous and arr.flags.writeable


def test_a_worker_generates_default_arguments_once_and_hands_out_copies(monkeypatch):
    from metaschedule.runner import local_runner  # local: its private cache is under test

    calls = []

    def counting(device, infos, repeat):
        calls.append(len(infos))
        return default_alloc_argument(device, infos, repeat)

    monkeypatch.setattr(local_runner, "default_alloc_argument", counting)
    monkeypatch.setattr(local_runner, "_argument_cache", {})
    infos = [["TENSOR", "float32", [3, 4]], ["TENSOR", "float32", [2]]]
    first = local_runner._default_arguments("cpu", infos, 1)
    first[0][0][:] = -1.0  # a kernel writing where it should not
    second = local_runner._default_arguments("cpu", infos, 1)
    assert calls == [2]  # generated once
    assert second[0][0] is not first[0][0] and ((0 <= second[0][0]) & (second[0][0] < 1)).all()
    assert all(a.ctypes.data % 64 == 0 for a in second[0])  # the copies stay aligned
    np.testing.assert_array_equal(second[0][0], default_alloc_argument("cpu", infos, 1)[0][0])
    for n in range(2, 2 + local_runner._ARGUMENT_CACHE_SIZE):  # other workloads evict it
        local_runner._default_arguments("cpu", [["TENSOR", "float32", [n]]], 1)
    local_runner._default_arguments("cpu", infos, 1)
    assert calls.count(2) == 2
    assert len(local_runner._argument_cache) == local_runner._ARGUMENT_CACHE_SIZE


def test_evaluator_config():
    assert EvaluatorConfig()[:4] == (3, 1, 100, False)  # TVM's fields first
    assert EvaluatorConfig()[4:] == (1, 3, 2000)  # ours: warmup, num_probes, max_total_ms
    assert EvaluatorConfig._normalized(None) == EvaluatorConfig()
    assert EvaluatorConfig._normalized(EvaluatorConfig(number=2.0)).number == 2
    with pytest.raises(ValueError, match="number >= 1"):
        EvaluatorConfig._normalized(EvaluatorConfig(number=0))


def test_create_and_argument_checks():
    runner = Runner.create("local", timeout_sec=3, cooldown_sec=0.5)
    assert isinstance(runner, LocalRunner) and runner.timeout_sec == 3
    assert runner.evaluator_config == EvaluatorConfig()
    with pytest.raises(ValueError, match="expected one of: local"):
        Runner.create("tracker")
    with pytest.raises(ValueError, match="alloc_repeat"):
        LocalRunner(alloc_repeat=0)
    with pytest.raises(ValueError, match="cannot be imported"):
        LocalRunner(f_run_evaluator="metaschedule.testing.dummy_object.no_such_function")
    LocalRunner(f_cleanup=lambda: None)  # cloudpickle ships lambdas
    lock = threading.Lock()
    with pytest.raises(TypeError, match="picklable"):
        LocalRunner(f_cleanup=lambda: lock.acquire())


def test_runner_result_has_exactly_one_outcome():
    assert RunnerResult([1, 2], None).run_secs == [1.0, 2.0]
    with pytest.raises(ValueError, match="exactly one"):
        RunnerResult(None, None)


@pytest.mark.compiler
def test_futures_outlive_a_temporary_runner(artifacts):
    futures = LocalRunner(timeout_sec=10, evaluator_config=FAST).run([inp(artifacts, "matmul")] * 2)
    import gc

    gc.collect()
    assert all(f.result().error_msg is None for f in futures)


@pytest.mark.compiler
def test_close_cancels_pending_measurements_at_once(artifacts):
    runner = LocalRunner(timeout_sec=30, evaluator_config=FAST)
    futures = runner.run([inp(artifacts, "hang")] * 3)
    time.sleep(0.3)
    start = time.time()
    runner.close()
    assert time.time() - start < 10  # the hung kernel (timeout 30 s) is killed, not waited for
    results = [f.result() for f in futures]
    assert all(r.error_msg == "LocalRunner: cancelled (the runner was closed)" for r in results)


def test_passive_openmp_unless_the_user_chose(monkeypatch):
    from metaschedule.runner import config

    if config._libgomp_loaded():
        pytest.skip("libgomp is loaded in this process: the policy can no longer change")
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.setattr(config, "_POLICY", None)
    assert config.use_passive_openmp().startswith("PASSIVE")
    assert os.environ["GOMP_SPINCOUNT"] == "0"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    monkeypatch.delenv("GOMP_SPINCOUNT")
    monkeypatch.setattr(config, "_POLICY", None)
    assert config.use_passive_openmp() == "ACTIVE" and "GOMP_SPINCOUNT" not in os.environ


def test_worker_env_is_a_picklable_initializer(monkeypatch):
    import pickle

    from metaschedule.runner.config import WorkerEnv

    monkeypatch.setenv("MS_TEST_GONE", "1")
    init = pickle.loads(pickle.dumps(WorkerEnv({"MS_TEST_SET": 3, "MS_TEST_GONE": None})))
    init()
    assert os.environ["MS_TEST_SET"] == "3" and "MS_TEST_GONE" not in os.environ
    monkeypatch.delenv("MS_TEST_SET")
