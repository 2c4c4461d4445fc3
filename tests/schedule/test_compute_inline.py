"""compute_inline and reverse_compute_inline."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from metaschedule import te, tir
from metaschedule.codegen import build
from metaschedule.schedule.error import NotInlinableError
from metaschedule.testing.primitive_check import check_primitives as check
from metaschedule.tir import BufferLoad, BufferStore, IfThenElse
from metaschedule.tir.functor import post_order_visit
from metaschedule.tir.interpreter import interpret
from metaschedule.tir.structural import structural_equal


def conv_bias_relu():
    data = te.placeholder((1, 5, 5, 2), "float32", "data")
    kernel = te.placeholder((3, 3, 2, 4), "float32", "kernel")
    bias = te.placeholder((4,), "float32", "bias")
    conv = te.ops.conv2d_nhwc(data, kernel, padding=1)
    return te.create_prim_func([data, kernel, bias, te.ops.relu(te.ops.bias_add(conv, bias))])


def chain(n=6):
    A = te.placeholder((n, 4), "float32", "A")
    B = te.compute((n, 4), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((n, 4), lambda i, j: B[i, j] + 1.0, name="C")
    D = te.compute((n, 4), lambda i, j: C[i, j] * C[i, j], name="D")
    return te.create_prim_func([A, D])


def transposed_reuse():
    """B is read transposed, twice, and by two consumers."""
    A = te.placeholder((4, 6), "float32", "A")
    B = te.compute((4, 6), lambda i, j: A[i, j] - 0.5, name="B")
    C = te.compute((6, 4), lambda i, j: B[j, i] * B[j, i], name="C")
    D = te.compute((6, 4), lambda i, j: C[i, j] + B[j, i], name="D")
    return te.create_prim_func([A, D])


def inputs(func, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(p.static_shape()).astype(p.dtype) for p in func.params]


def blocks(sch) -> list[str]:
    return [n for n in sch.state.index("main").blocks if n != "root"]


def root_allocs(sch) -> list[str]:
    return [b.name for b in sch.mod["main"].body.block.alloc_buffers]


def read_names(sch, block) -> list[str]:
    return [r.buffer.name for r in sch.get(sch.get_block(block)).reads]


# ----------------------------------------------------------------------------- compute_inline


def test_inline_padding_into_conv():
    func = conv_bias_relu()
    sch = tir.Schedule(func)
    sch.compute_inline(sch.get_block("PaddedInput"))
    assert "PaddedInput" not in blocks(sch) and "PaddedInput" not in root_allocs(sch)
    assert read_names(sch, "conv2d_nhwc") == ["data", "kernel"]
    conv = sch.get(sch.get_block("conv2d_nhwc"))
    region = conv.reads[0].region
    assert all(r.extent.value == 1 for r in region)  # one element per iteration
    check(sch, func)


def test_inline_chain_and_loops_removed():
    func = chain()
    sch = tir.Schedule(func)
    b_loops = sch.get_loops(sch.get_block("B"))
    sch.compute_inline(sch.get_block("B"))
    sch.compute_inline(sch.get_block("C"))
    assert blocks(sch) == ["D"] and root_allocs(sch) == []
    with pytest.raises(tir.ScheduleError, match="no longer exists"):
        sch.get(b_loops[0])
    # D squares C, so B's expression appears twice
    loads = []
    post_order_visit(
        sch.get(sch.get_block("D")).body,
        lambda n: loads.append(n) if isinstance(n, BufferLoad) else None,
    )
    assert [ld.buffer.name for ld in loads] == ["A", "A"]
    check(sch, func)


def test_inline_transposed_into_two_consumers():
    func = transposed_reuse()
    sch = tir.Schedule(func)
    sch.compute_inline(sch.get_block("B"))
    assert read_names(sch, "C") == ["A"]
    assert read_names(sch, "D") == ["C", "A"]
    check(sch, func)


def test_inline_after_compute_at_and_split():
    func = chain()
    sch = tir.Schedule(func)
    i, _ = sch.get_loops(sch.get_block("D"))
    io, _ = sch.split(i, [None, 4])
    sch.compute_at(sch.get_block("C"), io)
    sch.compute_inline(sch.get_block("B"))
    sch.compute_inline(sch.get_block("C"))
    check(sch, func)


def test_inline_errors():
    func = conv_bias_relu()
    sch = tir.Schedule(func)
    with pytest.raises(
        NotInlinableError, match="block 'conv2d_nhwc' is a reduction; only spatial blocks"
    ):
        sch.compute_inline(sch.get_block("conv2d_nhwc"))
    with pytest.raises(
        NotInlinableError, match="block 'T_relu' writes the function output 'T_relu'"
    ):
        sch.compute_inline(sch.get_block("T_relu"))
    with pytest.raises(tir.ScheduleError, match="root block"):
        sch.compute_inline(sch.get_block("root"))
    assert structural_equal(sch.mod["main"], func)


def _edit_block(func, name, **changes):
    sch = tir.Schedule(func)
    r = sch.state.block_realize("main", name)
    sch.state.replace(
        "main", {r: dataclasses.replace(r, block=dataclasses.replace(r.block, **changes))}
    )
    return sch.mod["main"]


def test_inline_error_body_not_single_store():
    func = chain()
    sch = tir.Schedule(func)
    blk = sch.get(sch.get_block("B"))
    bad = tir.Schedule(_edit_block(func, "B", body=IfThenElse(tir.const(True), blk.body)))
    with pytest.raises(NotInlinableError, match="single BufferStore.*IfThenElse"):
        bad.compute_inline(bad.get_block("B"))


def test_inline_error_store_indices_not_distinct_vars():
    func = chain()
    sch = tir.Schedule(func)
    blk = sch.get(sch.get_block("B"))
    st = blk.body
    v0, _v1 = (iv.var for iv in blk.iter_vars)
    # B[v0, v0] = ...: not distinct
    bad = _edit_block(func, "B", body=BufferStore(st.buffer, st.value, (v0, v0)))
    s = tir.Schedule(bad)
    with pytest.raises(NotInlinableError, match="distinct iteration variable"):
        s.compute_inline(s.get_block("B"))
    # B[v0, 0] = ...: a constant index
    bad = _edit_block(func, "B", body=BufferStore(st.buffer, st.value, (v0, 0)))
    s = tir.Schedule(bad)
    with pytest.raises(NotInlinableError, match="distinct iteration variable"):
        s.compute_inline(s.get_block("B"))


def test_inline_error_value_uses_unindexed_var():
    A = te.placeholder((4, 3), "float32", "A")
    r = te.reduce_axis((0, 3), "r")
    B = te.compute((4,), lambda i: te.sum(A[i, r], axis=r), name="B")
    C = te.compute((4,), lambda i: B[i] * 2.0, name="C")
    func = te.create_prim_func([A, C])
    sch = tir.Schedule(func)
    blk = sch.get(sch.get_block("B"))
    spatial = [dataclasses.replace(iv, iter_type=tir.IterType.DATA_PAR) for iv in blk.iter_vars]
    v0, _v1 = (iv.var for iv in blk.iter_vars)
    body = BufferStore(blk.body.buffer, A_load(blk), (v0,))
    bad = _edit_block(func, "B", iter_vars=tuple(spatial), init=None, body=body)
    s = tir.Schedule(bad)
    with pytest.raises(NotInlinableError, match=r"depends on iteration variables \['v_r'\]"):
        s.compute_inline(s.get_block("B"))


def A_load(blk):
    found = []
    post_order_visit(
        blk.body,
        lambda n: found.append(n) if isinstance(n, BufferLoad) and n.buffer.name == "A" else None,
    )
    return found[0]


# ----------------------------------------------------------------------------- reverse


def test_reverse_inline_bias_relu():
    func = conv_bias_relu()
    sch = tir.Schedule(func)
    sch.compute_inline(sch.get_block("PaddedInput"))
    sch.reverse_compute_inline(sch.get_block("T_relu"))
    assert blocks(sch) == ["conv2d_nhwc", "T_add"]
    assert root_allocs(sch) == ["conv2d_nhwc"]
    t_add = sch.get(sch.get_block("T_add"))
    assert [w.buffer.name for w in t_add.writes] == ["T_relu"]
    assert [r.buffer.name for r in t_add.reads] == ["conv2d_nhwc", "bias"]
    check(sch, func)
    with pytest.raises(NotInlinableError, match="'conv2d_nhwc' is a reduction"):
        sch.reverse_compute_inline(sch.get_block("T_add"))


def test_reverse_inline_chain_tail_first():
    func = chain()
    sch = tir.Schedule(func)
    sch.reverse_compute_inline(sch.get_block("D"))
    sch.reverse_compute_inline(sch.get_block("C"))
    assert blocks(sch) == ["B"] and root_allocs(sch) == []
    check(sch, func)


def test_reverse_inline_after_split_keeps_producer_loops():
    func = chain(10)
    sch = tir.Schedule(func)
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, [None, 4])
    sch.reverse_compute_inline(sch.get_block("D"))
    assert [sch.get(lp).extent.value for lp in sch.get_loops(sch.get_block("C"))] == [3, 4, 4]
    check(sch, func)


def test_reverse_inline_errors():
    func = transposed_reuse()
    sch = tir.Schedule(func)
    with pytest.raises(NotInlinableError, match="also read by blocks \\['D'\\]"):
        sch.reverse_compute_inline(sch.get_block("C"))
    # D reads C and B: two produced buffers
    with pytest.raises(NotInlinableError, match="exactly one buffer produced"):
        sch.reverse_compute_inline(sch.get_block("D"))

    A = te.placeholder((4,), "float32", "A")
    B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((4, 3), lambda i, j: B[i] * 2.0, name="C")  # broadcast: not a bijection
    D = te.compute((2,), lambda i: B[i] * 2.0, name="D")  # reads half of B
    sch = tir.Schedule(te.create_prim_func([A, C]))
    with pytest.raises(NotInlinableError, match="must be a bijection"):
        sch.reverse_compute_inline(sch.get_block("C"))
    sch = tir.Schedule(te.create_prim_func([A, D]))
    with pytest.raises(NotInlinableError, match="domains must match"):
        sch.reverse_compute_inline(sch.get_block("D"))
    E = te.compute((4,), lambda i: B[i] * B[3 - i], name="E")
    sch = tir.Schedule(te.create_prim_func([A, E]))
    with pytest.raises(NotInlinableError, match="distinct iteration variable|different indices"):
        sch.reverse_compute_inline(sch.get_block("E"))


def test_reverse_inline_error_output_used_in_between():
    A = te.placeholder((4,), "float32", "A")
    B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((4,), lambda i: B[i] * 2.0, name="C")
    Z = te.compute((4,), lambda i: C[i] + 1.0, name="Z")
    func = te.create_prim_func([A, C, Z])
    root = func.body.block
    seq = root.body.seq
    # Z (reading C) runs between B and C
    swapped = dataclasses.replace(
        root, body=dataclasses.replace(root.body, seq=(seq[0], seq[2], seq[1]))
    )
    sch = tir.Schedule(func.with_body(dataclasses.replace(func.body, block=swapped)))
    with pytest.raises(NotInlinableError, match=r"blocks \['Z'\] access 'C'"):
        sch.reverse_compute_inline(sch.get_block("C"))
    sch = tir.Schedule(func)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert blocks(sch) == ["B", "Z"]
    check(sch, func)


@pytest.mark.compiler
def test_inlined_conv_bias_relu_builds():
    func = conv_bias_relu()
    sch = tir.Schedule(func)
    sch.compute_inline(sch.get_block("PaddedInput"))
    sch.reverse_compute_inline(sch.get_block("T_relu"))
    sch.reverse_compute_at(sch.get_block("T_add"), sch.get_loops(sch.get_block("conv2d_nhwc"))[1])
    check(sch, func)
    want = inputs(func)
    interpret(func, *want)
    got = inputs(func)
    got[-1][...] = 0
    build(sch.mod, "cpu")(*got)
    np.testing.assert_allclose(got[-1], want[-1], rtol=1e-5, atol=1e-5)
