"""Shared schedule analyses: region relaxation, dataflow, block kinds."""

from __future__ import annotations

import dataclasses

import pytest

from metaschedule import te, tir
from metaschedule.schedule import analysis as an
from metaschedule.schedule.error import (
    BufferIndexError,
    NotCompleteOrReductionBlockError,
    NotOnlyWriterError,
    StorageScopeError,
)
from metaschedule.testing import matmul_relu
from metaschedule.tir import BufferRegion, IterType, Range, Var
from metaschedule.tir.arith import Analyzer
from metaschedule.tir.functor import substitute
from metaschedule.tir.structural import structural_equal


def conv():
    data = te.placeholder((1, 6, 6, 2), "float32", "data")
    kernel = te.placeholder((3, 3, 2, 4), "float32", "kernel")
    return te.create_prim_func([data, kernel, te.ops.conv2d_nhwc(data, kernel, padding=1)])


def const_of(e) -> int:
    assert isinstance(e, tir.IntImm), f"{e} is not a constant"
    return e.value


@pytest.fixture
def state():
    return tir.Schedule(matmul_relu(8, 6, 4)).state


# ----------------------------------------------------------------------------- regions


def test_relax_region_over_inner_loops_keeps_outer_symbolic(state):
    d = state.block_realize("main", "D")
    i, j = state.loops_above("main", d)
    ana = an.analyzer_for_loops([i])
    (reg,) = an.relax_region(d.block.reads, d, [j], ana)
    assert reg.buffer.name == "C"
    assert reg.region[0].min is i.loop_var and const_of(reg.region[0].extent) == 1
    assert const_of(reg.region[1].min) == 0 and const_of(reg.region[1].extent) == 6


def test_relax_region_window_of_conv():
    sch = tir.Schedule(conv())
    c = sch.state.block_realize("main", "conv2d_nhwc")
    loops = sch.state.loops_above("main", c)
    ana = an.analyzer_for_loops(loops[:2])
    pad_read = [r for r in c.block.reads if r.buffer.name == "PaddedInput"]
    (reg,) = an.relax_region(pad_read, c, loops[2:], ana)
    yy = loops[1].loop_var
    assert reg.region[1].min is yy and const_of(reg.region[1].extent) == 3
    assert const_of(reg.region[2].extent) == 8 and const_of(reg.region[3].extent) == 2


def test_relax_region_with_map_and_split_bindings():
    io, ii = Var("io"), Var("ii")
    v = Var("v")
    buf = tir.decl_buffer((16,), name="X")
    region = BufferRegion(buf, (Range(v, 1),))
    ana = Analyzer()
    ana.bind(io, Range(0, 4))
    (reg,) = an.relax_region([region], {v: io * 4 + ii}, {ii: Range(0, 4)}, ana)
    assert structural_equal(reg.region[0].min, io * 4) and const_of(reg.region[0].extent) == 4


def test_relax_region_unbounded_becomes_whole_dimension():
    v, x = Var("v"), Var("x")
    buf = tir.decl_buffer((10,), name="X")
    # v has no range: v * x cannot be bounded
    (reg,) = an.relax_region(
        [BufferRegion(buf, (Range(v * x, 1),))], None, {x: Range(0, 10**9)}, Analyzer()
    )
    assert const_of(reg.region[0].min) == 0 and const_of(reg.region[0].extent) == 10
    (reg,) = an.relax_region(
        [BufferRegion(buf, (Range(x // v, 1),))], None, {v: Range(-3, 7)}, Analyzer()
    )
    assert const_of(reg.region[0].min) == 0 and const_of(reg.region[0].extent) == 10


def test_union_regions_bounding_box_and_fallback():
    i = Var("i")
    buf = tir.decl_buffer((8, 8), name="X")
    other = tir.decl_buffer((3,), name="Y")
    ana = Analyzer()
    ana.bind(i, Range(0, 4))
    regs = [
        BufferRegion(buf, (Range(i, 1), Range(0, 2))),
        BufferRegion(other, (Range(0, 3),)),
        BufferRegion(buf, (Range(i + 2, 2), Range(5, 1))),
    ]
    merged = an.union_regions(regs, ana)
    assert [r.buffer.name for r in merged] == ["X", "Y"]
    x = merged[0].region
    assert x[0].min is i and const_of(x[0].extent) == 4
    assert const_of(x[1].min) == 0 and const_of(x[1].extent) == 6
    j = Var("j")  # unrelated symbolic starts: no simple box, take the whole dimension
    full = an.union_range(Range(i, 1), Range(j, 1), ana, Range(0, 8))
    assert const_of(full.min) == 0 and const_of(full.extent) == 8


def test_load_regions_merges_per_buffer():
    A = tir.decl_buffer((8,), name="A")
    v = Var("v")
    e = A[v] + A[v + 2] * A[v + 1]
    (reg,) = an.load_regions(e)
    assert reg.region[0].min is v and const_of(reg.region[0].extent) == 3


# ----------------------------------------------------------------------------- dataflow


def test_producers_consumers_writers_readers(state):
    c = state.block_realize("main", "C")
    d = state.block_realize("main", "D")
    blocks = an.scope_blocks(state, "main", c)
    assert blocks == [c, d]
    assert an.consumers(blocks, c) == [d] and an.producers(blocks, d) == [c]
    assert an.consumers(blocks, d) == [] and an.producers(blocks, c) == []
    cbuf = c.block.writes[0].buffer
    assert an.writers_in_scope(blocks, cbuf) == [c]
    assert an.readers_in_scope(blocks, cbuf) == [d]
    with pytest.raises(tir.ScheduleError, match="root block"):
        an.scope_blocks(state, "main", state.block_realize("main", "root"))


def test_block_kinds(state):
    c = state.block_realize("main", "C")
    d = state.block_realize("main", "D")
    blocks = an.scope_blocks(state, "main", c)
    assert an.not_complete_reason(blocks, d) is None
    assert "not data-parallel" in an.not_complete_reason(blocks, c)
    assert an.not_reduction_reason(blocks, c) is None
    assert "no init" in an.not_reduction_reason(blocks, d)
    an.check_complete_or_reduction(blocks, c, "p")
    an.check_complete_or_reduction(blocks, d, "p")
    an.check_only_writer(blocks, c)
    assert an.is_leaf_block(c.block) and not an.is_leaf_block(state.func("main").body.block)


def test_second_writer_breaks_completeness(state):
    c = state.block_realize("main", "C")
    d = state.block_realize("main", "D")
    # a copy of D that writes C's buffer instead
    cbuf = c.block.writes[0].buffer
    fake = dataclasses.replace(
        d,
        block=dataclasses.replace(
            d.block, name_hint="D2", writes=(BufferRegion.full_region(cbuf),)
        ),
    )
    blocks = [c, d, fake]
    assert "'D2' also writes buffer 'C'" in an.not_reduction_reason(blocks, c)
    with pytest.raises(NotOnlyWriterError, match="'C' is not the only writer of buffer 'C'"):
        an.check_only_writer(blocks, c)
    with pytest.raises(NotCompleteOrReductionBlockError, match="also writes"):
        an.check_complete_or_reduction(blocks, c, "compute_at")


def test_reduction_write_depending_on_reduction_var(state):
    c = state.block_realize("main", "C")
    k = c.block.iter_vars[2].var
    w = c.block.writes[0]
    bad = dataclasses.replace(
        c,
        block=dataclasses.replace(
            c.block, writes=(BufferRegion(w.buffer, (Range(k, 1), w.region[1])),)
        ),
    )
    assert "reduction variables ['v_k']" in an.not_reduction_reason([bad], bad)


def test_loop_iter_type(state):
    c = state.block_realize("main", "C")
    i, j, k = state.loops_above("main", c)
    assert an.loop_iter_type(state, "main", i) == IterType.DATA_PAR
    assert an.loop_iter_type(state, "main", k) == IterType.COMM_REDUCE
    assert an.iter_kinds_by_var(c) == {
        i.loop_var: {IterType.DATA_PAR},
        j.loop_var: {IterType.DATA_PAR},
        k.loop_var: {IterType.COMM_REDUCE},
    }


# ----------------------------------------------------------------------------- buffers


def test_buffer_queries(state):
    c = state.block_realize("main", "C")
    root = state.func("main").body.block
    cbuf = c.block.writes[0].buffer
    assert an.nth_buffer(c.block, 0, "write", "p") is cbuf
    assert an.nth_buffer(c.block, 1, "read", "p").name == "B"
    with pytest.raises(BufferIndexError, match="read buffer index 2 is out of range for block 'C'"):
        an.nth_buffer(c.block, 2, "read", "p")
    with pytest.raises(BufferIndexError, match="must be an int"):
        an.nth_buffer(c.block, True, "read", "p")
    assert an.allocation_site(state.func("main"), cbuf) is root
    param = state.func("main").params[0]
    assert an.allocation_site(state.func("main"), param) is None
    assert an.check_storage_scope("local", "p") == "local"
    with pytest.raises(StorageScopeError, match="'texture' is not one of global, local"):
        an.check_storage_scope("texture", "p")
    d = state.block_realize("main", "D")
    (load,) = an.buffer_loads(d.block.body, cbuf)
    assert load.buffer is cbuf and an.buffer_loads(d.block.body, param) == []


def test_clamp_region_intersects_with_the_buffer():
    A = tir.decl_buffer((8, 6), name="A")
    i = Var("i")
    ana = Analyzer()
    ana.bind(i, Range(0, 4))
    reg = BufferRegion(A, (Range(i * 2 - 1, 3), Range(0, 6)))
    (r0, r1) = an.clamp_region(reg, ana).region
    assert r1.min.value == 0 and r1.extent.value == 6  # already inside: kept
    # [2i - 1, 2i + 2) clipped below at 0; never above 8 for i < 4
    for iv in range(4):
        lo = max(2 * iv - 1, 0)
        sub = {i: tir.IntImm("int32", iv)}
        assert Analyzer().simplify(substitute(r0.min, sub)).value == lo
        hi = Analyzer().simplify(substitute(r0.min + r0.extent, sub)).value
        assert hi == min(2 * iv + 2, 8)


def test_conjuncts_and_all():
    a, b = Var("a"), Var("b")
    p = (a < 3) & (b < 4) & (a < b)
    parts = an.conjuncts(p)
    assert len(parts) == 3 and all(not isinstance(x, tir.And) for x in parts)
    assert structural_equal(an.and_all(parts), p)
    true = an.and_all([])
    assert isinstance(true, tir.IntImm) and true.value == 1
