"""Hostile models (issue 33): deep chains and wide calls import, fuse in bounded groups and
compile without RecursionError; malformed files are one-line errors naming the file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from metaschedule import graph
from metaschedule import relax_integration as ri
from metaschedule.graph import GraphBuilder, ModelFileError, fuse, lower_model
from metaschedule.graph.builder import MAX_CONCAT_ARGS
from metaschedule.graph.fuse import MAX_FUSED_CALLS, MAX_INLINED_DEPTH, MAX_INLINED_NODES
from metaschedule.testing.hostile import nesting_bomb, onnx_chain

onnx = pytest.importorskip("onnx")
helper = onnx.helper
FLOAT = onnx.TensorProto.FLOAT


def _chain(op: str, length: int) -> graph.Function:
    b = GraphBuilder()
    v = b.input("x", (4,))
    for _ in range(length):
        v = b.call(op, [v])
    return b.finish([v])


@pytest.mark.compiler
def test_a_3000_node_onnx_chain_imports_fuses_in_bounded_groups_and_compiles():
    func = graph.from_onnx(onnx_chain(3000))
    assert len(func.calls) == 3000
    model = lower_model(func)
    groups = fuse(model.graph)
    assert sum(len(g.calls) for g in groups) == 3000
    assert max(len(g.calls) for g in groups) <= MAX_FUSED_CALLS
    assert all(g.depth <= MAX_INLINED_DEPTH and g.nodes <= MAX_INLINED_NODES for g in groups)
    assert len(model.funcs) < len(groups)  # the equal groups are one function
    x = np.full(4, -3.0, "float32")
    exe = ri.compile_relax(None, func, "llvm", None)
    np.testing.assert_allclose(exe(x), np.full(4, 1500.0), rtol=0)


def test_a_chain_that_doubles_its_expression_is_split_by_size():
    """softsign reads its input twice: inlined, each call doubles the expression."""
    groups = fuse(_chain("softsign", 40))
    assert len(groups) > 1
    assert all(g.nodes <= MAX_INLINED_NODES for g in groups)
    assert max(len(g.calls) for g in groups) < 16  # 2**16 copies of the first would be many


def test_short_chains_still_fuse_whole():
    (group,) = fuse(_chain("relu", 20))
    assert len(group.calls) == 20 and group.depth <= MAX_INLINED_DEPTH


def test_the_call_cap_alone_bounds_a_graph_without_types():
    func = _chain("relu", MAX_FUSED_CALLS + 5)
    func.types = {}  # no types: no expression estimate, the cap on calls still holds
    func.types.update({p.name: p.type for p in func.params})
    sizes = [len(g.calls) for g in fuse(func)]
    assert sizes == [MAX_FUSED_CALLS, 5]


@pytest.mark.compiler
def test_a_3000_input_concat_is_a_tree_of_bounded_concats():
    node = helper.make_node("Concat", ["x"] * 3000, ["y"], axis=0)
    model = helper.make_model(
        helper.make_graph(
            [node],
            "wide",
            [helper.make_tensor_value_info("x", FLOAT, [2])],
            [helper.make_tensor_value_info("y", FLOAT, [6000])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    func = graph.from_onnx(model)
    assert all(len(c.args) <= MAX_CONCAT_ARGS for c in func.calls)
    x = np.array([1.0, 2.0], "float32")
    np.testing.assert_array_equal(graph.interpret(func, x)[0], np.tile(x, 3000))
    np.testing.assert_array_equal(ri.compile_relax(None, func, "llvm", None)(x), np.tile(x, 3000))


@pytest.mark.parametrize("case", ["garbage", "truncated", "empty"])
def test_a_malformed_onnx_file_is_one_line_naming_it(tmp_path, case):
    data = onnx_chain(4).SerializeToString()
    content = {"garbage": b"\x0f\xff" * 40, "truncated": data[: len(data) // 2], "empty": b""}
    path = tmp_path / f"{case}.onnx"
    path.write_bytes(content[case])
    with pytest.raises(ModelFileError) as info:
        graph.from_onnx(str(path))
    message = str(info.value)
    assert message.startswith(f"{path}: not ") and "\n" not in message
    assert isinstance(info.value, ValueError)


def test_the_cli_reports_a_malformed_onnx_file_in_one_line(tmp_path, capsys):
    from metaschedule.cli import main

    path = tmp_path / "bad.onnx"
    path.write_bytes(b"\x0f\xff" * 40)
    assert main(["compile", str(path), "-o", str(tmp_path / "m.so")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and "ModelFileError" in err, err
    assert "Traceback" not in err and not (tmp_path / "m.so").exists()


def test_graph_load_json_of_a_nesting_bomb_is_a_value_error(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(nesting_bomb())
    with pytest.raises(ValueError, match="nested too deeply"):
        graph.load_json(path)
    path.write_text(json.dumps({"format": "metaschedule.graph/1", "params": 3}))
    with pytest.raises(ValueError, match=f"{path}: not a graph function document"):
        graph.load_json(path)
