"""Statement surgery: multi-edits, positions, removal, copy nests, unique names."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from metaschedule import tir
from metaschedule.schedule import analysis as an
from metaschedule.schedule import edit
from metaschedule.tir import Buffer, BufferStore, For, SeqStmt
from metaschedule.tir.arith import Analyzer
from metaschedule.tir.expr import const
from metaschedule.tir.interpreter import interpret


@pytest.fixture
def state(matmul_relu):
    return tir.Schedule(matmul_relu).state


def test_removal_target_and_remove_stmt(state):
    c = state.block_realize("main", "C")
    d = state.block_realize("main", "D")
    top = state.loops_above("main", c)[0]
    assert edit.removal_target(state, "main", c) is top
    body = state.func("main").body
    new = edit.remove_stmt(body, top)
    # the root's SeqStmt of two nests became D's nest alone
    assert isinstance(new.block.body, For) and new.block.body is state.loops_above("main", d)[0]
    with pytest.raises(tir.ScheduleError, match="whole body"):
        edit.remove_stmt(body, c)  # C is the whole body of loop k


def test_removal_target_stops_at_shared_loop(matmul_relu):
    sch = tir.Schedule(matmul_relu)
    i, _ = sch.get_loops(sch.get_block("D"))
    sch.compute_at(sch.get_block("C"), i)
    state = sch.state
    c = state.block_realize("main", "C")
    target = edit.removal_target(state, "main", c)
    assert isinstance(target, For) and target.loop_var.name == "ax0"
    loop_i = sch.get(i)
    assert isinstance(loop_i.body, SeqStmt) and loop_i.body.seq[0] is target
    assert an.is_ancestor(state, "main", loop_i, c)
    assert an.lowest_common_ancestor(state, "main", [c, state.block_realize("main", "D")]) is loop_i
    assert edit.stmt_children(loop_i.body) == list(loop_i.body.seq)
    assert edit.body_children(loop_i) == list(loop_i.body.seq)
    # positions: C's nest is child 0 of loop i, D's nest child 1
    d = state.block_realize("main", "D")
    assert edit.child_index(state, "main", loop_i, c) == 0
    assert edit.child_index(state, "main", loop_i, d) == 1
    assert edit.insertion_point(state, "main", state.scope_realize("main", c), [c, d]) is loop_i
    assert edit.enclosing_loop_or_block(state, "main", loop_i.body) is loop_i


def test_stmt_editor_applies_nested_edits_in_one_pass(state):
    root = state.func("main").body.block
    c = state.block_realize("main", "C")
    d = state.block_realize("main", "D")
    tmp = Buffer("T", (const(4, "int32"),), "float32", "local")
    marker = BufferStore(tmp, const(0.0, "float32"), (const(0, "int32"),))
    new_root = (
        edit.StmtEditor()
        .add(root, edit.add_alloc(tmp))
        .add(root, edit.insert_child(1, marker))
        .add(c.block, lambda b: dataclasses.replace(b, name_hint="C2"))
        .run(root)
    )
    assert new_root.alloc_buffers[-1] is tmp
    kids = edit.body_children(new_root)
    assert len(kids) == 3 and kids[1] is marker
    names = [r.block.name_hint for r in an.subtree_blocks(new_root)]
    assert names == ["C2", "D"]
    # untouched subtrees are shared, not copied
    assert kids[2] is state.loops_above("main", d)[0]


def test_replace_buffer_and_with_children(state):
    d = state.block_realize("main", "D")
    c_buf = d.block.reads[0].buffer
    other = Buffer("C2", c_buf.shape, c_buf.dtype)
    new = edit.replace_buffer(c_buf, other)(d)
    assert new.block.reads[0].buffer is other
    assert all(isinstance(b, Buffer) and b is not c_buf for b in an.buffers_of(new.block.reads))
    loop = state.loops_above("main", d)[-1]
    twice = edit.with_children(loop, [loop.body, loop.body])
    assert isinstance(twice.body, SeqStmt) and len(twice.body.seq) == 2
    assert edit.with_children(loop, [d]).body is d


def test_unique_block_name(state):
    assert edit.unique_block_name(state, "main", "E") == "E"
    assert edit.unique_block_name(state, "main", "C") == "C_1"


def test_copy_nest_copies_the_region():
    src = Buffer("S", (const(6, "int32"), const(5, "int32")), "float32")
    dst = Buffer("T", (const(6, "int32"), const(5, "int32")), "float32")
    region = [
        tir.Range(const(1, "int32"), const(3, "int32")),
        tir.Range(const(0, "int32"), const(5, "int32")),
    ]
    nest = edit.copy_nest(src, dst, region, "copy", Analyzer())
    assert [lp.extent.value for lp in (nest, nest.body)] == [3, 5]
    func = tir.PrimFunc(
        (src, dst),
        tir.BlockRealize(
            (),
            const(True),
            tir.Block(iter_vars=(), reads=(), writes=(), name_hint="root", body=nest),
        ),
    )
    a = np.arange(30, dtype="float32").reshape(6, 5)
    out = np.zeros((6, 5), "float32")
    interpret(func, a, out)
    expect = np.zeros((6, 5), "float32")
    expect[1:4] = a[1:4]
    np.testing.assert_array_equal(out, expect)
