"""Quantized convolutions (NHWC, NCHW, grouped, depthwise) equal to numpy, by the
interpreter and compiled; with their requantize epilogue equal to onnxruntime's
QLinearConv, ConvInteger, QuantizeLinear and DequantizeLinear."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from metaschedule import te
from metaschedule.codegen import build
from metaschedule.te import ops
from metaschedule.tir.interpreter import interpret

RNG = np.random.default_rng(23)
HAS_ORT = importlib.util.find_spec("onnxruntime") is not None and (
    importlib.util.find_spec("onnx") is not None
)
needs_ort = pytest.mark.skipif(not HAS_ORT, reason="needs onnx and onnxruntime")


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


def ints(shape, dtype):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


def wrap32(x: np.ndarray) -> np.ndarray:
    return ((x.astype(np.int64) + 2**31) % 2**32 - 2**31).astype(np.int32)


def conv_ref(x, w, za, zw, bias, stride, pads, dilation, groups):
    """int64 NCHW/OIHW convolution of ``x - za`` (padded with zeros) by ``w - zw``."""
    t, l, b, r = pads
    xp = np.pad(x.astype(np.int64) - za, ((0, 0), (0, 0), (t, b), (l, r)))
    wf = w.astype(np.int64) - zw
    N, C, H, W = xp.shape
    F, cg, KH, KW = wf.shape
    OH = (H - dilation * (KH - 1) - 1) // stride + 1
    OW = (W - dilation * (KW - 1) - 1) // stride + 1
    out = np.zeros((N, F, OH, OW), np.int64)
    fg = F // groups
    for f in range(F):
        g = f // fg
        for ky in range(KH):
            for kx in range(KW):
                y0, x0 = ky * dilation, kx * dilation
                win = xp[:, g * cg : (g + 1) * cg, y0 : y0 + stride * OH : stride][
                    ..., x0 : x0 + stride * OW : stride
                ]
                out[:, f] += np.einsum("nchw,c->nhw", win, wf[f, :, ky, kx])
    if bias is not None:
        out += bias.reshape(1, -1, 1, 1)
    return wrap32(out)


def run_both(func, *arrays):
    a1 = [x.copy() for x in arrays]
    interpret(func, *a1)
    a2 = [x.copy() for x in arrays]
    build(func, "llvm -num-cores=2")(*a2)
    return a1[-1], a2[-1]


CASES = [  # (data dtype, za, zw, stride, pads, dilation, groups, bias)
    ("uint8", 0, 0, 1, (0, 0, 0, 0), 1, 1, False),
    ("uint8", 131, 0, 1, (1, 1, 1, 1), 1, 1, True),
    ("int8", -7, 3, 2, (1, 0, 2, 1), 1, 1, True),
    ("uint8", 5, -2, 1, (2, 2, 2, 2), 2, 2, False),
    ("int8", 9, 0, 1, (1, 1, 1, 1), 1, 8, True),  # depthwise
]


@pytest.mark.compiler
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-za{c[1]}-zw{c[2]}-g{c[6]}")
def test_quantized_conv2d_equals_numpy(layout, case):
    dtype, za, zw, stride, pads, dil, groups, has_bias = case
    N, C, H, W, F = 1, 8, 9, 10, 8
    xv, wv = ints((N, C, H, W), dtype), ints((F, C // groups, 3, 3), "int8")
    bv = ints((F,), "int16").astype("int32") if has_bias else None
    want = conv_ref(xv, wv, za, zw, bv, stride, pads, dil, groups)
    bias = te.placeholder((F,), "int32", name="bias") if has_bias else None
    if layout == "NCHW":
        x = te.placeholder(xv.shape, dtype, name="X")
        w = te.placeholder(wv.shape, "int8", name="W")
        out = ops.quantized_conv2d_nchw(x, w, za, zw, bias, stride, pads, dil, groups)
        args = [xv, wv]
    else:
        x = te.placeholder((N, H, W, C), dtype, name="X")
        w = te.placeholder((3, 3, C // groups, F), "int8", name="W")
        out = ops.quantized_conv2d_nhwc(x, w, za, zw, bias, stride, pads, dil, groups)
        args = [xv.transpose(0, 2, 3, 1).copy(), wv.transpose(2, 3, 1, 0).copy()]
        want = want.transpose(0, 2, 3, 1)
    tensors = [x, w] + ([bias] if has_bias else []) + [out]
    func = te.create_prim_func(tensors)
    arrays = args + ([bv] if has_bias else []) + [np.zeros(out.shape, np.int32)]
    for got in run_both(func, *arrays):
        np.testing.assert_array_equal(got, want)


@pytest.mark.compiler
@pytest.mark.parametrize("multiplier", [1, 2])
def test_quantized_depthwise_nhwc_equals_numpy(multiplier):
    N, C, H, W, M = 1, 6, 7, 7, multiplier
    xv, wv = ints((N, H, W, C), "uint8"), ints((3, 3, C, M), "int8")
    x = te.placeholder(xv.shape, "uint8", name="X")
    w = te.placeholder(wv.shape, "int8", name="W")
    out = ops.quantized_depthwise_conv2d_nhwc(x, w, 100, 2, padding=1, stride=2)
    func = te.create_prim_func([x, w, out])
    # as OIHW with groups = C: output channel c * M + m reads input channel c
    oihw = wv.transpose(2, 3, 0, 1).reshape(C * M, 1, 3, 3)
    want = conv_ref(xv.transpose(0, 3, 1, 2), oihw, 100, 2, None, 2, (1, 1, 1, 1), 1, C)
    for got in run_both(func, xv, wv, np.zeros(out.shape, np.int32)):
        np.testing.assert_array_equal(got, want.transpose(0, 2, 3, 1))


def test_folded_weight_sums_leave_one_reduction():
    x = te.placeholder((1, 8, 8, 16), "uint8", name="X")
    w = te.placeholder((3, 3, 16, 32), "int8", name="W")
    b = te.placeholder((32,), "int32", name="bias")
    out = ops.quantized_conv2d_nhwc(x, w, 128, 0, b, padding=1, weight_sums_in_bias=True)
    func = te.create_prim_func([x, w, b, out])
    text = func.script()
    assert "kernel_sum" not in text and "window_sum" not in text


def test_bad_inputs_are_named():
    x = te.placeholder((1, 4, 4, 8), "float32", name="X")
    w = te.placeholder((3, 3, 8, 8), "int8", name="W")
    with pytest.raises(TypeError, match="uint8 or int8 data"):
        ops.quantized_conv2d_nhwc(x, w)
    x8 = te.placeholder((1, 4, 4, 6), "uint8", name="X")
    with pytest.raises(ValueError, match="does not fit"):
        ops.quantized_conv2d_nhwc(x8, w)


# ----------------------------------------------------------------------------- onnxruntime
def _ort_run(nodes, inputs, outputs, inits, feeds):
    import onnxruntime as ort
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _onnx_type(dtype):
    from onnx import TensorProto

    return {"uint8": TensorProto.UINT8, "int8": TensorProto.INT8, "int32": TensorProto.INT32}[dtype]


@pytest.mark.compiler
@needs_ort
@pytest.mark.parametrize(
    "dtype,per_channel,groups,layout",
    [
        ("uint8", False, 1, "NCHW"),
        ("uint8", True, 1, "NHWC"),
        ("int8", True, 1, "NCHW"),
        ("uint8", True, 16, "NCHW"),  # depthwise
        ("int8", False, 16, "NHWC"),
    ],
)
def test_requantized_conv_equals_onnxruntime_qlinearconv(dtype, per_channel, groups, layout):
    from onnx import helper, numpy_helper

    N, C, H, W, F = 1, 16, 12, 12, 16
    cg = C // groups
    xv = ints((N, C, H, W), dtype)
    wv = ints((F, cg, 3, 3), "int8")
    bv = RNG.integers(-3000, 3000, F).astype(np.int32)
    x_scale, y_scale = np.float32(0.02), np.float32(0.25 if groups == 1 else 0.05)
    w_scale = (RNG.uniform(0.002, 0.006, F) if per_channel else np.array([0.004])).astype(
        np.float32
    )
    za = 120 if dtype == "uint8" else -7
    zy = 128 if dtype == "uint8" else -3
    w_zp = np.zeros(w_scale.shape, np.int8)
    inits = [
        numpy_helper.from_array(np.array(x_scale), "xs"),
        numpy_helper.from_array(np.array(za, dtype), "xz"),
        numpy_helper.from_array(wv, "w"),
        numpy_helper.from_array(w_scale if per_channel else w_scale.reshape(()), "ws"),
        numpy_helper.from_array(w_zp if per_channel else w_zp.reshape(()), "wz"),
        numpy_helper.from_array(np.array(y_scale), "ys"),
        numpy_helper.from_array(np.array(zy, dtype), "yz"),
        numpy_helper.from_array(bv, "b"),
    ]
    node = helper.make_node(
        "QLinearConv",
        ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
        ["y"],
        pads=[1, 1, 1, 1],
        strides=[1, 2] if groups == 1 else [1, 1],
        group=groups,
    )
    (want,) = _ort_run(
        [node],
        [helper.make_tensor_value_info("x", _onnx_type(dtype), list(xv.shape))],
        [helper.make_tensor_value_info("y", _onnx_type(dtype), None)],
        inits,
        {"x": xv},
    )
    assert len(np.unique(want)) > 50  # not a saturated block

    mult = np.array([ops.requantize_multiplier(x_scale, s, y_scale) for s in w_scale], np.float32)
    bias = te.placeholder((F,), "int32", name="bias")
    m = te.placeholder((F,), "float32", name="mult")
    strides = (1, 2) if groups == 1 else 1
    if layout == "NCHW":
        x = te.placeholder(xv.shape, dtype, name="X")
        w = te.placeholder(wv.shape, "int8", name="W")
        acc = ops.quantized_conv2d_nchw(x, w, za, 0, bias, strides, 1, 1, groups)
        axis, args = 1, [xv, wv]
    else:
        x = te.placeholder((N, H, W, C), dtype, name="X")
        w = te.placeholder((3, 3, cg, F), "int8", name="W")
        acc = ops.quantized_conv2d_nhwc(x, w, za, 0, bias, strides, 1, 1, groups)
        axis = 3
        args = [xv.transpose(0, 2, 3, 1).copy(), wv.transpose(2, 3, 1, 0).copy()]
        want = want.transpose(0, 2, 3, 1)
    multiplier = m if per_channel else float(mult[0])
    y = ops.requantize(acc, multiplier, zy, dtype, axis=axis)
    func = te.create_prim_func([x, w, bias] + ([m] if per_channel else []) + [y])
    arrays = args + [bv] + ([mult] if per_channel else []) + [np.zeros(y.shape, dtype)]
    for got in run_both(func, *arrays):
        np.testing.assert_array_equal(got, want)


@pytest.mark.compiler
@needs_ort
def test_conv_integer_equals_onnxruntime():
    from onnx import TensorProto, helper, numpy_helper

    xv, wv = ints((1, 4, 8, 8), "uint8"), ints((6, 4, 3, 3), "uint8")
    inits = [
        numpy_helper.from_array(wv, "w"),
        numpy_helper.from_array(np.array(77, np.uint8), "xz"),
        numpy_helper.from_array(np.array(140, np.uint8), "wz"),
    ]
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 1, 1, 1])
    (want,) = _ort_run(
        [node],
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
        inits,
        {"x": xv},
    )
    x = te.placeholder(xv.shape, "uint8", name="X")
    w = te.placeholder(wv.shape, "uint8", name="W")
    out = ops.quantized_conv2d_nchw(x, w, 77, 140, padding=1)
    func = te.create_prim_func([x, w, out])
    for got in run_both(func, xv, wv, np.zeros(out.shape, np.int32)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.compiler
@needs_ort
@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_quantize_dequantize_equal_onnxruntime(dtype):
    from onnx import TensorProto, helper, numpy_helper

    # values on and around the rounding ties of the scale, and beyond saturation
    scale = np.float32(0.05)
    zp = 10 if dtype == "uint8" else -4
    ties = (np.arange(-300, 300, dtype=np.float32) + 0.5) * scale
    xv = np.concatenate([ties, RNG.standard_normal(400).astype(np.float32) * 8]).reshape(4, 250)
    per_ch = np.array([0.01, 0.02, 0.03, 0.05], np.float32)
    inits = [
        numpy_helper.from_array(np.array(scale), "s"),
        numpy_helper.from_array(np.array(zp, dtype), "z"),
        numpy_helper.from_array(per_ch, "sc"),
        numpy_helper.from_array(np.full(4, zp, dtype), "zc"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
        helper.make_node("QuantizeLinear", ["x", "sc", "zc"], ["qc"], axis=0),
        helper.make_node("DequantizeLinear", ["qc", "sc", "zc"], ["d"], axis=0),
    ]
    q_type = _onnx_type(dtype)
    outs = [
        helper.make_tensor_value_info("q", q_type, None),
        helper.make_tensor_value_info("qc", q_type, None),
        helper.make_tensor_value_info("d", TensorProto.FLOAT, None),
    ]
    want_q, want_qc, want_d = _ort_run(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 250])],
        outs,
        inits,
        {"x": xv},
    )
    x = te.placeholder(xv.shape, "float32", name="X")
    sc = te.placeholder((4,), "float32", name="SC")
    q = ops.quantize_linear(x, float(scale), zp, out_dtype=dtype)
    func = te.create_prim_func([x, q])
    for got in run_both(func, xv, np.zeros(xv.shape, dtype)):
        np.testing.assert_array_equal(got, want_q)
    qc = ops.quantize_linear(x, sc, zp, axis=0, out_dtype=dtype)
    func = te.create_prim_func([x, sc, qc])
    for got in run_both(func, xv, per_ch, np.zeros(xv.shape, dtype)):
        np.testing.assert_array_equal(got, want_qc)
    qin = te.placeholder(xv.shape, dtype, name="Q")
    d = ops.dequantize_linear(qin, sc, zp, axis=0)
    func = te.create_prim_func([qin, sc, d])
    for got in run_both(func, want_qc, per_ch, np.zeros(xv.shape, np.float32)):
        np.testing.assert_array_equal(got, want_d)
