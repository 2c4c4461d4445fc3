"""Affine bindings: the full check, the tiling shortcut, and the memo."""

from __future__ import annotations

import dataclasses

import pytest

from metaschedule import tir
from metaschedule.schedule import affine as af
from metaschedule.schedule import analysis as an
from metaschedule.tir import Range, Var
from metaschedule.tir.arith.iter_map import is_affine_binding


@pytest.fixture
def state(matmul_relu):
    return tir.Schedule(matmul_relu).state


def test_has_and_check_affine_binding(state):
    c = state.block_realize("main", "C")
    i, j, k = state.loops_above("main", c)
    assert af.has_affine_binding(state, "main", c)
    af.check_affine_binding(state, "main", c, "p")
    bad = dataclasses.replace(c, iter_values=(i.loop_var * j.loop_var, j.loop_var, k.loop_var))
    state.replace("main", {c: bad})
    bad = state.block_realize("main", "C")
    assert not af.has_affine_binding(state, "main", bad)
    with pytest.raises(tir.ScheduleError, match="not an affine map"):
        af.check_affine_binding(state, "main", bad, "p")


def test_affine_memo_is_keyed_on_the_realize_and_the_loop_ranges(matmul_relu):
    sch = tir.Schedule(matmul_relu)
    i, j, _ = sch.get_loops(sch.get_block("C"))
    sch.fuse(i, j)  # bindings f // 12, f % 12: the full detection decides
    state = sch.state
    c = state.block_realize("main", "C")
    dom = an.loop_doms(state.loops_above("main", c))
    assert not af.is_tiling_binding(c, dom)
    memo = af.AffineMemo()
    assert memo.get(c, dom) is None
    assert af.binding_is_affine(c, dom, memo) is True
    assert memo.get(c, dom) is True
    # other ranges for the same loops: unknown again (a wrong cached answer would hide
    # a non-affine binding)
    f = next(iter(dom))
    other = {**dom, f: Range(0, 47)}
    assert memo.get(c, other) is None
    assert af.binding_is_affine(c, other, memo) is False  # 47 is no multiple of 12
    assert memo.get(c, other) is False and memo.get(c, dom) is None
    # a new BlockRealize with the same bindings is a different key
    assert memo.get(dataclasses.replace(c), dom) is None
    # copies of a state share the memo; fuse recorded its result there
    copy = state.copy()
    assert af.affine_memo(copy) is af.affine_memo(state)
    assert af.affine_memo(state).get(c, dom) is True
    assert af.has_affine_binding(copy, "main", c)


def test_tiling_bindings_are_recognised_without_the_full_detection(state):
    i0, i1, j, u = Var("i0"), Var("i1"), Var("j"), Var("u")
    dom = {i0: Range(0, 4), i1: Range(0, 8), j: Range(0, 6), u: Range(0, 1)}
    c = state.block_realize("main", "C")

    def realize(*values, pred=None):
        return dataclasses.replace(
            c, iter_values=tuple(values), predicate=pred if pred is not None else c.predicate
        )

    good = [
        realize(i0 * 8 + i1, j, 3),
        realize(i0 * 8 + i1 + u, j + 2, 0),
        realize(i1 + i0 * 8, u * 5 + j, 0),
    ]
    bad = [
        realize(i0 * 4 + i1, j, 0),  # overlapping digits
        realize(i0 * 8 + i1, i1, 0),  # one loop in two bindings
        realize(i0 * 8 + i1, j * 2, 0),  # a gap
        realize(i0 * 8 + i1, j, 0, pred=j < 5),  # a predicate
        realize(i0 * 8 + i1 * i1, j, 0),
    ]
    for r in good:
        assert af.is_tiling_binding(r, dom), r.iter_values
        assert af.binding_is_affine(r, dom)
    for r in bad:
        assert not af.is_tiling_binding(r, dom), r.iter_values
    # the cheap test is only a shortcut: it never accepts what the detection rejects
    for r in good + bad:
        if af.is_tiling_binding(r, dom):
            assert is_affine_binding(r.iter_values, dom, r.predicate)
