"""from_onnx: the operators beyond the issue's list (activations, math, comparison and
logic, Pad, Resize/Upsample, Tile, more reductions and norms), each in an onnx.helper
model at the opsets where its signature changed, against onnxruntime: the numpy
reference and the compiled (untuned) model. One model (one compile) covers many ops."""

from __future__ import annotations

import numpy as np
import pytest

from metaschedule import graph
from metaschedule import relax_integration as ri
from metaschedule.graph import UnsupportedOperatorError

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

_NP2ONNX = {
    "float32": TensorProto.FLOAT,
    "int64": TensorProto.INT64,
    "bool": TensorProto.BOOL,
}


def _model(nodes, inputs, outputs, inits=None, opset=17):
    """``inputs``: name -> array; ``outputs``: names (their types are inferred by ORT)."""
    g = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info(k, _NP2ONNX[str(v.dtype)], v.shape)
            for k, v in inputs.items()
        ],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(model)  # the outputs' types, for ORT
    known = {v.name: v for v in [*inferred.graph.value_info, *inferred.graph.output]}
    for out in model.graph.output:
        if out.name in known and known[out.name].type.tensor_type.elem_type:
            out.type.CopyFrom(known[out.name].type)
    return model


def _check(model, inputs, compile_=True, rtol=1e-5, atol=1e-6):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    refs = sess.run(None, inputs)
    names = [o.name for o in model.graph.output]
    f = graph.from_onnx(model)
    results = {"interpret": graph.interpret(f, **inputs)}
    if compile_:
        exe = ri.compile_relax(None, f, "llvm", None)
        outs = exe(**inputs)
        results["compiled"] = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    for how, outs in results.items():
        assert len(outs) == len(refs)
        for name, got, ref in zip(names, outs, refs):
            got = np.asarray(got)
            assert got.shape == ref.shape, (how, name, got.shape, ref.shape)
            if ref.dtype.kind in "bi":
                assert got.dtype == ref.dtype, (how, name, got.dtype)
                np.testing.assert_array_equal(got, ref, err_msg=f"{how} {name}")
            else:
                np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, err_msg=f"{how} {name}")


def _rng(seed=0):
    return np.random.default_rng(seed)


@pytest.mark.compiler
def test_unary_math_and_activations():
    x = (_rng().standard_normal((2, 3, 4, 5)) * 3).astype("float32")
    x[0, 0, 0, :5] = [0.0, -25.0, 30.0, 1e-4, -1e-4]
    ties = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49], "float32")
    ops = [
        ("LeakyRelu", {"alpha": 0.2}),
        ("Elu", {"alpha": 0.7}),
        ("Selu", {}),
        ("Celu", {"alpha": 1.5}),
        ("ThresholdedRelu", {"alpha": 0.5}),
        ("Softplus", {}),
        ("Softsign", {}),
        ("Abs", {}),
        ("Neg", {}),
        ("Reciprocal", {}),
        ("Floor", {}),
        ("Ceil", {}),
        ("Sign", {}),
        ("Sin", {}),
        ("Cos", {}),
        ("Exp", {}),
    ]
    nodes = [helper.make_node(op, ["x"], [f"y_{op}"], **at) for op, at in ops]
    nodes += [
        helper.make_node("Abs", ["x"], ["ax"]),
        helper.make_node("Log", ["ax"], ["y_Log"]),
        helper.make_node("Round", ["t"], ["y_Round"]),
    ]
    outs = [f"y_{op}" for op, _ in ops] + ["y_Log", "y_Round"]
    model = _model(nodes, {"x": x, "t": ties}, outs, opset=17)
    _check(model, {"x": x, "t": ties}, rtol=2e-5, atol=2e-6)


@pytest.mark.compiler
def test_mish_opset18_and_torch_style_parts():
    x = (_rng(1).standard_normal((3, 8)) * 4).astype("float32")
    nodes = [
        helper.make_node("Mish", ["x"], ["m"]),
        helper.make_node("Softplus", ["x"], ["sp"]),  # what torch exports at opset 17
        helper.make_node("Tanh", ["sp"], ["th"]),
        helper.make_node("Mul", ["x", "th"], ["parts"]),
    ]
    _check(_model(nodes, {"x": x}, ["m", "parts"], opset=18), {"x": x}, rtol=2e-5, atol=2e-6)


@pytest.mark.compiler
def test_comparison_logic_variadic_and_prelu():
    rng = _rng(2)
    a = rng.integers(-2, 3, (2, 3, 4)).astype("float32")
    b = rng.integers(-2, 3, (4,)).astype("float32")
    c = rng.standard_normal((3, 1)).astype("float32")
    x = rng.standard_normal((2, 3, 4, 5)).astype("float32")
    inits = {"slope": np.array([0.1, -0.5, 2.0], "float32").reshape(3, 1, 1), "one": 0.25}
    inits["one"] = np.array([0.25], "float32")
    cmp = ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"]
    nodes = [helper.make_node(op, ["a", "b"], [f"y_{op}"]) for op in cmp]
    nodes += [
        helper.make_node("And", ["y_Less", "y_GreaterOrEqual"], ["y_And"]),
        helper.make_node("Or", ["y_Less", "y_Equal"], ["y_Or"]),
        helper.make_node("Xor", ["y_LessOrEqual", "y_Greater"], ["y_Xor"]),
        helper.make_node("Not", ["y_Equal"], ["y_Not"]),
        helper.make_node("Where", ["y_Not", "a", "b"], ["y_Where"]),
        helper.make_node("Sum", ["a", "b", "c"], ["y_Sum"]),
        helper.make_node("Mean", ["a", "b", "c"], ["y_Mean"]),
        helper.make_node("Max", ["a", "b", "c"], ["y_Max"]),
        helper.make_node("Min", ["a"], ["y_Min1"]),
        helper.make_node("PRelu", ["x", "slope"], ["y_PRelu"]),
        helper.make_node("PRelu", ["x", "one"], ["y_PRelu1"]),
    ]
    outs = [f"y_{op}" for op in cmp] + [
        "y_And", "y_Or", "y_Xor", "y_Not", "y_Where", "y_Sum", "y_Mean", "y_Max", "y_Min1",
        "y_PRelu", "y_PRelu1",
    ]  # fmt: skip
    feeds = {"a": a, "b": b, "c": c, "x": x}
    _check(_model(nodes, feeds, outs, inits, opset=13), feeds)


def _pad_nodes(opset):
    if opset < 11:
        return [
            helper.make_node("Pad", ["x"], ["p_c"], pads=[0, 0, 1, 2, 0, 0, 2, 1], value=1.5),
            helper.make_node("Pad", ["x"], ["p_r"], mode="reflect", pads=[0, 0, 2, 1, 0, 0, 1, 3]),
            helper.make_node("Pad", ["x"], ["p_e"], mode="edge", pads=[0, 1, 1, 0, 0, 0, 2, 2]),
        ], {}
    inits = {
        "pc": np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64),
        "pr": np.array([0, 0, 2, 1, 0, 0, 1, 3], np.int64),
        "pe": np.array([0, 1, 1, 0, 0, 0, 2, -1], np.int64),  # a negative pad crops
        "v": np.array(1.5, np.float32),
    }
    nodes = [
        helper.make_node("Pad", ["x", "pc", "v"], ["p_c"]),
        helper.make_node("Pad", ["x", "pr"], ["p_r"], mode="reflect"),
        helper.make_node("Pad", ["x", "pe"], ["p_e"], mode="edge"),
    ]
    if opset >= 18:
        inits["p2"] = np.array([1, 2, 3, 0], np.int64)
        inits["ax"] = np.array([-1, 2], np.int64)
        nodes.append(helper.make_node("Pad", ["x", "p2", "", "ax"], ["p_ax"], mode="reflect"))
    return nodes, inits


@pytest.mark.compiler
@pytest.mark.parametrize("opset", [2, 11, 18])
def test_pad_modes(opset):
    x = _rng(3).standard_normal((1, 2, 4, 5)).astype("float32")
    nodes, inits = _pad_nodes(opset)
    outs = [n.output[0] for n in nodes]
    _check(_model(nodes, {"x": x}, outs, inits, opset=opset), {"x": x}, compile_=opset != 11)


def _resize_model(opset, cases, x):
    nodes, inits, outs = [], {}, []
    for i, (attrs, scales, sizes) in enumerate(cases):
        ins = ["x"]
        if opset == 11:  # roi and scales are required inputs there, empty when unused
            inits["roi"] = np.zeros(0, np.float32)
            ins.append("roi")
        elif opset > 11:
            ins.append("")
        if scales is not None:
            inits[f"s{i}"] = np.array(scales, np.float32)
            ins.append(f"s{i}")
        elif opset == 11:
            ins.append("roi")
        elif opset > 11:
            ins.append("")
        if sizes is not None:
            inits[f"z{i}"] = np.array(sizes, np.int64)
            ins.append(f"z{i}")
        nodes.append(helper.make_node("Resize", ins, [f"r{i}"], **attrs))
        outs.append(f"r{i}")
    return _model(nodes, {"x": x}, outs, inits, opset=opset)


@pytest.mark.compiler
def test_resize_modes_opset13():
    x = _rng(4).standard_normal((1, 2, 3, 4)).astype("float32")
    up = [1.0, 1.0, 2.0, 2.0]
    odd = [1.0, 1.0, 1.7, 0.6]
    cases = [
        # what torch exports for nn.Upsample(mode="nearest")
        ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
          "nearest_mode": "floor"}, up, None),
        ({"mode": "nearest"}, odd, None),  # half_pixel, round_prefer_floor
        ({"mode": "nearest", "nearest_mode": "round_prefer_ceil"}, None, [1, 2, 7, 5]),
        ({"mode": "nearest", "coordinate_transformation_mode": "align_corners",
          "nearest_mode": "ceil"}, up, None),
        ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, up, None),
        ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, None,
         [1, 2, 5, 9]),
        ({"mode": "linear", "coordinate_transformation_mode": "asymmetric"}, odd, None),
        ({"mode": "linear"}, None, [1, 2, 1, 3]),  # half_pixel, downscale to one row
    ]  # fmt: skip
    _check(_resize_model(13, cases, x), {"x": x})


@pytest.mark.compiler
def test_resize_other_opsets_and_upsample():
    x = _rng(5).standard_normal((1, 2, 3, 4)).astype("float32")
    cases10 = [({"mode": "nearest"}, [1.0, 1.0, 2.0, 3.0], None),
               ({"mode": "linear"}, [1.0, 1.0, 2.0, 1.5], None)]  # fmt: skip
    _check(_resize_model(10, cases10, x), {"x": x})
    cases11 = [({"mode": "linear", "coordinate_transformation_mode": "half_pixel"},
                None, [1, 2, 6, 6])]  # fmt: skip
    _check(_resize_model(11, cases11, x), {"x": x}, compile_=False)
    # opset 18: axes and keep_aspect_ratio_policy
    inits = {"z": np.array([7, 6], np.int64), "s": np.array([2.0, 2.0], np.float32)}
    nodes = [
        helper.make_node(
            "Resize", ["x", "", "", "z"], ["a"], mode="nearest", axes=[2, 3],
            keep_aspect_ratio_policy="not_larger",
        ),
        helper.make_node(
            "Resize", ["x", "", "s"], ["b"], mode="linear", axes=[-2, -1],
            coordinate_transformation_mode="half_pixel_symmetric",
        ),
    ]  # fmt: skip
    _check(_model(nodes, {"x": x}, ["a", "b"], inits, opset=19), {"x": x})
    # Upsample-9 (scales input) and Upsample-7 (scales attribute)
    inits = {"s": np.array([1.0, 1.0, 2.0, 2.0], np.float32)}
    nodes = [helper.make_node("Upsample", ["x", "s"], ["u"], mode="nearest")]
    _check(_model(nodes, {"x": x}, ["u"], inits, opset=9), {"x": x}, compile_=False)
    nodes = [helper.make_node("Upsample", ["x"], ["u"], mode="linear", scales=[1.0, 1.0, 2.0, 1.5])]
    _check(_model(nodes, {"x": x}, ["u"], {}, opset=7), {"x": x}, compile_=False)


@pytest.mark.compiler
@pytest.mark.parametrize("opset", [13, 18])
def test_reductions_norms_and_rearrangements(opset):
    rng = _rng(6)
    x = rng.uniform(0.5, 1.5, (2, 3, 4, 4)).astype("float32")
    x[1, 2, 3, :2] = x[1, 2, 3, 2]  # ties for arg max/min
    inits = {
        "reps": np.array([1, 2, 1, 3], np.int64),
        "gamma": rng.standard_normal(3).astype("float32"),
        "beta": rng.standard_normal(3).astype("float32"),
        "start": np.array(2, np.int64),
        "limit": np.array(11, np.int64),
        "delta": np.array(3, np.int64),
        "axes": np.array([1, 3], np.int64),
        "kk": np.array(-1, np.int64),
    }
    red = ["ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum",
           "ReduceLogSumExp"]  # fmt: skip
    nodes = []
    for i, op in enumerate(red):
        kd = i % 2
        if opset >= 18:
            nodes.append(helper.make_node(op, ["x", "axes"], [f"y_{op}"], keepdims=kd))
        else:
            nodes.append(helper.make_node(op, ["x"], [f"y_{op}"], axes=[1, 3], keepdims=kd))
    nodes.append(helper.make_node("ReduceL2", ["x"], ["y_all"], keepdims=0))
    nodes += [
        helper.make_node("ArgMax", ["x"], ["y_argmax"], axis=3),
        helper.make_node("ArgMin", ["x"], ["y_argmin"], axis=-1, keepdims=0),
        helper.make_node("ArgMax", ["x"], ["y_argmax_last"], axis=3, select_last_index=1),
        helper.make_node("Tile", ["x", "reps"], ["y_tile"]),
        helper.make_node("GlobalMaxPool", ["x"], ["y_gmp"]),
        helper.make_node("LogSoftmax", ["x"], ["y_lsm"], axis=-1),
        helper.make_node("InstanceNormalization", ["x", "gamma", "beta"], ["y_in"]),
        helper.make_node("Range", ["start", "limit", "delta"], ["y_range"]),
        helper.make_node("SpaceToDepth", ["x"], ["y_s2d"], blocksize=2),
        helper.make_node("DepthToSpace", ["y_s2d"], ["y_d2s_dcr"], blocksize=2),
        helper.make_node("DepthToSpace", ["y_s2d"], ["y_d2s_crd"], blocksize=2, mode="CRD"),
    ]
    if opset >= 14:  # Trilu is new in 14
        nodes.append(helper.make_node("Trilu", ["x"], ["y_triu"]))
        nodes.append(helper.make_node("Trilu", ["x", "kk"], ["y_tril"], upper=0))
    outs = [n.output[0] for n in nodes]
    _check(_model(nodes, {"x": x}, outs, inits, opset=opset), {"x": x}, rtol=2e-5)


def test_still_unsupported_operators_error_clearly():
    assert {"LeakyRelu", "Resize", "Pad", "InstanceNormalization"} <= set(graph.supported_ops())
    assert "TopK" not in graph.supported_ops()
    x = np.zeros((1, 2, 3, 4), "float32")
    cases = [
        (helper.make_node("TopK", ["x", "ax"], ["y", "i"], name="e"), 12,
         r"ONNX operator TopK \(node 'e', opset 12\) is not supported"),
        (helper.make_node("Einsum", ["x"], ["y"], equation="iijk->ijk", name="d"), 12,
         r"Einsum \(node 'd', opset 12\): a repeated index"),
        (helper.make_node("Resize", ["x", "", "s"], ["y"], mode="cubic", name="r"), 13,
         r"Resize \(node 'r', opset 13\): mode 'cubic'"),
        (helper.make_node("Pad", ["x", "p"], ["y"], mode="wrap", name="w"), 19,
         r"Pad \(node 'w', opset 19\): mode 'wrap'"),
    ]  # fmt: skip
    inits = {
        "s": np.array([1, 1, 2, 2], np.float32),
        "p": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64),
        "ax": np.array([1], np.int64),
    }
    for node, opset, msg in cases:
        used = {k: v for k, v in inits.items() if k in node.input}
        with pytest.raises(UnsupportedOperatorError, match=msg):
            graph.from_onnx(_model([node], {"x": x}, ["y"], used, opset=opset))


@pytest.mark.compiler
def test_einsum_castlike_size():
    rng = _rng(10)
    feeds = {
        "a": rng.standard_normal((2, 3, 4, 5)).astype("float32"),
        "b": rng.standard_normal((2, 3, 6, 5)).astype("float32"),
        "m": rng.standard_normal((4, 5)).astype("float32"),
        "n": rng.standard_normal((5, 6)).astype("float32"),
        "v": rng.standard_normal((4,)).astype("float32"),
        "k": rng.integers(0, 5, (4, 5)).astype("int64"),
    }
    eqs = [
        ("bhqd,bhkd->bhqk", ["a", "b"]),
        ("ij,jk->ik", ["m", "n"]),
        ("ij,jk", ["m", "n"]),  # implicit output
        ("i,j->ij", ["v", "v"]),
        ("ij->ji", ["m"]),
        ("ij->", ["m"]),
        ("...qd,...kd->...qk", ["a", "b"]),
        ("ij,ij->i", ["m", "m"]),
        ("bhqd,dk,ke->bhqe", ["a", "n", "n2"]),
    ]
    nodes = [helper.make_node("Transpose", ["n"], ["n2"], perm=[1, 0])]
    nodes += [
        helper.make_node("Einsum", ins, [f"e{i}"], equation=eq) for i, (eq, ins) in enumerate(eqs)
    ]
    nodes += [
        helper.make_node("CastLike", ["k", "m"], ["cl"]),
        helper.make_node("Size", ["a"], ["sz"]),
        helper.make_node("CumSum", ["a", "ax2"], ["cs"]),
        helper.make_node("CumSum", ["k", "ax0"], ["cs_rev_ex"], reverse=1, exclusive=1),
        helper.make_node("GatherElements", ["m", "gi"], ["ge"], axis=1),
    ]
    outs = [f"e{i}" for i in range(len(eqs))] + ["cl", "sz", "cs", "cs_rev_ex", "ge"]
    inits = {
        "ax2": np.array(2, np.int64),
        "ax0": np.array(-2, np.int64),
        "gi": np.array([[0, 4, -1], [2, 2, 1], [3, 0, 0], [1, -5, 4]], np.int64),
    }
    _check(_model(nodes, feeds, outs, inits, opset=15), feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.compiler
def test_zero_pad_folds_into_conv():
    rng = _rng(13)
    x = rng.standard_normal((1, 2, 5, 6)).astype("float32")
    inits = {
        "w": rng.standard_normal((3, 2, 3, 3)).astype("float32"),
        "p0": np.array([0, 0, 1, 2, 0, 0, 2, 0], np.int64),
        "p1": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64),
        "v": np.array(0.5, np.float32),
    }
    nodes = [
        helper.make_node("Pad", ["x", "p0"], ["xp"]),
        helper.make_node("Conv", ["xp", "w"], ["y0"], pads=[0, 1, 0, 1]),
        helper.make_node("Pad", ["x", "p1", "v"], ["xv"]),  # not zero: stays a Pad
        helper.make_node("Conv", ["xv", "w"], ["y1"]),
    ]
    model = _model(nodes, {"x": x}, ["y0", "y1"], inits, opset=13)
    ops = [c.op for c in graph.from_onnx(model).calls]
    assert ops.count("pad") == 1 and ops.count("conv2d") == 2
    _check(model, {"x": x}, rtol=1e-4, atol=1e-5)
