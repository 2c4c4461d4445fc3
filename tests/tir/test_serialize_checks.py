"""What IR JSON loading refuses because a file could plant it: control characters in
names, unknown thread axes, trees too large to walk, JSON nested too deeply."""

from __future__ import annotations

import time

import pytest

from metaschedule.testing.tuning_records import matmul
from metaschedule.tir import (
    Evaluate,
    For,
    ForKind,
    IRModule,
    StringImm,
    Var,
)
from metaschedule.tir import expr as E
from metaschedule.tir.serialize import (
    MAX_TREE_SIZE,
    from_json_dict,
    load_json,
    save_json,
    to_json_dict,
)


def _renamed(node, node_type: str, field: str, old: str, new: str) -> dict:
    data = to_json_dict(node)
    hits = [n for n in data["nodes"] if n["type"] == node_type and n["fields"].get(field) == old]
    assert hits, f"no {node_type} with {field}={old!r}"
    for n in hits:
        n["fields"][field] = new
    return data


@pytest.mark.parametrize("bad", ["\n", "\r", "\x00", "\x1b", "\x7f", "\t"])
@pytest.mark.parametrize(
    "node_type, field, old",
    [("Buffer", "name", "C"), ("Var", "name", "k"), ("Block", "name_hint", "C")],
)
def test_a_name_with_a_control_character_is_rejected(node_type, field, old, bad):
    data = _renamed(matmul(4), node_type, field, old, f"{old}{bad}system();")
    with pytest.raises(ValueError, match=f"{node_type}.*{field}.*control character"):
        from_json_dict(data)


def test_a_function_name_with_a_control_character_is_rejected():
    text = save_json(IRModule({"main\n#define x": matmul(4)}))
    with pytest.raises(ValueError, match="control character"):
        load_json(text)


@pytest.mark.parametrize("name", ["C*/ /*", 'C"\\??/', "Cé\u202e", "C#include", "C 1"])
def test_printable_names_load(name):
    func = from_json_dict(_renamed(matmul(4), "Buffer", "name", "C", name))
    assert func.params[2].name == name


def test_a_string_value_may_hold_a_newline():
    node = Evaluate(StringImm("two\nlines"))
    assert load_json(save_json(node)).value.value == "two\nlines"


def _bound_loop(tag: str) -> For:
    return For(Var("i"), 0, 4, ForKind.THREAD_BINDING, Evaluate(0), thread_binding=tag)


@pytest.mark.parametrize("tag", ["threadIdx.x", "blockIdx.z", "vthread.y"])
def test_thread_axes_load(tag):
    assert load_json(save_json(_bound_loop(tag))).thread_binding == tag


@pytest.mark.parametrize("tag", ["threadIdx.x;system(0)", "warp", "threadIdx.w", ""])
def test_an_unknown_thread_axis_is_rejected(tag):
    data = to_json_dict(_bound_loop("threadIdx.x"))
    (loop,) = [n for n in data["nodes"] if n["type"] == "For"]
    loop["fields"]["thread_binding"] = tag
    with pytest.raises(ValueError, match="unknown thread axis"):
        from_json_dict(data)


def test_a_tree_of_shared_nodes_too_large_to_walk_is_rejected_at_once():
    e = x = Var("x")
    for _ in range(40):  # 2**40 nodes when walked, 41 in the table
        e = E.Add(e, e)
    text = save_json(e)
    assert len(text) < 4000
    start = time.monotonic()
    with pytest.raises(ValueError, match="MAX_TREE_SIZE"):
        load_json(text)
    assert time.monotonic() - start < 1.0
    small = x
    for _ in range(MAX_TREE_SIZE.bit_length() - 2):
        small = E.Add(small, small)
    load_json(save_json(small))  # below the limit: loads


@pytest.mark.parametrize("depth", [10_000, 200_000])
def test_json_nested_too_deeply_is_a_value_error(depth):
    with pytest.raises(ValueError, match="nested too deeply"):
        load_json("[" * depth + "]" * depth)
    nested: list = []
    for _ in range(depth // 10):  # parsed already (a dict from elsewhere): still no crash
        nested = [nested]
    data = {"version": 1, "root": 0, "nodes": [{"type": "Evaluate", "fields": {"value": nested}}]}
    with pytest.raises(ValueError, match="nested too deeply"):
        from_json_dict(data)
