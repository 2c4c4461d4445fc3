"""The runner interface: futures, Python subclasses, the dummy runner."""

import pytest

from metaschedule.arg_info import TensorInfo
from metaschedule.runner import PyRunner, PyRunnerFuture, RunnerFuture, RunnerInput, RunnerResult
from metaschedule.testing.dummy_object import DummyRunner, dummy_run_secs
from metaschedule.utils import derived_object


def test_runner_future_calls_its_functions():
    state = {"done": False}
    future = RunnerFuture(lambda: state["done"], lambda: RunnerResult([0.5], None))
    assert not future.done()
    state["done"] = True
    assert future.done()
    assert future.result().run_secs == [0.5]
    with pytest.raises(NotImplementedError, match="f_result"):
        RunnerFuture(lambda: True).result()


def test_py_runner_future_subclass():
    @derived_object
    class Ready(PyRunnerFuture):
        def done(self):
            return True

        def result(self):
            return RunnerResult(None, "failed on purpose")

    f = Ready()
    assert f.done() and f.result().error_msg == "failed on purpose"
    with pytest.raises(TypeError, match="must implement result"):

        @derived_object
        class NoResult(PyRunnerFuture):
            def done(self):
                return True


def test_py_runner_subclass_returns_futures():
    @derived_object
    class Constant(PyRunner):
        def run(self, runner_inputs):
            return [
                RunnerFuture(lambda: True, lambda: RunnerResult([1.0], None)) for _ in runner_inputs
            ]

    futures = Constant().run([RunnerInput("a", "cpu", [])] * 2)
    assert [f.result().run_secs for f in futures] == [[1.0], [1.0]]
    with pytest.raises(TypeError, match="must implement run"):

        @derived_object
        class NoRun(PyRunner):
            pass


def test_runner_input_keeps_args_info():
    inp = RunnerInput("/a.so", "cpu", (TensorInfo("float32", (2,)),))
    assert inp.args_info == [TensorInfo("float32", (2,))]


def test_dummy_runner_is_deterministic_and_can_make_callers_poll():
    runner = DummyRunner(polls_until_done=2)
    inputs = [RunnerInput(p, "cpu", []) for p in ("dummy://1", "dummy://2", "dummy://1")]
    futures = runner.run(inputs)
    assert [f.done() for f in futures] == [False] * 3
    assert [f.done() for f in futures] == [False] * 3
    assert [f.done() for f in futures] == [True] * 3
    secs = [f.result().run_secs for f in futures]
    assert secs[0] == secs[2] == dummy_run_secs("dummy://1") != secs[1]
    assert all(1e-3 <= s[0] < 11e-3 for s in secs)
    assert runner.inputs == inputs

    def fail(path):
        raise RuntimeError(f"no device for {path}")

    (failed,) = DummyRunner(fail).run([RunnerInput("dummy://3", "cpu", [])])
    assert failed.result().error_msg == "DummyRunner: RuntimeError: no device for dummy://3"
