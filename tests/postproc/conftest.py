"""Workloads and checks shared by the postprocessor tests."""

from __future__ import annotations

import json

import numpy as np
import pytest

from metaschedule import pack_weights, te, tir
from metaschedule.schedule import Trace
from metaschedule.te import ops
from metaschedule.tir.interpreter import interpret
from metaschedule.tir.structural import structural_equal


def _matmul(n=16, m=12, k=8):
    a = te.placeholder((n, k), "float32", "A")
    b = te.placeholder((k, m), "float32", "B")
    return te.create_prim_func([a, b, ops.matmul(a, b)])


def _conv2d():
    data = te.placeholder((1, 6, 6, 4), "float32", "data")
    kernel = te.placeholder((3, 3, 4, 8), "float32", "kernel")
    return te.create_prim_func([data, kernel, ops.conv2d_nhwc(data, kernel, padding=1)])


def _softmax():
    x = te.placeholder((4, 16), "float32", "x")
    return te.create_prim_func([x, ops.softmax(x)])


def _inputs(func, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(p.static_shape()).astype(p.dtype) for p in func.params]


def _outputs(func, seed=0, original=None):
    """The arguments after running ``func`` on random inputs drawn for ``original`` (the
    unscheduled function; default ``func``), packed where ``func`` takes weights pre-packed."""
    arrays = pack_weights(func, _inputs(original or func, seed))
    interpret(func, *arrays)
    return arrays


@pytest.fixture
def matmul():
    return _matmul


@pytest.fixture
def conv2d():
    return _conv2d()


@pytest.fixture
def softmax():
    return _softmax()


@pytest.fixture
def check():
    """``check(sch, func)``: the schedule computes what ``func`` does (interpreter), and its
    trace, through JSON, replays (post-processing included) to the same module."""

    def run(sch, func):
        got, want = _outputs(sch.mod["main"], original=func)[-1], _outputs(func)[-1]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        trace = Trace.from_json(json.loads(json.dumps(sch.trace.as_json())))
        fresh = tir.Schedule(func)
        trace.apply_to_schedule(fresh, remove_postproc=False)
        assert structural_equal(fresh.mod, sch.mod), f"{fresh.mod}\n!=\n{sch.mod}"

    return run


@pytest.fixture
def check_build(tmp_path, monkeypatch):
    """``check_build(sch, func)``: the compiled schedule computes what ``func`` does."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def run(sch, func):
        from metaschedule import build

        arrays = _inputs(func)
        want = [a.copy() for a in arrays]
        interpret(func, *want)
        lib = build(sch.mod, "cpu")
        lib(*lib.pack_weights(*arrays))  # weights RewriteLayout re-laid out, packed once
        np.testing.assert_allclose(arrays[-1], want[-1], rtol=1e-4, atol=1e-4)

    return run
