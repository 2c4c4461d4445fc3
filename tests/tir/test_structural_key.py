"""The structural key of expressions (``tir/structural_key.py``): two expressions get the
same key exactly when one is the other with its variables and buffers renamed, bounds
and dtypes kept; :meth:`StructuralKey.renaming` maps the first one's names to the
other's."""

from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metaschedule.tir as T
from metaschedule.tir import expr as E
from metaschedule.tir.arith.simplify import ExprKeyer
from metaschedule.tir.buffer import Buffer
from metaschedule.tir.functor import substitute
from metaschedule.tir.structural_key import MAX_NODES, StructuralKey, Unkeyable

# Expressions are built from recipes (nested tuples) so that the test can tell, apart
# from the key, when two of them are equal up to renaming: a recipe names variables by
# index, and its canonical form numbers them by first appearance, as the key does.

_BINARY = {
    "add": E.Add,
    "sub": E.Sub,
    "mul": E.Mul,
    "floordiv": E.FloorDiv,
    "floormod": E.FloorMod,
    "min": E.Min,
    "max": E.Max,
}
_OTHER_DTYPE = {"int32": "int64", "int64": "int32"}
N_VARS = 3


@functools.cache  # one strategy, drawn from again and again (building one costs more)
def recipes(depth: int = 3) -> st.SearchStrategy:
    leaf = st.one_of(
        st.tuples(st.just("var"), st.integers(0, N_VARS - 1)),
        st.tuples(st.just("const"), st.integers(-4, 9)),
    )
    if depth == 0:
        return leaf
    sub = recipes(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(st.sampled_from(sorted(_BINARY)), sub, sub),
        st.tuples(st.just("load"), sub),
        st.tuples(st.just("cast"), sub),
        st.tuples(st.just("select"), sub, sub, sub, sub),
    )


#: a bound per variable, or None (unbounded)
bounds_lists = st.lists(
    st.one_of(st.none(), st.tuples(st.just(0), st.integers(0, 40))),
    min_size=N_VARS,
    max_size=N_VARS,
)
dtypes = st.sampled_from(["int32", "int64"])


class Env:
    """Fresh variables and a fresh buffer of one dtype to build recipes with."""

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype
        self.vars = [T.Var(f"v{k}", dtype) for k in range(N_VARS)]
        self.buffer = Buffer("A", (64,), dtype)

    def build(self, r: tuple) -> E.PrimExpr:
        kind, *args = r
        if kind == "var":
            return self.vars[args[0]]
        if kind == "const":
            return E.IntImm(self.dtype, args[0])
        sub = [self.build(a) for a in args]
        if kind in _BINARY:
            return _BINARY[kind](*sub)
        if kind == "load":
            return E.BufferLoad(self.buffer, (sub[0],))
        if kind == "cast":
            return E.Cast(self.dtype, E.Cast(_OTHER_DTYPE[self.dtype], sub[0]))
        assert kind == "select"
        return E.Select(E.LT(sub[0], sub[1]), sub[2], sub[3])

    def bounds(self, bounds: list) -> dict:
        return {v: b for v, b in zip(self.vars, bounds) if b is not None}


def canonical(r: tuple, bounds: list, order: dict | None = None) -> tuple:
    """``r`` with its variables numbered by first appearance (in the key's order of
    visit) and given their bounds."""
    order = {} if order is None else order
    kind, *args = r
    if kind == "var":
        k = order.setdefault(args[0], len(order))
        return ("var", k, bounds[args[0]])
    if kind == "const":
        return r
    return (kind, *[canonical(a, bounds, order) for a in args])


def key(e: E.PrimExpr, bounds: dict) -> tuple[tuple, StructuralKey]:
    keyer = StructuralKey(bounds)
    return keyer.key(e), keyer


@settings(max_examples=300, deadline=None)
@given(r=recipes(), bounds=bounds_lists, dtype=dtypes)
def test_a_renamed_expression_has_the_same_key_and_the_renaming(r, bounds, dtype):
    first, other = Env(dtype), Env(dtype)
    e, renamed = first.build(r), other.build(r)
    k1, keyer1 = key(e, first.bounds(bounds))
    k2, keyer2 = key(renamed, other.bounds(bounds))
    assert k1 == k2
    assert hash(k1) == hash(k2)
    # the renaming turns the first expression into the other one, in the other's names
    vmap, bmap = keyer2.renaming(keyer1.names)
    keys = ExprKeyer()
    assert keys.key(substitute(e, vmap, bmap)) == keys.key(renamed)
    assert keyer2.covers(renamed)
    assert keyer2.covers(e) == (not keyer1.names)  # e has names of its own, if any


@st.composite
def pairs(draw):
    """Two recipes with bounds and dtypes: often the same, or the same but in one part."""
    r1, b1, d1 = draw(recipes()), draw(bounds_lists), draw(dtypes)
    r2 = draw(st.one_of(st.just(r1), recipes(), st.integers(0, 20).map(lambda k: tweak(r1, k))))
    b2 = draw(st.one_of(st.just(b1), bounds_lists))
    d2 = draw(st.one_of(st.just(d1), dtypes))
    return (r1, b1, d1), (r2, b2, d2)


def tweak(r: tuple, k: int) -> tuple:
    """``r`` with its ``k``-th leaf (mod the number of leaves) changed: a constant plus
    one, a variable the next one."""
    leaves = []

    def walk(x: tuple) -> None:
        if x[0] in ("var", "const"):
            leaves.append(x)
        else:
            for a in x[1:]:
                walk(a)

    walk(r)
    target = leaves[k % len(leaves)]

    def rebuild(x: tuple) -> tuple:
        if x is target:
            if x[0] == "const":
                return ("const", x[1] + 1)
            return ("var", (x[1] + 1) % N_VARS)
        if x[0] in ("var", "const"):
            return x
        return (x[0], *[rebuild(a) for a in x[1:]])

    return rebuild(r)


@settings(max_examples=500, deadline=None)
@given(pair=pairs())
def test_keys_are_equal_exactly_when_the_expressions_are_up_to_renaming(pair):
    (r1, b1, d1), (r2, b2, d2) = pair
    env1, env2 = Env(d1), Env(d2)
    k1, _ = key(env1.build(r1), env1.bounds(b1))
    k2, _ = key(env2.build(r2), env2.bounds(b2))
    same = d1 == d2 and canonical(r1, b1) == canonical(r2, b2)
    assert (k1 == k2) == same


def test_structure_constants_dtypes_and_bounds_tell_keys_apart():
    x, y = T.Var("x"), T.Var("y")
    x64 = T.Var("x", "int64")
    b = {x: (0, 7), y: (0, 7)}
    k = StructuralKey
    assert k(b).key(x + y) == k(b).key(y + x)  # renamed, bounds alike
    assert k(b).key(x + x) != k(b).key(x + y)  # one variable, or two
    assert k(b).key(x + y) != k(b).key(x - y)
    assert k(b).key(x + 1) != k(b).key(x + 2)
    assert k(b).key(x + 1) != k({x64: (0, 7)}).key(x64 + E.IntImm("int64", 1))
    assert k(b).key(x + 1) != k({x: (0, 8)}).key(x + 1)
    assert k(b).key(x + 1) != k().key(x + 1)
    # buffers: by order and dtype
    A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32")
    C = Buffer("C", (8,), "float16")
    assert k().key(E.BufferLoad(A, (x,))) == k().key(E.BufferLoad(B, (y,)))
    assert k().key(E.BufferLoad(A, (x,))) != k().key(E.BufferLoad(C, (x,)))
    two = E.BufferLoad(A, (x,)) + E.BufferLoad(B, (x,))
    assert k().key(two) != k().key(E.BufferLoad(A, (x,)) + E.BufferLoad(A, (x,)))
    # the numbering is shared by the keys an instance gives
    joint = k()
    assert joint.key(x) != joint.key(y) and list(joint.names) == [x, y]


def test_large_shared_or_unknown_expressions_are_unkeyable():
    x = T.Var("x")
    e = x
    for _ in range(30):  # a DAG of 2**30 paths
        e = T.min(e + 1, e * 2)
    with pytest.raises(Unkeyable):
        StructuralKey().key(e)
    one = T.const(1)
    chain = x
    for _ in range(MAX_NODES):
        chain = E.Add(chain, one)
    StructuralKey().key(chain)  # MAX_NODES inner nodes: keyed
    with pytest.raises(Unkeyable):
        StructuralKey().key(E.Add(chain, one))
    with pytest.raises(Unkeyable):
        StructuralKey(max_nodes=10).key(chain)
    lhs, rhs = T.Var("a"), T.Var("b")
    reducer = E.CommReducer(lhs, rhs, lhs + rhs, T.const(0))
    with pytest.raises(Unkeyable):
        StructuralKey().key(E.Reduce(reducer, x, (), T.const(True)))


def test_covers_tells_whether_an_answer_is_in_the_keyed_names():
    x, y = T.Var("x"), T.Var("y")
    A, B = Buffer("A", (8,), "int32"), Buffer("B", (8,), "int32")
    keyer = StructuralKey()
    keyer.key(x + E.BufferLoad(A, (x,)))
    assert keyer.covers(T.const(3)) and keyer.covers((x, E.BufferLoad(A, (x * 2,))))
    assert not keyer.covers(x + y)
    assert not keyer.covers(E.BufferLoad(B, (x,)))
