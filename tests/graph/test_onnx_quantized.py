"""Quantized ONNX models: QDQ models written by onnxruntime's quantize_static (per tensor
and per channel), QLinearConv / QLinearMatMul, ConvInteger / MatMulInteger and
DynamicQuantizeLinear import, compile and match onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

import metaschedule as ms

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

TARGET = "llvm -num-cores=2"
RNG = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


def _model(nodes, inputs, outputs, inits, opset=17):
    graph = helper.make_graph(nodes, "q", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _ort(model_or_path, feeds):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    src = model_or_path if isinstance(model_or_path, str) else model_or_path.SerializeToString()
    sess = ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _compile(model):
    mod = ms.graph.from_onnx(model)
    exe = ms.relax_integration.compile_relax(ms.Database.create("memory"), mod, TARGET, None)
    return mod, exe


def _small_cnn():
    """conv+relu, conv+relu, a residual add, a depthwise stride-2 conv+relu, flatten, Gemm."""

    def w(name, *shape, s=0.3):
        return numpy_helper.from_array((RNG.standard_normal(shape) * s).astype(np.float32), name)

    inits = [
        w("w1", 8, 3, 3, 3),
        w("b1", 8, s=0.1),
        w("w2", 8, 8, 3, 3, s=0.15),
        w("b2", 8, s=0.1),
        w("w3", 8, 1, 3, 3),
        w("b3", 8, s=0.1),
        w("wf", 10, 8 * 8 * 8, s=0.05),
        w("bf", 10, s=0.1),
        numpy_helper.from_array(np.array([1, -1], np.int64), "shape"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Add", ["r1", "r2"], ["s"]),
        helper.make_node(
            "Conv", ["s", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1], group=8, strides=[2, 2]
        ),
        helper.make_node("Relu", ["c3"], ["r3"]),
        helper.make_node("Reshape", ["r3", "shape"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        inits,
    )


@pytest.mark.compiler
@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
def test_qdq_cnn_from_quantize_static_matches_onnxruntime(tmp_path, per_channel):
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self):
            batches = [RNG.standard_normal((1, 3, 16, 16)).astype(np.float32) for _ in range(8)]
            self.it = iter({"x": b} for b in batches)

        def get_next(self):
            return next(self.it, None)

    fp32, int8 = str(tmp_path / "cnn.onnx"), str(tmp_path / "cnn_int8.onnx")
    onnx.save(_small_cnn(), fp32)
    quantize_static(
        fp32,
        int8,
        Reader(),
        quant_format=QuantFormat.QDQ,
        per_channel=per_channel,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
    )
    mod, exe = _compile(int8)
    lowered = ms.graph.lower_model(mod, {"conv2d": "NHWC"})
    fused = [s.ops for s in lowered.steps if "qnn_conv2d" in s.ops or "qnn_matmul" in s.ops]
    assert len(fused) == 4 and all(ops[1] == "requantize" for ops in fused), fused
    y_scale = float(
        next(
            numpy_helper.to_array(i)
            for i in onnx.load(int8).graph.initializer
            if i.name == "y_scale"
        )
    )
    for _ in range(3):
        x = RNG.standard_normal((1, 3, 16, 16)).astype(np.float32)
        (want,) = _ort(int8, {"x": x})
        got = exe(x=x)
        assert np.abs(got - want).max() <= y_scale * 1.001  # within one quantization step


def _qlinear_model():
    """QuantizeLinear -> QLinearConv (per-channel) -> reshape -> QLinearMatMul, uint8 out."""
    w = RNG.integers(-128, 128, (6, 3, 3, 3)).astype(np.int8)
    b = RNG.integers(-128, 128, (6 * 4 * 4, 5)).astype(np.int8)
    f32 = np.float32
    inits = [
        numpy_helper.from_array(f32(0.05), "xs"),
        numpy_helper.from_array(np.uint8(128), "xz"),
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(RNG.uniform(0.002, 0.01, 6).astype(f32), "ws"),
        numpy_helper.from_array(np.zeros(6, np.int8), "wz"),
        numpy_helper.from_array(f32(0.04), "cs"),
        numpy_helper.from_array(np.uint8(100), "cz"),
        numpy_helper.from_array(RNG.integers(-500, 500, 6).astype(np.int32), "cb"),
        numpy_helper.from_array(np.array([1, -1], np.int64), "shape"),
        numpy_helper.from_array(b, "b"),
        numpy_helper.from_array(f32(0.004), "bs"),
        numpy_helper.from_array(np.int8(0), "bz"),
        numpy_helper.from_array(f32(0.5), "ys"),
        numpy_helper.from_array(np.uint8(120), "yz"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node(
            "QLinearConv",
            ["xq", "xs", "xz", "w", "ws", "wz", "cs", "cz", "cb"],
            ["c"],
            pads=[1, 1, 1, 1],
            strides=[2, 2],
        ),
        helper.make_node("Reshape", ["c", "shape"], ["f"]),
        helper.make_node("QLinearMatMul", ["f", "cs", "cz", "b", "bs", "bz", "ys", "yz"], ["y"]),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 5])],
        inits,
    )


@pytest.mark.compiler
def test_qlinear_conv_and_matmul_equal_onnxruntime():
    model = _qlinear_model()
    _, exe = _compile(model)
    for _ in range(3):
        x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32) * 3
        (want,) = _ort(model, {"x": x})
        np.testing.assert_array_equal(exe(x=x), want)


@pytest.mark.compiler
def test_dynamic_quantize_matmul_integer_and_conv_integer_equal_onnxruntime():
    b = RNG.integers(-128, 128, (16, 6)).astype(np.int8)
    w = RNG.integers(0, 256, (4, 2, 3, 3)).astype(np.uint8)
    inits = [
        numpy_helper.from_array(b, "b"),
        numpy_helper.from_array(np.int8(0), "bz"),
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(np.uint8(3), "cz"),
        numpy_helper.from_array(np.uint8(130), "wz"),
    ]
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
        helper.make_node("MatMulInteger", ["xq", "b", "xz", "bz"], ["y"]),
        helper.make_node("ConvInteger", ["c", "w", "cz", "wz"], ["z"], pads=[1, 1, 1, 1]),
    ]
    model = _model(
        nodes,
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16]),
            helper.make_tensor_value_info("c", TensorProto.UINT8, [1, 2, 5, 5]),
        ],
        [
            helper.make_tensor_value_info("xq", TensorProto.UINT8, [4, 16]),
            helper.make_tensor_value_info("xs", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("xz", TensorProto.UINT8, []),
            helper.make_tensor_value_info("y", TensorProto.INT32, [4, 6]),
            helper.make_tensor_value_info("z", TensorProto.INT32, [1, 4, 5, 5]),
        ],
        inits,
    )
    _, exe = _compile(model)
    for shift in (0.0, 2.0):  # a range around zero, and one above it (zero point 0)
        x = (RNG.standard_normal((4, 16)) + shift).astype(np.float32)
        c = RNG.integers(0, 256, (1, 2, 5, 5)).astype(np.uint8)
        want = _ort(model, {"x": x, "c": c})
        got = exe(x=x, c=c)
        for g, e in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g).reshape(e.shape), e)


def test_quantized_operators_are_listed():
    names = set(ms.graph.supported_ops())
    assert {
        "QuantizeLinear",
        "DequantizeLinear",
        "QLinearConv",
        "QLinearMatMul",
        "MatMulInteger",
        "ConvInteger",
        "DynamicQuantizeLinear",
    } <= names


def test_requantize_epilogue_replaces_quantize_of_dequantize():
    model = _qlinear_model()
    mod = ms.graph.from_onnx(model)
    ops = [c.op for c in ms.graph.optimize(mod).calls]
    assert ops.count("requantize") == 2 and "dequantize" not in ops


def test_a_computed_weight_is_a_clear_error():
    nodes = [helper.make_node("QLinearMatMul", ["a", "s", "z", "b", "s", "z", "s", "z"], ["y"])]
    inits = [
        numpy_helper.from_array(np.float32(0.1), "s"),
        numpy_helper.from_array(np.uint8(0), "z"),
    ]
    model = _model(
        nodes,
        [
            helper.make_tensor_value_info("a", TensorProto.UINT8, [2, 4]),
            helper.make_tensor_value_info("b", TensorProto.UINT8, [4, 3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [2, 3])],
        inits,
    )
    with pytest.raises(
        ms.graph.UnsupportedOperatorError, match="QLinearMatMul.*must be a constant"
    ):
        ms.graph.from_onnx(model)
