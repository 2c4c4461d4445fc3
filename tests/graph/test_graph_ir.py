"""The graph IR: builder, printer, type inference, interpreter, passes, JSON."""

import numpy as np
import pytest

from metaschedule import graph
from metaschedule.graph import GraphBuilder, GraphError


def _small(fold=True):
    rng = np.random.default_rng(0)
    b = GraphBuilder(fold=fold)
    x = b.input("x", (2, 8))
    w = b.const(rng.standard_normal((8, 4)).astype("float32"), "w")
    bias = b.const(rng.standard_normal(4).astype("float32"), "bias")
    y = b.call("relu", [b.call("add", [b.call("matmul", [x, w]), bias])])
    return b.finish([y]), rng


def test_print_and_types():
    f, _ = _small()
    text = f.script()
    assert "fn main(%x: float32[2, 8])" in text
    assert "matmul(%x, %w)" in text and "# float32[2, 4]" in text
    assert f.types[f.outputs[0]] == graph.TensorType((2, 4), "float32")


def test_interpreter_matches_numpy():
    f, rng = _small()
    x = rng.standard_normal((2, 8)).astype("float32")
    w, bias = f.constants["w"], f.constants["bias"]
    np.testing.assert_allclose(graph.interpret(f, x)[0], np.maximum(x @ w + bias, 0), rtol=1e-6)
    np.testing.assert_allclose(graph.interpret(f, x=x)[0], graph.interpret(f, x)[0])
    with pytest.raises(ValueError, match="must be float32\\[2, 8\\]"):
        graph.interpret(f, np.zeros((3, 8), "float32"))
    with pytest.raises(TypeError, match="no input 'y'"):
        graph.interpret(f, y=x)


def test_bad_shapes_name_the_call():
    b = GraphBuilder()
    x = b.input("x", (2, 8))
    w = b.const(np.zeros((7, 4), "float32"), "w")
    with pytest.raises(GraphError, match="matmul.*reduction sizes differ"):
        b.call("matmul", [x, w])


def test_constant_folding_of_weight_only_subgraphs():
    b = GraphBuilder(fold=False)
    x = b.input("x", (1, 4))
    w = b.const(np.arange(8, dtype="float32").reshape(2, 4), "w")
    wt = b.call("transpose", [w], axes=(1, 0))
    y = b.call("matmul", [x, wt])
    f = b.finish([y])
    assert [c.op for c in f.calls] == ["transpose", "matmul"]
    folded = graph.fold_constants(f)
    assert [c.op for c in folded.calls] == ["matmul"]
    x_ = np.ones((1, 4), "float32")
    np.testing.assert_allclose(graph.interpret(folded, x_)[0], graph.interpret(f, x_)[0])


def test_fold_scale_bias_into_conv():
    rng = np.random.default_rng(1)
    b = GraphBuilder()
    x = b.input("x", (1, 3, 6, 6))
    w = b.const(rng.standard_normal((4, 3, 3, 3)).astype("float32"), "w")
    y = b.call("conv2d", [x, w], strides=(1, 1), pads=(1, 1, 1, 1), dilations=(1, 1), groups=1)
    y = b.call("add", [y, b.const(rng.standard_normal((1, 4, 1, 1)).astype("float32"), "b")])
    y = b.call("multiply", [y, b.const(rng.uniform(1, 2, (1, 4, 1, 1)).astype("float32"), "s")])
    y = b.call("add", [y, b.const(rng.standard_normal((1, 4, 1, 1)).astype("float32"), "t")])
    f = b.finish([b.call("relu", [y])])
    g = graph.optimize(f)
    assert [c.op for c in g.calls] == ["conv2d", "add", "relu"]
    x_ = rng.standard_normal((1, 3, 6, 6)).astype("float32")
    np.testing.assert_allclose(
        graph.interpret(g, x_)[0], graph.interpret(f, x_)[0], rtol=1e-5, atol=1e-5
    )


def test_json_round_trip(tmp_path):
    f, rng = _small()
    path = tmp_path / "g.json"
    graph.save_json(f, path)
    g = graph.load_json(path)
    assert g.script() == f.script()
    x = rng.standard_normal((2, 8)).astype("float32")
    np.testing.assert_array_equal(graph.interpret(g, x)[0], graph.interpret(f, x)[0])
    with pytest.raises(ValueError, match="not a graph function document"):
        graph.from_json({"format": "other"})


def test_unknown_operator_lists_known_ones():
    with pytest.raises(KeyError, match="not registered; known operators: .*conv2d"):
        graph.get_op("conv3d_magic")


def test_fusion_groups():
    f, _ = _small()
    groups = graph.fuse(graph.optimize(f))
    assert [g.name for g in groups] == ["fused_matmul_add_relu"]
