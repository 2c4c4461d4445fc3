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


# ----------------------------------------------------------------------------- ResNet-18
def _calibrated(fp32_path: str, int8_path: str, shape, fmt: str, per_channel: bool) -> None:
    """``fp32_path`` quantized by onnxruntime's quantize_static (u8 activations, s8
    weights) on four random batches."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    rng = np.random.default_rng(11)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter({"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(4))

        def get_next(self):
            return next(self.it, None)

    quantize_static(
        fp32_path,
        int8_path,
        Reader(),
        quant_format=QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator,
        per_channel=per_channel,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
    )


@pytest.fixture(scope="module")
def resnet18_fp32(tmp_path_factory):
    """A small ResNet-18 (width 16, 32x32 input, 10 classes) exported to ONNX."""
    import warnings

    torch = pytest.importorskip("torch")
    from metaschedule.testing import models

    module, shape = models.resnet18(torch, width=16, image=32, classes=10)
    path = str(tmp_path_factory.mktemp("resnet18") / "resnet18.onnx")
    x = torch.from_numpy(np.zeros(shape, np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module, (x,), path, opset_version=17, input_names=["x"], output_names=["y"],
            dynamo=False,
        )  # fmt: skip
    return path, shape


@pytest.mark.compiler
@pytest.mark.parametrize(
    "fmt, per_channel",
    [("qdq", False), ("qdq", True), ("qoperator", True)],
    ids=["qdq_per_tensor", "qdq_per_channel", "qoperator"],
)
def test_resnet18_from_quantize_static_matches_onnxruntime(tmp_path, resnet18_fp32, fmt,
                                                           per_channel):  # fmt: skip
    """Every convolution, residual add, pooling and the classifier run on 8-bit tensors
    (one quantize of the input, one dequantize of the logits), and the logits equal
    onnxruntime's (its own QDQ fusions: QLinearConv, QLinearAdd, QLinearGlobalAveragePool,
    QGemm), within one quantization step."""
    fp32, shape = resnet18_fp32
    int8 = str(tmp_path / "resnet18_int8.onnx")
    _calibrated(fp32, int8, shape, fmt, per_channel)
    mod, exe = _compile(int8)
    ops = [c.op for c in ms.graph.optimize(mod).calls]
    assert ops.count("qnn_conv2d") == 20 and ops.count("qnn_add") == 8, ops
    assert ops.count("quantize") == 1 and ops.count("dequantize") == 1, ops
    assert "add" not in ops and "global_avg_pool2d" not in ops
    y_scale = float(
        next(
            numpy_helper.to_array(i)
            for i in onnx.load(int8).graph.initializer
            if i.name.startswith("y_scale")
        )
    )
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = rng.standard_normal(shape).astype(np.float32)
        (want,) = _ort(int8, {"x": x})
        assert np.abs(exe(x=x) - want).max() <= y_scale * 1.001


# ----------------------------------------------------------------------------- rewrites
def _qdq_unary_model(op_nodes, x_shape, y_shape, out_scale=0.05, out_zp=7, dtype=np.uint8):
    """x (float) -> Q(0.05, 7) -> DQ -> op_nodes ('d' -> 'o') -> Q(out) -> DQ -> y."""
    inits = [
        numpy_helper.from_array(np.float32(0.05), "s"),
        numpy_helper.from_array(dtype(7), "z"),
        numpy_helper.from_array(np.float32(out_scale), "so"),
        numpy_helper.from_array(dtype(out_zp), "zo"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
        *op_nodes,
        helper.make_node("QuantizeLinear", ["o", "so", "zo"], ["qo"]),
        helper.make_node("DequantizeLinear", ["qo", "so", "zo"], ["y"]),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
        inits,
    )


@pytest.mark.compiler
@pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["u8", "i8"])
def test_qdq_max_pool_and_flatten_run_on_8_bits(dtype):
    """DQ -> MaxPool -> Q and DQ -> Flatten -> Q with the same parameters are the operator
    on the 8-bit tensor (padding the lowest value); with another output scale the max pool
    stays in float."""
    pool = helper.make_node(
        "MaxPool", ["d"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
    )
    requant = [
        helper.make_node("QuantizeLinear", ["p", "s", "z"], ["pq"]),
        helper.make_node("DequantizeLinear", ["pq", "s", "z"], ["pd"]),
    ]
    flatten = helper.make_node("Flatten", ["pd"], ["o"])
    same = _qdq_unary_model([pool, *requant, flatten], [1, 4, 8, 8], [1, 64], 0.05, 7, dtype)
    ops = [c.op for c in ms.graph.optimize(ms.graph.from_onnx(same)).calls]
    assert ops == ["quantize", "max_pool2d", "reshape", "dequantize"], ops
    other = _qdq_unary_model(
        [helper.make_node("MaxPool", ["d"], ["o"], kernel_shape=[2, 2], strides=[2, 2])],
        [1, 4, 8, 8], [1, 4, 4, 4], 0.07, 7, dtype,
    )  # fmt: skip
    assert "dequantize" in [c.op for c in ms.graph.optimize(ms.graph.from_onnx(other)).calls[:3]]
    for model in (same, other):
        _, exe = _compile(model)
        for _ in range(2):
            x = (RNG.standard_normal((1, 4, 8, 8)) * 4 - 1).astype(np.float32)
            (want,) = _ort(model, {"x": x})
            np.testing.assert_array_equal(exe(x=x).reshape(want.shape), want)


@pytest.mark.compiler
def test_qdq_global_average_pool_is_integer_and_equals_onnxruntime():
    """DQ -> GlobalAveragePool -> Q: an int32 sum, minus the zero point's, requantized
    (onnxruntime's QLinearGlobalAveragePool), equal to onnxruntime's."""
    model = _qdq_unary_model(
        [helper.make_node("GlobalAveragePool", ["d"], ["o"])], [1, 6, 7, 5], [1, 6, 1, 1], 0.013, 3
    )
    ops = [c.op for c in ms.graph.optimize(ms.graph.from_onnx(model)).calls]
    assert "global_avg_pool2d" not in ops and "requantize" in ops, ops
    _, exe = _compile(model)
    for _ in range(4):
        x = (RNG.standard_normal((1, 6, 7, 5)) * 3).astype(np.float32)
        (want,) = _ort(model, {"x": x})
        np.testing.assert_array_equal(exe(x=x), want)


def _add_model(qoperator: bool, a_shape, b_shape, dtype=np.uint8):
    """Two 8-bit inputs added at scales 0.031 (zp 9) and 0.017 (zp 200 / -50) into
    scale 0.043 (zp 30): com.microsoft QLinearAdd, or its QDQ form."""
    elem = TensorProto.UINT8 if dtype == np.uint8 else TensorProto.INT8
    zb = 200 if dtype == np.uint8 else -50
    inits = [
        numpy_helper.from_array(np.float32(0.031), "sa"),
        numpy_helper.from_array(dtype(9), "za"),
        numpy_helper.from_array(np.float32(0.017), "sb"),
        numpy_helper.from_array(dtype(zb), "zb"),
        numpy_helper.from_array(np.float32(0.043), "sc"),
        numpy_helper.from_array(dtype(30), "zc"),
    ]
    if qoperator:
        nodes = [
            helper.make_node(
                "QLinearAdd", ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["c"],
                domain="com.microsoft",
            )
        ]  # fmt: skip
    else:
        nodes = [
            helper.make_node("DequantizeLinear", ["a", "sa", "za"], ["da"]),
            helper.make_node("DequantizeLinear", ["b", "sb", "zb"], ["db"]),
            helper.make_node("Add", ["da", "db"], ["s"]),
            helper.make_node("QuantizeLinear", ["s", "sc", "zc"], ["c"]),
        ]
    model = _model(
        nodes,
        [
            helper.make_tensor_value_info("a", elem, a_shape),
            helper.make_tensor_value_info("b", elem, b_shape),
        ],
        [helper.make_tensor_value_info("c", elem, None)],
        inits,
    )
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


@pytest.mark.compiler
@pytest.mark.parametrize("qoperator", [False, True], ids=["qdq", "qlinear_add"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["u8", "i8"])
def test_quantized_add_equals_onnxruntime_qlinear_add(qoperator, dtype):
    """DQ -> Add -> Q (and com.microsoft QLinearAdd) is one ``qnn_add`` on the 8-bit
    tensors, bit-equal to onnxruntime's QLinearAdd on every input pair (all 256 x 256
    values), and to its numpy reference; a broadcast operand too."""
    info = np.iinfo(dtype)
    grid = np.arange(info.min, info.max + 1).astype(dtype)
    a, b = (np.ascontiguousarray(v.reshape(1, 256, 256)) for v in np.meshgrid(grid, grid))
    model = _add_model(qoperator, [1, 256, 256], [1, 256, 256], dtype)
    mod = ms.graph.optimize(ms.graph.from_onnx(model))
    assert [c.op for c in mod.calls] == ["qnn_add"]
    _, exe = _compile(model)
    (want,) = _ort(model, {"a": a, "b": b})
    np.testing.assert_array_equal(exe(a=a, b=b), want)
    call = mod.calls[0]
    np.testing.assert_array_equal(ms.graph.get_op("qnn_add").ref([a, b], call.attr), want)
    model = _add_model(qoperator, [2, 3, 4], [1, 3, 1], dtype)
    _, exe = _compile(model)
    a = RNG.integers(info.min, info.max + 1, (2, 3, 4)).astype(dtype)
    b = RNG.integers(info.min, info.max + 1, (1, 3, 1)).astype(dtype)
    (want,) = _ort(model, {"a": a, "b": b})
    np.testing.assert_array_equal(exe(a=a, b=b), want)


def test_com_microsoft_operators_are_listed_and_others_rejected():
    names = set(ms.graph.supported_ops())
    assert {"com.microsoft.QLinearAdd", "com.microsoft.QGemm"} <= names
    node = helper.make_node("QLinearSigmoid", ["a"], ["b"], domain="com.microsoft")
    model = _model(
        [node],
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [2])],
        [helper.make_tensor_value_info("b", TensorProto.UINT8, [2])],
        [],
    )
    with pytest.raises(ms.graph.UnsupportedOperatorError, match="com.microsoft.QLinearSigmoid"):
        ms.graph.from_onnx(model)


@pytest.mark.compiler
def test_three_input_channels_are_padded_to_four_for_the_dot_product():
    """A QLinearConv on 3 channels (an RGB image) with symmetric weights reads 4: the
    data padded with its zero point, the weight with zero channels; the default
    schedule then tensorizes it where the host has an exact dot product, and it equals
    onnxruntime."""
    from metaschedule.graph.schedule_quantized import exact_dot_product
    from metaschedule.target import Target

    f32 = np.float32
    inits = [
        numpy_helper.from_array(f32(0.05), "xs"),
        numpy_helper.from_array(np.uint8(128), "xz"),
        numpy_helper.from_array(RNG.integers(-128, 128, (16, 3, 3, 3)).astype(np.int8), "w"),
        numpy_helper.from_array(RNG.uniform(0.002, 0.01, 16).astype(f32), "ws"),
        numpy_helper.from_array(np.zeros(16, np.int8), "wz"),
        numpy_helper.from_array(f32(0.3), "ys"),
        numpy_helper.from_array(np.uint8(100), "yz"),
    ]
    node = helper.make_node(
        "QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], pads=[1, 1, 1, 1]
    )
    model = _model(
        [node],
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 16, 8, 8])],
        inits,
    )
    mod = ms.graph.optimize(ms.graph.from_onnx(model))
    conv = next(c for c in mod.calls if c.op == "qnn_conv2d")
    assert mod.producers()[conv.args[0]].op == "pad"
    assert mod.constants[conv.args[1]].shape == (16, 4, 3, 3)
    x = RNG.integers(0, 256, (1, 3, 8, 8)).astype(np.uint8)
    _, exe = _compile(model)
    np.testing.assert_array_equal(exe(x=x), _ort(model, {"x": x})[0])
    if exact_dot_product(Target(TARGET), "uint8", "int8") is None:
        return  # no exact u8 x s8 dot product on this host: the vector schedule
    lowered = ms.graph.lower_model(mod, {"conv2d": "NHWC"})
    step = next(s for s in lowered.steps if "qnn_conv2d" in s.ops)
    text = str(ms.graph.default_schedule(lowered.funcs[step.func], TARGET).mod["main"])
    assert any(f"ms_{n}(" in text for n in ms.tir.TensorIntrin.names())
