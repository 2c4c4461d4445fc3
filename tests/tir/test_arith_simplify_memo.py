"""The memo of simplified expressions (``tir/arith/simplify_memo.py``): an expression with
other variables and buffers, but the same structure and bounds, gets the answer the
simplifier gives it, in its own variables."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import metaschedule.tir as T
from metaschedule.tir import expr as E
from metaschedule.tir.arith import Analyzer
from metaschedule.tir.arith.simplify import ExprKeyer, Simplifier
from metaschedule.tir.arith.simplify_memo import SimplifyMemo
from metaschedule.tir.buffer import Buffer
from metaschedule.tir.functor import collect_vars, substitute
from metaschedule.tir.structural_key import MAX_NODES


def same(a, b) -> bool:
    k = ExprKeyer()
    return k.key(a) == k.key(b)


def direct(e, bounds):
    return Simplifier(bounds, {}, None).visit(e)


def expressions(variables, depth):
    """Random index arithmetic over ``variables`` (and a load of a buffer ``A``)."""
    leaf = st.one_of(st.sampled_from(variables), st.integers(-6, 16).map(T.const))
    if depth == 0:
        return leaf
    sub = expressions(variables, depth - 1)
    return st.one_of(
        leaf,
        st.tuples(sub, sub).map(lambda ab: ab[0] + ab[1]),
        st.tuples(sub, sub).map(lambda ab: ab[0] - ab[1]),
        st.tuples(sub, st.integers(-3, 8)).map(lambda ac: ac[0] * ac[1]),
        st.tuples(sub, st.sampled_from([2, 4, 7, 16])).map(lambda ac: T.floordiv(ac[0], ac[1])),
        st.tuples(sub, st.sampled_from([2, 4, 7, 16])).map(lambda ac: T.floormod(ac[0], ac[1])),
        st.tuples(sub, sub).map(lambda ab: T.min(ab[0], ab[1])),
    )


VARS = [T.Var("a"), T.Var("b"), T.Var("c")]
A = Buffer("A", (64,), "int32")


@settings(max_examples=200, deadline=None)
@given(
    e=expressions(VARS, 3),
    extents=st.lists(st.integers(1, 40), min_size=3, max_size=3),
    load=st.booleans(),
    compared=st.one_of(st.none(), expressions(VARS, 1)),
)
def test_a_renamed_expression_gets_the_simplifiers_answer(e, extents, load, compared):
    if load:
        e = e + E.BufferLoad(A, (T.floormod(VARS[0], 64),))
    if compared is not None:
        e = E.LT(e, compared)
    bounds = {v: (0, n - 1) for v, n in zip(VARS, extents)}
    fresh = [T.Var(v.name, v.dtype) for v in VARS]
    other = Buffer("B", (64,), "int32")
    renamed = substitute(e, dict(zip(VARS, fresh)), {A: other})
    renamed_bounds = {v: bounds[old] for old, v in zip(VARS, fresh)}
    memo = SimplifyMemo()
    first = memo.simplify(e, bounds, lambda x: direct(x, bounds))
    assert same(first, direct(e, bounds))
    got = memo.simplify(renamed, renamed_bounds, lambda x: direct(x, renamed_bounds))
    assert same(got, direct(renamed, renamed_bounds))
    assert not collect_vars(got) & set(VARS)  # in the caller's own variables
    if direct(renamed, renamed_bounds) is renamed:
        assert got is renamed  # an unchanged expression is the caller's own


def test_bounds_and_dtypes_tell_structures_apart():
    x, y = T.Var("x"), T.Var("y", "int64")
    memo = SimplifyMemo()
    small = memo.simplify(T.floordiv(x, 8), {x: (0, 7)}, lambda e: direct(e, {x: (0, 7)}))
    wide = memo.simplify(T.floordiv(x, 8), {x: (0, 15)}, lambda e: direct(e, {x: (0, 15)}))
    assert same(small, T.const(0)) and not same(wide, T.const(0))
    wide64 = memo.simplify(T.floordiv(y, 8), {y: (0, 7)}, lambda e: direct(e, {y: (0, 7)}))
    assert wide64.dtype == "int64"
    assert len(memo._items) == 3


def test_large_or_shared_expressions_are_simplified_but_not_remembered():
    x = T.Var("x")
    e = x
    for _ in range(30):  # a DAG of 2**30 paths
        e = T.min(e + 1, e * 2)
    memo = SimplifyMemo()
    out = memo.simplify(e, {}, lambda v: direct(v, {}))
    assert same(out, direct(e, {})) and not memo._items
    assert MAX_NODES < 2**30


def test_the_analyzer_remembers_only_what_bounds_alone_decide():
    i, n = T.Var("i"), T.Var("n")
    with_value = Analyzer()
    with_value.bind(n, 4)
    assert same(with_value.simplify(n * 2), T.const(8))  # a value: substituted, as before
    symbolic = Analyzer()
    symbolic.bind(n, T.Range(1, 8))
    symbolic.bind(i, T.Range(0, n))
    assert same(symbolic.simplify(E.LT(i, n)), T.const(True))  # proven from symbolic ranges
    plain = Analyzer()
    plain.bind(i, T.Range(0, 16))
    assert same(plain.simplify(T.floordiv(i, 16)), T.const(0))
