"""The operator suite shared by the CLI and the benchmarks."""

from __future__ import annotations

import numpy as np
import pytest

import metaschedule as ms
from metaschedule.flop_count import estimate_flops
from metaschedule.tir.function import IRModule
from metaschedule.workloads import SUITE, get_workload, suite_names


def test_suite_names():
    assert suite_names() == ["gmm", "c2d", "dep", "cbr", "tbg", "sfm", "dns", "pool"]


@pytest.mark.parametrize("name", suite_names())
def test_each_workload_builds_its_function(name):
    wl = SUITE[name]
    func = wl.func()
    shapes = [tuple(int(d) for d in p.shape) for p in func.params]
    assert shapes == [*wl.input_shapes, wl.output_shape]


def test_flops_of_the_matmul_and_conv():
    assert estimate_flops(IRModule({"main": get_workload("gmm").func()})) == 2 * 1024**3
    c2d = estimate_flops(IRModule({"main": SUITE["c2d"].func()}))
    assert c2d == pytest.approx(2 * 56 * 56 * 64 * 64 * 9, rel=0.01)


def test_gmm_variant_and_errors():
    wl = get_workload("gmm:16")
    assert wl.input_shapes == ((16, 16), (16, 16)) and wl.name == "gmm:16"
    with pytest.raises(ValueError, match="positive integer"):
        get_workload("gmm:x")
    with pytest.raises(ValueError, match="the suite has: gmm, c2d"):
        get_workload("resnet")


@pytest.mark.compiler
@pytest.mark.parametrize("name", ["gmm:16", "sfm", "pool", "tbg"])
def test_reference_matches_the_compiled_function(name):
    wl = get_workload(name)
    lib = ms.build(wl.func(), "cpu")
    args = wl.inputs()
    out = np.zeros(wl.output_shape, "float32")
    lib(*args, out)
    np.testing.assert_allclose(out, wl.reference(*args), rtol=1e-4, atol=1e-4)
