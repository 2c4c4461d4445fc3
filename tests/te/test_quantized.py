"""Quantized dense / matmul (u8 or s8 x s8 -> s32 with zero points) equal to numpy, by the
interpreter and compiled; a tensorized one; requantize equal to onnxruntime's QLinearMatMul."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from metaschedule import te, tir
from metaschedule.codegen import build
from metaschedule.codegen.c_intrin import usable_tensor_intrins
from metaschedule.te import ops
from metaschedule.tir.interpreter import interpret

RNG = np.random.default_rng(17)


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


def ints(shape, dtype):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


def wrap32(x: np.ndarray) -> np.ndarray:
    return ((x.astype(np.int64) + 2**31) % 2**32 - 2**31).astype(np.int32)


def run_both(func, *arrays):
    """The function's outputs by the interpreter and compiled (the last array is the output)."""
    a1 = [x.copy() for x in arrays]
    interpret(func, *a1)
    a2 = [x.copy() for x in arrays]
    build(func, "llvm -num-cores=2")(*a2)
    return a1[-1], a2[-1]


@pytest.mark.compiler
@pytest.mark.parametrize("a_dtype", ["uint8", "int8"])
@pytest.mark.parametrize("zps", [(0, 0), (3, -2), (128, 0), (0, 5)])
def test_quantized_dense_equals_numpy(a_dtype, zps):
    za, zw = zps
    m, n, k = 8, 24, 40
    x = te.placeholder((m, k), a_dtype, name="X")
    w = te.placeholder((n, k), "int8", name="W")
    bias = te.placeholder((n,), "int32", name="bias")
    out = ops.quantized_dense(x, w, za, zw, bias=bias)
    func = te.create_prim_func([x, w, bias, out])
    xv, wv, bv = ints((m, k), a_dtype), ints((n, k), "int8"), ints((n,), "int16").astype("int32")
    want = wrap32((xv.astype(np.int64) - za) @ (wv.astype(np.int64) - zw).T + bv)
    for got in run_both(func, xv, wv, bv, np.zeros((m, n), np.int32)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.compiler
def test_quantized_matmul_equals_numpy():
    m, n, k = 16, 8, 32
    a = te.placeholder((m, k), "int8", name="A")
    b = te.placeholder((k, n), "int8", name="B")
    out = ops.quantized_matmul(a, b, -5, 7)
    func = te.create_prim_func([a, b, out])
    av, bv = ints((m, k), "int8"), ints((k, n), "int8")
    want = wrap32((av.astype(np.int64) + 5) @ (bv.astype(np.int64) - 7))
    for got in run_both(func, av, bv, np.zeros((m, n), np.int32)):
        np.testing.assert_array_equal(got, want)


def test_without_zero_points_it_is_one_tensorizable_block():
    x = te.placeholder((64, 64), "uint8", name="X")
    w = te.placeholder((64, 64), "int8", name="W")
    func = te.create_prim_func([x, w, ops.quantized_dense(x, w)])
    sch = tir.Schedule(func)
    blk = sch.get_block("T_qdense")
    i, j, k = sch.get_loops(blk)
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i, j0, k0, j1, k1)
    sch.decompose_reduction(blk, k0)
    sch.tensorize(j1, "dot_16x4_vnni")
    xv, wv = ints((64, 64), "uint8"), ints((64, 64), "int8")
    want = wrap32(xv.astype(np.int64) @ wv.astype(np.int64).T)
    c = np.zeros((64, 64), np.int32)
    interpret(sch.mod["main"], xv, wv, c)
    np.testing.assert_array_equal(c, want)


def test_bad_dtypes_are_named():
    x = te.placeholder((4, 4), "float32", name="X")
    w = te.placeholder((4, 4), "int8", name="W")
    with pytest.raises(TypeError, match="uint8 or int8 activations"):
        ops.quantized_dense(x, w)


@pytest.mark.compiler
@pytest.mark.skipif(
    importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("onnx") is None,
    reason="needs onnx and onnxruntime",
)
@pytest.mark.parametrize("a_dtype,out_dtype", [("uint8", "uint8"), ("int8", "int8")])
def test_requantized_matmul_equals_onnxruntime_qlinearmatmul(a_dtype, out_dtype):
    """onnxruntime's kernels: u8 x s8 -> u8 and s8 x s8 -> s8."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    m, k, n = 8, 64, 16
    a_scale, b_scale, y_scale = 0.02, 0.005, 0.2  # outputs spread over ~100 values
    za = 120 if a_dtype == "uint8" else -7
    zb, zy = 0, (128 if out_dtype == "uint8" else -3)
    av, bv = ints((m, k), a_dtype), ints((k, n), "int8")
    inits = [
        numpy_helper.from_array(np.array(a_scale, np.float32), "a_scale"),
        numpy_helper.from_array(np.array(za, a_dtype), "a_zp"),
        numpy_helper.from_array(bv, "B"),
        numpy_helper.from_array(np.array(b_scale, np.float32), "b_scale"),
        numpy_helper.from_array(np.array(zb, np.int8), "b_zp"),
        numpy_helper.from_array(np.array(y_scale, np.float32), "y_scale"),
        numpy_helper.from_array(np.array(zy, out_dtype), "y_zp"),
    ]
    onnx_type = {"uint8": TensorProto.UINT8, "int8": TensorProto.INT8}
    y_type = onnx_type[out_dtype]
    node = helper.make_node(
        "QLinearMatMul",
        ["A", "a_scale", "a_zp", "B", "b_scale", "b_zp", "y_scale", "y_zp"],
        ["Y"],
    )
    graph = helper.make_graph(
        [node],
        "qmm",
        [helper.make_tensor_value_info("A", onnx_type[a_dtype], [m, k])],
        [helper.make_tensor_value_info("Y", y_type, [m, n])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {"A": av})
    assert len(np.unique(want)) > 50  # not a saturated block

    a = te.placeholder((m, k), a_dtype, name="A")
    b = te.placeholder((k, n), "int8", name="B")
    acc = ops.quantized_matmul(a, b, za, zb)
    mult = ops.requantize_multiplier(a_scale, b_scale, y_scale)
    y = ops.requantize(acc, mult, zy, out_dtype)
    func = te.create_prim_func([a, b, y])
    for got in run_both(func, av, bv, np.zeros((m, n), out_dtype)):
        np.testing.assert_array_equal(got, want)


def test_the_dot_products_are_usable_on_the_host_or_not_at_all():
    # the helper the tuner will use: a list of names, empty for an unknown ISA
    names = usable_tensor_intrins("llvm -num-cores=2")
    assert all(isinstance(x, str) for x in names)
