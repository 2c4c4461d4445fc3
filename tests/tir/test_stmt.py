"""Statement nodes (``tir/stmt.py``)."""

from __future__ import annotations

from metaschedule.tir import expr as E
from metaschedule.tir.functor import replace_fields
from metaschedule.tir.stmt import Evaluate, For, ForKind
from metaschedule.tir.structural import structural_equal


def test_a_loop_with_another_body_is_the_replaced_loop():
    i = E.Var("i")
    old, new = Evaluate(E.const(0)), Evaluate(E.const(1))
    loop = For(i, E.const(0), E.const(8), ForKind.UNROLLED, old, None, {"pragma": 4})
    got = loop.with_body(new)
    assert got is not loop and loop.body is old  # a new node; the old one unchanged
    assert got.body is new and got.loop_var is i and got.kind is ForKind.UNROLLED
    assert got.annotations == {"pragma": 4}
    assert structural_equal(got, replace_fields(loop, body=new))
