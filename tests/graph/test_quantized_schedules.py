"""The default schedules of the integer kernels (graph/schedule_quantized.py): the weight
packed to the dot product's layout and the reduction tensorized where the target has an
exact one, plain vector code elsewhere; every result equal to numpy (and to onnxruntime
through a model), on AVX2 and, where the host runs it, AVX512-VNNI."""

from __future__ import annotations

import numpy as np
import pytest

import metaschedule as ms
from metaschedule.codegen import build
from metaschedule.codegen.isa import host_arch, host_runs
from metaschedule.graph.schedule_quantized import (
    exact_dot_product,
    pack_quantized_weights,
)
from metaschedule.target import Target
from metaschedule.te import ops

te = ms.te
RNG = np.random.default_rng(11)
VNNI = "llvm -num-cores=2 -mcpu=icelake-server"
AVX2 = "llvm -num-cores=2 -mcpu=haswell"
AVX512 = "llvm -num-cores=2 -mcpu=x86-64-v4"  # AVX512-BW: only the saturating sequence


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


def _targets():
    """The targets this host runs: AVX2 and AVX512-BW (plain vector code), VNNI."""
    if host_arch() != "x86_64":
        return []
    out = [AVX2, AVX512, VNNI]
    return [pytest.param(t, id=t.split("=")[-1]) for t in out if host_runs(t)]


def _ints(shape, dtype):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


def _conv_ref(x, w, pad, stride=1, groups=1, nhwc=True, za=0, zw=0):
    """int64 conv2d of (x - za) and (w - zw); x NHWC/w HWIO or x NCHW/w OIHW."""
    if not nhwc:
        x, w = x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0)
    x = np.pad(x.astype(np.int64), ((0, 0), (pad, pad), (pad, pad), (0, 0)), constant_values=za)
    x = x - za
    w = w.astype(np.int64) - zw
    kh, kw, cg, f = w.shape
    oh = (x.shape[1] - kh) // stride + 1
    ow = (x.shape[2] - kw) // stride + 1
    fg = f // groups
    out = np.zeros((x.shape[0], oh, ow, f), np.int64)
    for g in range(groups):
        xs = x[..., g * cg : (g + 1) * cg]
        for a in range(kh):
            for b in range(kw):
                win = xs[:, a : a + stride * oh : stride, b : b + stride * ow : stride]
                out[..., g * fg : (g + 1) * fg] += win @ w[a, b, :, g * fg : (g + 1) * fg]
    return out if nhwc else out.transpose(0, 3, 1, 2)


def _run(tensors, inputs, target):
    """Default-schedule, build and run ``tensors`` (inputs..., output) on ``inputs``."""
    func = te.create_prim_func(tensors)
    sch = ms.graph.default_schedule(func, target)
    lib = build(sch.mod, target)
    out_t = tensors[-1]
    out = np.zeros(out_t.shape, out_t.dtype)
    packed = list(lib.pack_weights(*inputs, out)[:-1])
    lib(*packed, out)
    return out, sch


def _calls(sch) -> str:
    return str(sch.mod["main"])


# ----------------------------------------------------------------------------- plans


#: the dot product each target's default schedule calls (never the saturating vpmaddubsw)
DOT = {VNNI: "dot_16x4_vnni", AVX512: "dot_16x4_avx512_exact", AVX2: "dot_8x4_avx2_exact"}


def test_only_exact_dot_products_are_chosen():
    assert exact_dot_product(Target(VNNI), "uint8", "int8") == ("dot_16x4_vnni", 16)
    assert exact_dot_product(Target(AVX2), "uint8", "int8") == ("dot_8x4_avx2_exact", 8)
    assert exact_dot_product(Target(AVX512), "uint8", "int8") == ("dot_16x4_avx512_exact", 16)
    assert exact_dot_product(Target(VNNI), "int8", "int8") is None  # all are u8 x s8


def _qconv_nhwc(c=64, f=64, dtype="uint8", width=8):
    x = te.placeholder((1, 8, width, c), dtype, name="X")
    w = te.placeholder((3, 3, c, f), "int8", name="W")
    return te.create_prim_func([x, w, ops.quantized_conv2d_nhwc(x, w, padding=1)])


def test_a_vnni_tile_fills_the_register_file_and_narrower_ones_leave_room():
    """A vpdpbusd tile takes 28 of AVX-512's 32 registers as accumulators (its data come
    as embedded broadcasts); the two-instruction AVX512-BW sequence and AVX2 keep 16 and
    12 (temporaries)."""
    tiles = {}
    for target in (VNNI, AVX512, AVX2):
        _, plans = pack_quantized_weights(_qconv_nhwc(width=14), Target(target))
        (plan,) = plans.values()
        tiles[target] = (plan.rows, plan.vectors)
    assert tiles == {VNNI: (14, 2), AVX512: (7, 2), AVX2: (7, 1)}


@pytest.mark.compiler
@pytest.mark.skipif(not host_runs(VNNI), reason="the host has no AVX512-VNNI")
def test_the_28_accumulator_vnni_tile_equals_numpy():
    x = te.placeholder((1, 14, 14, 64), "uint8", name="X")
    w = te.placeholder((3, 3, 64, 64), "int8", name="W")
    xv, wv = _ints(x.shape, "uint8"), _ints(w.shape, "int8")
    out, sch = _run([x, w, ops.quantized_conv2d_nhwc(x, w, padding=1)], [xv, wv], VNNI)
    assert "ms_dot_16x4_vnni" in _calls(sch)
    np.testing.assert_array_equal(out, _conv_ref(xv, wv, 1))


def test_vnni_packs_the_weight_to_the_intrinsic_layout():
    func, plans = pack_quantized_weights(_qconv_nhwc(), Target(VNNI))
    (plan,) = plans.values()
    assert plan.intrin == "dot_16x4_vnni" and plan.lanes == 16
    v = plan.vectors  # [F / 16v, KH, KW, C / 4, v, 16, 4]
    assert func.params[1].static_shape() == (64 // (16 * v), 3, 3, 16, v, 16, 4)


def test_without_an_exact_intrinsic_the_weight_is_packed_by_channel_vectors():
    func, plans = pack_quantized_weights(_qconv_nhwc(dtype="int8"), Target(AVX2))
    (plan,) = plans.values()
    assert plan.intrin is None and plan.lanes == 8
    v = plan.lanes * plan.vectors
    assert func.params[1].static_shape() == (64 // v, 3, 3, 64, v)


def test_input_channels_not_a_multiple_of_4_are_not_tensorized():
    _, plans = pack_quantized_weights(_qconv_nhwc(c=6), Target(VNNI))
    assert [p.intrin for p in plans.values()] == [None]


def test_a_weight_that_is_not_layout_free_is_left_alone():
    func = _qconv_nhwc()
    assert pack_quantized_weights(func, Target(VNNI), layout_free=()) == (func, {})


@pytest.mark.parametrize("target", [VNNI, AVX512, AVX2])
def test_the_schedule_calls_the_targets_exact_intrinsic(target):
    assert f"ms_{DOT[target]}(" in _calls(ms.graph.default_schedule(_qconv_nhwc(), target))
    s8 = ms.graph.default_schedule(_qconv_nhwc(dtype="int8"), target)
    assert "ms_dot" not in _calls(s8)  # s8 activations: vector code


# ----------------------------------------------------------------------------- kernels


def _conv_case(kind):
    """(tensors, inputs, numpy reference) of a quantized conv of kind ``kind``."""
    if kind == "nhwc":
        x = te.placeholder((1, 9, 14, 32), "uint8", name="X")
        w = te.placeholder((3, 3, 32, 32), "int8", name="W")
        b = te.placeholder((32,), "int32", name="B")
        acc = ops.quantized_conv2d_nhwc(x, w, 3, 0, b, padding=1, weight_sums_in_bias=False)
        mult = float(np.float32(0.0007))
        out = ops.requantize(acc, mult, 5, "uint8")
        xv, wv, bv = _ints(x.shape, "uint8"), _ints(w.shape, "int8"), _ints((32,), "int16")
        bv = bv.astype(np.int32)
        conv = _conv_ref(xv, wv, 1, za=3) + bv
        v = np.clip(conv.astype(np.float32) * np.float32(mult), -5, 250)
        ref = (np.rint(v).astype(np.int32) + 5).astype(np.uint8)
        return [x, w, b, out], [xv, wv, bv], ref
    if kind == "nchw":
        x = te.placeholder((1, 32, 7, 10), "uint8", name="X")
        w = te.placeholder((32, 32, 3, 3), "int8", name="W")
        out = ops.quantized_conv2d_nchw(x, w, padding=1)
        xv, wv = _ints(x.shape, "uint8"), _ints(w.shape, "int8")
        return [x, w, out], [xv, wv], _conv_ref(xv, wv, 1, nhwc=False)
    if kind == "nchw_1x1":  # no padding stage: the input is copied channels last
        x = te.placeholder((1, 16, 5, 6), "uint8", name="X")
        w = te.placeholder((32, 16, 1, 1), "int8", name="W")
        out = ops.quantized_conv2d_nchw(x, w)
        xv, wv = _ints(x.shape, "uint8"), _ints(w.shape, "int8")
        return [x, w, out], [xv, wv], _conv_ref(xv, wv, 0, nhwc=False)
    if kind == "nhwc_s8_stride2":
        x = te.placeholder((1, 9, 9, 16), "int8", name="X")
        w = te.placeholder((3, 3, 16, 16), "int8", name="W")
        out = ops.quantized_conv2d_nhwc(x, w, -2, 1, padding=1, stride=2)
        xv, wv = _ints(x.shape, "int8"), _ints(w.shape, "int8")
        return [x, w, out], [xv, wv], _conv_ref(xv, wv, 1, stride=2, za=-2, zw=1)
    if kind == "grouped":
        x = te.placeholder((1, 6, 6, 32), "uint8", name="X")
        w = te.placeholder((3, 3, 8, 32), "int8", name="W")
        out = ops.quantized_conv2d_nhwc(x, w, padding=1, groups=4)
        xv, wv = _ints(x.shape, "uint8"), _ints(w.shape, "int8")
        return [x, w, out], [xv, wv], _conv_ref(xv, wv, 1, groups=4)
    assert kind == "depthwise"
    x = te.placeholder((1, 8, 8, 32), "uint8", name="X")
    w = te.placeholder((3, 3, 32, 1), "int8", name="W")
    out = ops.quantized_depthwise_conv2d_nhwc(x, w, 7, 0, padding=1)
    xv, wv = _ints(x.shape, "uint8"), _ints(w.shape, "int8")
    hwio = wv.reshape(3, 3, 1, 32)
    return [x, w, out], [xv, wv], _conv_ref(xv, hwio, 1, groups=32, za=7)


@pytest.mark.compiler
@pytest.mark.parametrize("target", _targets())
@pytest.mark.parametrize(
    "kind", ["nhwc", "nchw", "nchw_1x1", "nhwc_s8_stride2", "grouped", "depthwise"]
)
def test_quantized_conv_equals_numpy(target, kind):
    tensors, inputs, ref = _conv_case(kind)
    got, _ = _run(tensors, inputs, target)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.compiler
@pytest.mark.parametrize("target", _targets())
@pytest.mark.parametrize("op", ["dense", "matmul"])
def test_quantized_products_equal_numpy(target, op):
    m, n, k = 24, 64, 48
    a = te.placeholder((m, k), "uint8", name="A")
    if op == "dense":
        w = te.placeholder((n, k), "int8", name="W")
        out = ops.quantized_dense(a, w, 2, 0)
    else:
        w = te.placeholder((k, n), "int8", name="W")
        out = ops.quantized_matmul(a, w, 2, 0)
    av, wv = _ints(a.shape, "uint8"), _ints(w.shape, "int8")
    wt = wv.T if op == "dense" else wv
    ref = (av.astype(np.int64) - 2) @ wt.astype(np.int64)
    func = te.create_prim_func([a, w, out])
    got, sch = _run([a, w, out], [av, wv], target)
    np.testing.assert_array_equal(got, ref)
    assert f"ms_{DOT[target]}(" in _calls(sch)
    assert func is not None


# ----------------------------------------------------------------------------- graph


def _qlinear_conv_model(channels=32):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    c = channels
    f32 = np.float32
    inits = [
        numpy_helper.from_array(f32(0.05), "xs"),
        numpy_helper.from_array(np.uint8(128), "xz"),
        numpy_helper.from_array(_ints((c, c, 3, 3), "int8"), "w"),
        numpy_helper.from_array(RNG.uniform(0.001, 0.004, c).astype(f32), "ws"),
        numpy_helper.from_array(np.zeros(c, np.int8), "wz"),
        numpy_helper.from_array(f32(0.2), "ys"),
        numpy_helper.from_array(np.uint8(110), "yz"),
        numpy_helper.from_array(RNG.integers(-900, 900, c).astype(np.int32), "b"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node(
            "QLinearConv",
            ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
            ["y"],
            pads=[1, 1, 1, 1],
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "q",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 10, 10])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, c, 10, 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    assert onnx is not None
    return model


def _qnn_layouts(graph):
    return [c.attr.get("data_layout", "NCHW") for c in graph.calls if c.op == "qnn_conv2d"]


def test_convert_layout_takes_qnn_conv2d_to_nhwc_with_conv2d():
    mod = ms.graph.from_onnx(_qlinear_conv_model())
    assert _qnn_layouts(ms.graph.optimize(mod, {"conv2d": "NHWC"})) == ["NHWC"]
    assert _qnn_layouts(ms.graph.optimize(mod, {"qnn_conv2d": "NHWC"})) == ["NHWC"]
    kept = ms.graph.optimize(mod, {"conv2d": "NHWC", "qnn_conv2d": "NCHW"})
    assert _qnn_layouts(kept) == ["NCHW"]


@pytest.mark.compiler
@pytest.mark.parametrize("target", _targets())
@pytest.mark.parametrize("layouts", ["default", {"qnn_conv2d": "NCHW"}], ids=["nhwc", "nchw"])
def test_a_qlinear_conv_model_equals_onnxruntime(target, layouts):
    ort = pytest.importorskip("onnxruntime")
    model = _qlinear_conv_model()
    mod = ms.graph.from_onnx(model)
    exe = ms.relax_integration.compile_relax(
        ms.Database.create("memory"), mod, target, None, desired_layouts=layouts
    )
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    for _ in range(2):
        x = (RNG.standard_normal((1, 32, 10, 10)) * 3).astype(np.float32)
        (want,) = sess.run(None, {"x": x})
        np.testing.assert_array_equal(exe(x=x), want)
