"""from_onnx: models built with onnx.helper, compiled untuned, against onnxruntime."""

import graph_onnx_models as models
import numpy as np
import pytest

from metaschedule import graph
from metaschedule import relax_integration as ri
from metaschedule.graph import UnsupportedOperatorError

onnx = pytest.importorskip("onnx")


def _ort(model, feeds):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _input(model, seed=0):
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    return np.random.default_rng(seed).standard_normal(dims).astype("float32")


@pytest.mark.compiler
@pytest.mark.parametrize("make", [models.mlp, models.cnn, models.transformer])
def test_compile_untuned_matches_onnxruntime(make):
    model = make(onnx)
    x = _input(model)
    ref = _ort(model, {"x": x})[0]
    f = graph.from_onnx(model)
    np.testing.assert_allclose(graph.interpret(f, x)[0], ref, rtol=1e-4, atol=1e-5)
    exe = ri.compile_relax(None, f, "llvm", None)
    np.testing.assert_allclose(exe(x=x), ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(exe.run(x), ref, rtol=1e-4, atol=1e-5)


def test_cnn_imports_folded_and_fused():
    f = graph.from_onnx(models.cnn(onnx))
    assert "BatchNormalization" not in f.script()
    names = [t.task_name for t in ri.extract_tasks(f, "llvm")]
    # batch norm folded into the conv weights; bias + activation fused into each conv;
    # the convolutions run NHWC on CPUs, after one transpose of the input
    assert names == [
        "transpose",
        "fused_conv2d_add_relu",
        "fused_conv2d_add_clip",
        "fused_conv2d_add_relu_1",
        "max_pool2d",
        "global_avg_pool2d",
        "fused_matmul_add",
    ]


def test_shape_arithmetic_is_folded():
    f = graph.from_onnx(models.transformer(onnx))
    ops = {c.op for c in f.calls}
    assert not ops & {"take", "concat"}  # Shape/Gather/Concat became constants
    assert "layer_norm" in ops
    # the exporters' erf form of GELU is one call, fused with the matmul and bias before it
    opt = {c.op for c in graph.optimize(f).calls}
    assert "erf" not in opt and "gelu" in opt
    assert "fused_matmul_add_gelu" in [t.task_name for t in ri.extract_tasks(f, "llvm")]


def test_unsupported_operator_names_op_node_and_opset(tmp_path):
    from onnx import helper

    node = helper.make_node("Hardmax", ["x"], ["y"], name="the_hardmax")
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    with pytest.raises(
        UnsupportedOperatorError, match=r"Hardmax \(node 'the_hardmax', opset 15\) is not supported"
    ):
        graph.from_onnx(str(path))
    # exporters often leave names empty: the message says where the node is instead
    relu = helper.make_node("Relu", ["x"], ["r"])
    unnamed = helper.make_node("Hardmax", ["r"], ["y"])
    g = helper.make_graph([relu, unnamed], "g", list(g.input), list(g.output))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)]), path)
    with pytest.raises(
        UnsupportedOperatorError, match=r"Hardmax \(node #1 writing 'y', opset 15\) is not"
    ):
        graph.from_onnx(str(path))


def _zoo():
    """Operators the three models do not use, in one graph."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(3)
    inits = {
        "wt": (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype("float32"),
        "bt": rng.standard_normal(3).astype("float32"),
        "starts": np.array([1, 0], np.int64),
        "ends": np.array([5, 9], np.int64),
        "axes": np.array([2, 3], np.int64),
        "steps": np.array([1, 2], np.int64),
        "eshape": np.array([2, 3, 1, 1], np.int64),
        "idx": np.array([[0, 2], [1, 1]], np.int64),
        "zero": np.float32(0.0),
        "three": np.float32(3.0),
        "ax0": np.array([0], np.int64),
    }
    n = [
        helper.make_node(
            "ConvTranspose",
            ["x", "wt", "bt"],
            ["ct"],
            strides=[2, 2],
            pads=[1, 1, 1, 1],
            output_padding=[1, 1],
        ),  # [1,3,8,8]
        helper.make_node(
            "AveragePool",
            ["ct"],
            ["ap"],
            kernel_shape=[3, 3],
            strides=[2, 2],
            pads=[1, 1, 1, 1],
            ceil_mode=1,
        ),  # [1,3,5,5]
        helper.make_node("HardSwish", ["ap"], ["hs"]),
        helper.make_node("Sigmoid", ["ct"], ["sg"]),
        helper.make_node("Slice", ["sg", "starts", "ends", "axes", "steps"], ["sl"]),  # [1,3,4,4]
        helper.make_node("Tanh", ["sl"], ["th"]),
        helper.make_node("Expand", ["th", "eshape"], ["ex"]),  # [2,3,4,4]
        helper.make_node("Greater", ["ex", "zero"], ["gt"])
        if False
        else helper.make_node("Cast", ["ex"], ["ci"], to=onnx.TensorProto.INT32),
        helper.make_node("Cast", ["ci"], ["cf"], to=onnx.TensorProto.FLOAT),
        helper.make_node("Cast", ["ci"], ["cb"], to=onnx.TensorProto.BOOL),
        helper.make_node("Where", ["cb", "ex", "three"], ["wh"]),
        helper.make_node("ReduceSum", ["wh", "ax0"], ["rs"], keepdims=0),  # [3,4,4]
        helper.make_node("ReduceMax", ["rs"], ["rm"], axes=[2], keepdims=1),  # [3,4,1]
        helper.make_node("Squeeze", ["rm"], ["sq"]),  # [3,4]
        helper.make_node("Gather", ["sq", "idx"], ["ga"], axis=1),  # [3,2,2]
        helper.make_node("Unsqueeze", ["ga", "ax0"], ["us"]),  # [1,3,2,2]
        helper.make_node("Concat", ["us", "us"], ["cc"], axis=3),  # [1,3,2,4]
        helper.make_node("Sub", ["cc", "three"], ["sb"]),
        helper.make_node("Pow", ["sb", "three"], ["pw"]),
        helper.make_node("Softmax", ["hs"], ["sm"], axis=1),
    ]
    g = helper.make_graph(
        n,
        "zoo",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4, 4, 4])],
        [
            helper.make_tensor_value_info("pw", onnx.TensorProto.FLOAT, [1, 3, 2, 4]),
            helper.make_tensor_value_info("sm", onnx.TensorProto.FLOAT, [1, 3, 5, 5]),
            helper.make_tensor_value_info("cf", onnx.TensorProto.FLOAT, [2, 3, 4, 4]),
        ],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.compiler
def test_operator_zoo_matches_onnxruntime():
    model = _zoo()
    x = np.random.default_rng(0).standard_normal((1, 4, 4, 4)).astype("float32")
    refs = _ort(model, {"x": x})
    f = graph.from_onnx(model)
    for got, ref in zip(graph.interpret(f, x), refs):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    outs = ri.compile_relax(None, f, "llvm", None)(x)
    for got, ref in zip(outs, refs):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.compiler
def test_tuned_cnn_takes_weights_packed_at_compile_time(tmp_path):
    """Tuned schedules (default llvm space and postprocessors, RewriteLayout included) of
    every task: compile_relax packs the constant weights they take re-laid out, once, and
    the model still computes onnxruntime's result."""
    from metaschedule.schedule.prepacked import prepacked_args
    from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner

    model = models.cnn(onnx)
    x = _input(model)
    ref = _ort(model, {"x": x})[0]
    f = graph.from_onnx(model)
    tasks = ri.extract_tasks(f, "llvm")
    conv = next(t for t in tasks if t.task_name == "fused_conv2d_add_relu")
    assert conv.mod["main"].attrs["layout_free_buffers"] == [1, 2]  # weight, bias: constants
    db = ri.tune_relax(
        f,
        None,
        "llvm",
        str(tmp_path),
        max_trials_global=4 * len(tasks),
        max_trials_per_task=4,
        database="memory",
        num_trials_per_iter=4,
        cost_model="random",
        strategy="replay-trace",
        seed=0,
        builder=DummyBuilder(),
        runner=DummyRunner(),
    )
    exe = ri.compile_relax(db, f, "llvm", None)
    assert set(exe.sources.values()) == {"database"}
    packed = [k for k in exe.constants if "@" in k]
    assert packed, "no weight was packed at compile time"
    for t in tasks:
        sch = db.query_schedule(t.mod, t.target)
        for j, arg in prepacked_args(sch.mod["main"]).items():
            assert j in t.mod["main"].attrs["layout_free_buffers"]
            assert arg.original_shape == tuple(int(s) for s in t.mod["main"].params[j].shape)
    np.testing.assert_allclose(exe(x=x), ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("axes", [[], [1], [-1, 0]])
def test_reduce_sum_axes_input_empty_means_every_axis(axes):
    """ReduceSum (opset 13) takes ``axes`` as an input; an empty one reduces every axis."""
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype("float32")
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(axes, np.int64), "axes")],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    ref = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    out = graph.interpret(graph.from_onnx(model), x=x)
    got = out[0] if isinstance(out, (list, tuple)) else out
    assert np.shape(got) == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.compiler
def test_transformer_block_with_packed_weights_matches_onnxruntime():
    """A transformer block wide enough for the default schedule to take its projection
    weights in column panels (hidden 64, FFN 256: several vector blocks of columns),
    with 8-row register tiles, softmax and layer norm in vector lanes: onnxruntime's
    result."""
    model = models.transformer(onnx, seq=16, d=64, heads=4)
    x = _input(model, seed=3)
    ref = _ort(model, {"x": x})[0]
    f = graph.from_onnx(model)
    exe = ri.compile_relax(None, f, "llvm", None)
    packed = [k for k in exe.constants if "@" in k]  # weights re-laid out at compile time
    assert packed, "no matmul weight was packed"
    np.testing.assert_allclose(exe(x=x), ref, rtol=1e-4, atol=1e-5)
