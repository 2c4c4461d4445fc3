"""Small ONNX models built with onnx.helper, shared by the graph tests."""

from __future__ import annotations

import numpy as np


def _model(onnx, nodes, inputs, outputs, inits, opset=17):
    from onnx import helper, numpy_helper

    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _w(rng, *shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _bn(rng, prefix, c, inits):
    inits[f"{prefix}_g"] = rng.uniform(0.5, 1.5, c).astype(np.float32)
    inits[f"{prefix}_b"] = rng.uniform(-0.5, 0.5, c).astype(np.float32)
    inits[f"{prefix}_m"] = rng.uniform(-0.5, 0.5, c).astype(np.float32)
    inits[f"{prefix}_v"] = rng.uniform(0.5, 1.5, c).astype(np.float32)
    return [f"{prefix}_g", f"{prefix}_b", f"{prefix}_m", f"{prefix}_v"]


def cnn(onnx):
    """Conv+BN+Relu, depthwise Conv+BN+Clip, strided Conv+BN+Relu, MaxPool, GAP, Gemm."""
    from onnx import helper

    rng = np.random.default_rng(0)
    inits = {
        "w1": _w(rng, 8, 3, 3, 3),
        "b1": _w(rng, 8),
        "w2": _w(rng, 8, 1, 3, 3),
        "w3": _w(rng, 16, 8, 3, 3),
        "fc_w": _w(rng, 10, 16),
        "fc_b": _w(rng, 10),
        "lo": np.float32(0.0),
        "hi": np.float32(6.0),
    }
    n = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("BatchNormalization", ["c1", *_bn(rng, "bn1", 8, inits)], ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], group=8, name="dwconv"),
        helper.make_node("BatchNormalization", ["c2", *_bn(rng, "bn2", 8, inits)], ["n2"]),
        helper.make_node("Clip", ["n2", "lo", "hi"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["c3", *_bn(rng, "bn3", 16, inits)], ["n3"]),
        helper.make_node("Relu", ["n3"], ["r3"]),
        helper.make_node("MaxPool", ["r3"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1),
    ]
    return _model(onnx, n, [("x", [1, 3, 16, 16])], [("y", [1, 10])], inits)


def mlp(onnx):
    """MatMul + Add + Relu twice, then Gemm (transB)."""
    from onnx import helper

    rng = np.random.default_rng(1)
    inits = {
        "w1": _w(rng, 32, 64),
        "b1": _w(rng, 64),
        "w2": _w(rng, 64, 64),
        "b2": _w(rng, 64),
        "w3": _w(rng, 10, 64),
        "b3": _w(rng, 10),
    }
    n = [
        helper.make_node("MatMul", ["x", "w1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["a1"]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("MatMul", ["r1", "w2"], ["m2"]),
        helper.make_node("Add", ["m2", "b2"], ["a2"]),
        helper.make_node("Relu", ["a2"], ["r2"]),
        helper.make_node("Gemm", ["r2", "w3", "b3"], ["y"], transB=1),
    ]
    return _model(onnx, n, [("x", [4, 32])], [("y", [4, 10])], inits)


def transformer(onnx, seq=8, d=32, heads=2):
    """One encoder block: QKV projections, attention with Shape-computed reshapes,
    softmax, output projection, LayerNormalization, an Erf-GELU MLP and a hand-written
    LayerNorm (ReduceMean/Sub/Pow/Sqrt/Div)."""
    from onnx import helper

    rng = np.random.default_rng(2)
    dh = d // heads
    inits = {
        "wqkv": _w(rng, d, 3 * d),
        "bqkv": _w(rng, 3 * d),
        "wo": _w(rng, d, d),
        "bo": _w(rng, d),
        "g1": rng.uniform(0.5, 1.5, d).astype(np.float32),
        "be1": _w(rng, d),
        "w1": _w(rng, d, 4 * d),
        "bb1": _w(rng, 4 * d),
        "w2": _w(rng, 4 * d, d),
        "bb2": _w(rng, d),
        "g2": rng.uniform(0.5, 1.5, d).astype(np.float32),
        "be2": _w(rng, d),
        "split": np.array([d, d, d], np.int64),
        "scale": np.float32(1 / np.sqrt(dh)),
        "heads_dims": np.array([heads, dh], np.int64),
        "i0": np.array([0], np.int64),
        "i1": np.array([1], np.int64),
        "ax": np.array([0], np.int64),
        "flat": np.array([0, 0, d], np.int64),
        "half": np.float32(0.5),
        "one": np.float32(1.0),
        "rs2": np.float32(1 / np.sqrt(2.0)),
        "two": np.float32(2.0),
        "eps": np.float32(1e-5),
        "axes_last": np.array([-1]),
    }
    n = [
        helper.make_node("MatMul", ["x", "wqkv"], ["qkv0"]),
        helper.make_node("Add", ["qkv0", "bqkv"], ["qkv"]),
        helper.make_node("Split", ["qkv", "split"], ["q0", "k0", "v0"], axis=2),
        # the head shape from Shape/Gather/Unsqueeze/Concat (folded at import)
        helper.make_node("Shape", ["x"], ["xs"]),
        helper.make_node("Gather", ["xs", "i0"], ["bsz"], axis=0),
        helper.make_node("Gather", ["xs", "i1"], ["sl"], axis=0),
        helper.make_node("Concat", ["bsz", "sl", "heads_dims"], ["hshape"], axis=0),
    ]
    for t in ("q", "k", "v"):
        n.append(helper.make_node("Reshape", [f"{t}0", "hshape"], [f"{t}1"]))
        perm = [0, 2, 3, 1] if t == "k" else [0, 2, 1, 3]
        n.append(helper.make_node("Transpose", [f"{t}1"], [f"{t}2"], perm=perm))
    n += [
        helper.make_node("MatMul", ["q2", "k2"], ["s0"]),
        helper.make_node("Mul", ["s0", "scale"], ["s1"]),
        helper.make_node("Softmax", ["s1"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v2"], ["o0"]),
        helper.make_node("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["o1", "flat"], ["o2"]),
        helper.make_node("MatMul", ["o2", "wo"], ["o3"]),
        helper.make_node("Add", ["o3", "bo"], ["o4"]),
        helper.make_node("Add", ["o4", "x"], ["h0"]),
        helper.make_node("LayerNormalization", ["h0", "g1", "be1"], ["h1"], axis=-1, epsilon=1e-5),
        helper.make_node("MatMul", ["h1", "w1"], ["f0"]),
        helper.make_node("Add", ["f0", "bb1"], ["f1"]),
        helper.make_node("Mul", ["f1", "rs2"], ["f2"]),
        helper.make_node("Erf", ["f2"], ["f3"]),
        helper.make_node("Add", ["f3", "one"], ["f4"]),
        helper.make_node("Mul", ["f1", "f4"], ["f5"]),
        helper.make_node("Mul", ["f5", "half"], ["f6"]),
        helper.make_node("MatMul", ["f6", "w2"], ["f7"]),
        helper.make_node("Add", ["f7", "bb2"], ["f8"]),
        helper.make_node("Add", ["f8", "h1"], ["h2"]),
        # LayerNorm by hand, as older exporters write it
        helper.make_node("ReduceMean", ["h2"], ["mu"], axes=[-1]),
        helper.make_node("Sub", ["h2", "mu"], ["dv"]),
        helper.make_node("Pow", ["dv", "two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1]),
        helper.make_node("Add", ["var", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["sd"]),
        helper.make_node("Div", ["dv", "sd"], ["nrm"]),
        helper.make_node("Mul", ["nrm", "g2"], ["nm"]),
        helper.make_node("Add", ["nm", "be2"], ["y"]),
    ]
    return _model(onnx, n, [("x", [1, seq, d])], [("y", [1, seq, d])], inits)
