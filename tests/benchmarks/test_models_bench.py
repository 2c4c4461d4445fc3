"""benchmarks/models.py: the interleaved timing protocol and the per-task gap table."""

import os
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

import model_gap  # noqa: E402
import models  # noqa: E402

from metaschedule import graph  # noqa: E402
from metaschedule import relax_integration as ri  # noqa: E402


def _args(**kw):
    base = {"timing": "interleaved", "rounds": 3, "settle_ms": 0.0, "min_round_ms": 5.0}
    base.update(repeat=2, cpu=True)
    base.update(kw)
    return SimpleNamespace(**base)


def test_interleaved_timing_rotates_and_reports_every_round(monkeypatch):
    order = []
    walls = {"a": iter([1.0, 1.2, 0.9]), "b": iter([3.0, 3.3, 2.9])}

    def one_round(fn, min_round_ms):  # no clock: each framework's rounds are given
        name = fn()
        order.append(name)
        wall = next(walls[name])
        return wall, 2 * wall

    monkeypatch.setattr(models, "_one_round", one_round)
    t = models.time_frameworks({"a": lambda: "a", "b": lambda: "b"}, _args())
    assert set(t) == {"a", "b"}
    for name in "ab":
        assert len(t[name]["wall"]) == 3 and len(t[name]["cpu"]) == 3
        assert t[name]["best_ms"] == min(t[name]["wall"]) <= t[name]["median_ms"]
    assert t["a"]["wall"] == [1.0, 1.2, 0.9] and t["b"]["cpu"] == [6.0, 6.6, 5.8]
    assert t["a"]["median_ms"] == 1.0 and t["b"]["best_ms"] == 2.9
    # the ratios pair each round's timings
    assert models.round_ratios(t, "b", "a") == pytest.approx([3.0, 2.75, 2.9 / 0.9])
    # round 0 runs a then b, round 1 b then a, round 2 a then b (the order rotates)
    assert order == ["a", "b", "b", "a", "a", "b"]


def test_sequential_timing_keeps_the_old_protocol():
    t = models.time_frameworks({"a": lambda: time.sleep(0.001)}, _args(timing="sequential"))
    assert len(t["a"]["wall"]) == 2 and t["a"]["cpu_ms"] >= 0


def test_parse_args_defaults_are_the_fair_protocol():
    a = models.parse_args([])
    assert a.timing == "interleaved" and a.omp_wait_policy == "passive"
    assert a.ort_spinning == "off" and not a.gap
    spin = models.parse_args(["--omp-wait-policy", "unset", "--timing", "sequential"])
    assert spin.omp_wait_policy == "unset" and spin.timing == "sequential"


def test_conv_keys_are_layout_free():
    nchw = model_gap.conv_key((1, 16, 8, 8), (32, 16, 3, 3), (1, 32, 4, 4), [(32,)])
    nhwc = model_gap.conv_key((1, 8, 8, 16), (3, 3, 16, 32), (1, 4, 4, 32), [(1, 1, 1, 32)])
    assert nchw == nhwc and not nchw[-1]
    res = model_gap.conv_key((1, 16, 8, 8), (32, 16, 3, 3), (1, 32, 4, 4), [(32,), (1, 32, 4, 4)])
    assert res[-1] and res != nchw
    label = model_gap.conv_label((1, 16, 8, 8), (32, 16, 3, 3), (1, 32, 4, 4), True)
    assert label == "conv 3x3 16->32 /2 4x4 +res"


def _small_cnn():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def w(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype("float32"), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r1"], ["s"]),
        helper.make_node("Relu", ["s"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], strides=[2, 2]),
        helper.make_node("MaxPool", ["c3"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    inits = [
        w("w1", 16, 16, 3, 3),
        w("b1", 16),
        w("w2", 16, 16, 3, 3),
        w("b2", 16),
        w("w3", 32, 16, 1, 1),
        w("b3", 32),
        w("wf", 10, 32),
        w("bf", 10),
    ]
    g = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return onnx, model.SerializeToString()


@pytest.mark.compiler
def test_gap_table_matches_every_convolution_with_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    onnx, model_bytes = _small_cnn()
    func = graph.from_onnx(onnx.load_from_string(model_bytes))
    exe = ri.compile_relax(None, func, "llvm", None)
    x = np.random.default_rng(1).standard_normal((1, 16, 16, 16)).astype("float32")
    sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(exe(x=x), sess.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)

    def options(prefix):
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.enable_profiling = True
        so.profile_file_prefix = prefix
        return so

    gap = model_gap.gap_table(exe, model_bytes, {"x": x}, ort, options, number=3)
    rows = {r["key"]: r for r in gap["rows"]}
    convs = [r for r in gap["rows"] if r["key"].startswith("conv ")]
    # three convolutions: 3x3 (relu), 3x3 with the residual, 1x1 stride 2
    assert sorted(r["key"] for r in convs) == [
        "conv 1x1 16->32 /2 8x8",
        "conv 3x3 16->16 16x16",
        "conv 3x3 16->16 16x16 +res",
    ]
    for r in convs:  # matched: a call of ours and a node of onnxruntime's
        assert r["calls"] == 1 and r["nodes"] == 1
        assert r["ours_ms"] > 0 and r["ort_ms"] > 0 and r["our_funcs"]
        assert r["gap_ms"] == pytest.approx(r["ours_ms"] - r["ort_ms"])
    assert rows["max pooling"]["calls"] == 1 and rows["dense"]["calls"] == 1
    gaps = [r["gap_ms"] for r in gap["rows"]]
    assert gaps == sorted(gaps, reverse=True)
    assert gap["ours_total_ms"] == pytest.approx(sum(r["ours_ms"] for r in gap["rows"]))
    text = model_gap.format_gap(gap)
    assert "conv 3x3 16->16 16x16 +res" in text and "total (kernels)" in text
