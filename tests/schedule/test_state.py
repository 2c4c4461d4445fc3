"""The schedule state's replacement: the direct walk down the replaced statements' paths
gives what the general rebuilding mutator gives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaschedule import te, tir
from metaschedule.schedule import state as S
from metaschedule.tir import Var
from metaschedule.tir.expr import const
from metaschedule.tir.stmt import Block, For, ForKind, SeqStmt
from metaschedule.tir.structural import structural_equal


def _scheduled() -> tir.Schedule:
    """A padded convolution with a cache write under its tiles: loops, sequences, blocks
    with inits, nested blocks."""
    data = te.placeholder((1, 6, 6, 4), "float32", "data")
    kernel = te.placeholder((3, 3, 4, 8), "float32", "kernel")
    func = te.create_prim_func([data, kernel, te.ops.conv2d_nhwc(data, kernel, padding=1)])
    sch = tir.Schedule(func)
    conv = sch.get_block("conv2d_nhwc")
    n, h, w, co, rh, rw, rc = sch.get_loops(conv)
    h0, h1 = sch.split(h, [3, 2])
    sch.reorder(h0, w, co, rh, rw, rc, h1)
    cw = sch.cache_write(conv, 0, "local")
    sch.reverse_compute_at(cw, w)
    sch.compute_at(sch.get_block("PaddedInput"), h0)
    return sch


def _statements(state: S.ScheduleState) -> list:
    idx = state.index("main")
    out: list = []

    def walk(s) -> None:
        out.append(s)
        for c in S.child_stmts(s):
            walk(c)

    walk(idx.func.body)
    return out


def _same_sharing(a, b) -> bool:
    """Equal trees whose statements are the same objects at the same places."""
    if a is b:
        return True
    if type(a) is not type(b) or not structural_equal(a, b):
        return False
    ca, cb = S.child_stmts(a), S.child_stmts(b)
    return len(ca) == len(cb) and all(_same_sharing(x, y) for x, y in zip(ca, cb))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.data())
def test_the_direct_rebuild_is_the_mutators(data):
    sch = _scheduled()
    state = sch.state
    stmts = _statements(state)
    parent = state.index("main").parent
    picked = data.draw(
        st.lists(st.integers(0, len(stmts) - 1), min_size=1, max_size=3, unique=True)
    )
    mapping: dict = {}
    for k in picked:
        old = stmts[k]
        ways = ["keep"]  # a block stays a block (its realize holds nothing else)
        if not isinstance(old, Block):
            ways.append("wrap")
            if isinstance(parent.get(id(old)), SeqStmt):
                ways.append("drop")
        how = data.draw(st.sampled_from(ways))
        if how == "wrap":  # a new statement in its place
            u = Var("u", "int32")
            mapping[id(old)] = For(u, const(0), const(1), ForKind.SERIAL, old)
        elif how == "keep":
            mapping[id(old)] = old
        else:
            mapping[id(old)] = None
    paths: set[int] = set()
    for key in mapping:
        p = parent.get(key)
        while p is not None and id(p) not in paths:
            paths.add(id(p))
            p = parent.get(id(p))
    body = state.index("main").func.body
    try:
        want = S._Replacer(dict(mapping), set(paths)).visit(body)
    except tir.ScheduleError:
        with pytest.raises(tir.ScheduleError):
            S._rebuilt(body, dict(mapping), set(paths))
        return
    got = S._rebuilt(body, dict(mapping), set(paths))
    assert _same_sharing(got, want)
