"""Builders: the interface, LocalBuilder's parallel isolated builds, the dummy builder."""

import os
import threading

import numpy as np
import pytest

import metaschedule.builder as msb
from metaschedule.builder import Builder, BuilderInput, BuilderResult, LocalBuilder, PyBuilder
from metaschedule.runtime import load_module
from metaschedule.target import Target
from metaschedule.testing.dummy_object import DummyBuilder, with_fault
from metaschedule.testing.faulty_kernels import compile_error_kernel
from metaschedule.testing.tuning_records import matmul
from metaschedule.tir.structural import structural_hash
from metaschedule.utils import derived_object

FAULTY = "metaschedule.testing.dummy_object.fault_injecting_build"


# long enough for a real build on a loaded machine (tests run two at a time), short
# enough that the hanging build's wait stays cheap
TIMEOUT_SEC = 4.0


@pytest.fixture(scope="module")
def builder():
    with LocalBuilder(max_workers=2, timeout_sec=TIMEOUT_SEC, f_build=FAULTY) as b:
        yield b


def check_matmul_artifact(path, n):
    assert os.path.isfile(path)
    lib = load_module(path)
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    c = np.zeros((n, n), np.float32)
    lib(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


@pytest.mark.compiler
def test_build_matmul_gives_a_loadable_artifact(builder):
    (result,) = builder.build([BuilderInput(matmul(16), Target("cpu"))])
    assert result.error_msg is None
    check_matmul_artifact(result.artifact_path, 16)


@pytest.mark.compiler
def test_failing_builds_are_results_and_the_next_build_succeeds(builder):
    cpu = Target("cpu")
    inputs = [
        BuilderInput(with_fault(matmul(8), "crash"), cpu),
        BuilderInput(matmul(8), cpu),
        BuilderInput(with_fault(matmul(8), "hang"), cpu),
        BuilderInput(compile_error_kernel(), cpu),
        BuilderInput(with_fault(matmul(8), "raise"), cpu),
        BuilderInput(matmul(12), cpu),
    ]
    crash, ok1, hang, bad_c, raised, ok2 = builder.build(inputs)
    assert crash.artifact_path is None
    assert "build crashed (worker died: signal SIGSEGV)" in crash.error_msg
    assert hang.artifact_path is None and f"timed out after {TIMEOUT_SEC} s" in hang.error_msg
    assert "BuildError" in bad_c.error_msg
    assert "too few arguments to function" in bad_c.error_msg  # the compiler's own words
    assert "RuntimeError: cannot build ['main']: injected failure" in raised.error_msg
    assert "Traceback" in raised.error_msg
    check_matmul_artifact(ok1.artifact_path, 8)
    check_matmul_artifact(ok2.artifact_path, 12)
    # the pool replaced its dead workers: the same builder keeps working
    (again,) = builder.build([BuilderInput(matmul(8), cpu)])
    assert again.error_msg is None


@pytest.mark.compiler
def test_builds_run_in_parallel_workers(tmp_path):
    log = str(tmp_path / "intervals")

    def slow_build(mod, target, params):  # shipped to the workers by cloudpickle
        import os
        import time

        from metaschedule.builder.local_builder import default_build

        start = time.time()
        time.sleep(1.0)
        with open(log, "a") as f:
            f.write(f"{os.getpid()} {start} {time.time()}\n")
        return default_build(mod, target, params)

    with LocalBuilder(max_workers=2, timeout_sec=30, f_build=slow_build) as b:
        results = b.build([BuilderInput(matmul(8), Target("cpu"))] * 2)
    assert all(r.error_msg is None for r in results)
    rows = [line.split() for line in open(log).read().splitlines()]
    pids = {r[0] for r in rows}
    starts, ends = [float(r[1]) for r in rows], [float(r[2]) for r in rows]
    # two workers, and the two builds were in progress at the same moment
    assert len(rows) == 2 and len(pids) == 2
    assert max(starts) < min(ends)


def test_create_and_argument_checks():
    b = Builder.create("local", max_workers=1, timeout_sec=5)
    assert isinstance(b, LocalBuilder) and b.max_workers == 1 and b.timeout_sec == 5
    assert isinstance(msb.create(), LocalBuilder)
    assert LocalBuilder().max_workers >= 1
    with pytest.raises(ValueError, match="expected one of: dask, local"):
        Builder.create("rpc")
    with pytest.raises(ValueError, match="max_workers"):
        LocalBuilder(max_workers=0)
    with pytest.raises(ValueError, match="cannot be imported"):
        LocalBuilder(f_build="metaschedule.no_such_module.build")
    LocalBuilder(f_build=lambda mod, target, params: None)  # cloudpickle ships lambdas
    lock = threading.Lock()
    with pytest.raises(TypeError, match="picklable"):
        LocalBuilder(f_build=lambda mod, target, params: lock)


def test_builder_result_has_exactly_one_outcome():
    assert BuilderResult("/x.so", None).artifact_path == "/x.so"
    assert BuilderResult(None, "boom").error_msg == "boom"
    with pytest.raises(ValueError, match="exactly one"):
        BuilderResult(None, None)
    with pytest.raises(ValueError, match="exactly one"):
        BuilderResult("/x.so", "boom")


def test_builder_input_wraps_a_prim_func():
    inp = BuilderInput(matmul(8), Target("cpu"))
    assert list(inp.mod) == ["main"] and inp.params is None


def test_py_builder_subclass_and_derived_object():
    @derived_object
    class Echo(PyBuilder):
        def build(self, build_inputs):
            return [BuilderResult(f"/echo/{len(i.mod)}", None) for i in build_inputs]

    assert Echo().build([BuilderInput(matmul(4), Target("cpu"))])[0].artifact_path == "/echo/1"
    with pytest.raises(TypeError, match="must implement build"):

        @derived_object
        class Incomplete(PyBuilder):
            pass


def test_dummy_builder_names_the_structural_hash():
    results = DummyBuilder().build(
        [BuilderInput(matmul(8), Target("cpu")), BuilderInput(matmul(8), Target("cpu"))]
    )
    assert (
        results[0].artifact_path
        == results[1].artifact_path
        == f"dummy://{structural_hash(BuilderInput(matmul(8), Target('cpu')).mod)}"
    )
