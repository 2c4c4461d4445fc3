"""Visitor / Mutator / post_order_visit: dispatch, caching, and agreement with the plain
recursive definition (kept below as a reference) on real and random IR."""

from __future__ import annotations

import dataclasses
import gc
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metaschedule as ms
from metaschedule import te, tir
from metaschedule.tir import (
    Add,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    ForKind,
    IntImm,
    IterType,
    IterVar,
    Mutator,
    Node,
    PrimExpr,
    Range,
    SeqStmt,
    Var,
    Visitor,
    const,
    post_order_visit,
    structural_equal,
    substitute,
)
from metaschedule.tir.expr import FloatImm
from metaschedule.tir.functor import (
    any_node,
    collect_vars,
    node_fields,
    rebuild,
    replace_fields,
)
from metaschedule.tir.transform import lower
from metaschedule.tir.transform.region import touches

# ----------------------------------------------------------------------------- reference
# The functors as first written: getattr dispatch and dataclasses.fields on every node.


def _ref_fields(node):
    return [f for f in dataclasses.fields(node) if f.init]


class RefVisitor:
    def visit(self, node: Any) -> None:
        if isinstance(node, (tuple, list)):
            for x in node:
                self.visit(x)
            return
        if isinstance(node, dict):
            for x in node.values():
                self.visit(x)
            return
        if isinstance(node, Buffer):
            self.visit_buffer(node)
            return
        if not isinstance(node, Node):
            return
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            self.generic_visit(node)
        else:
            method(node)

    def generic_visit(self, node):
        for f in _ref_fields(node):
            self.visit(getattr(node, f.name))

    def visit_buffer(self, buffer):
        pass


class RefMutator:
    def visit(self, node: Any) -> Any:
        if isinstance(node, tuple):
            new = tuple(self.visit(x) for x in node)
            return node if all(a is b for a, b in zip(new, node)) else new
        if isinstance(node, list):
            return [self.visit(x) for x in node]
        if isinstance(node, dict):
            new_d = {k: self.visit(v) for k, v in node.items()}
            return node if all(new_d[k] is node[k] for k in node) else new_d
        if isinstance(node, Buffer):
            return self.visit_buffer(node)
        if not isinstance(node, Node):
            return node
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            return self.generic_visit(node)
        return method(node)

    def generic_visit(self, node):
        changes = {}
        for f in _ref_fields(node):
            old = getattr(node, f.name)
            new = self.visit(old)
            if new is not old:
                changes[f.name] = new
        return dataclasses.replace(node, **changes) if changes else node

    def visit_buffer(self, buffer):
        return buffer


def ref_post_order(node) -> list:
    out = []

    class _V(RefVisitor):
        def visit(self, n):
            super().visit(n)
            if isinstance(n, Node) and not isinstance(n, Buffer):
                out.append(n)

    _V().visit(node)
    return out


# ----------------------------------------------------------------------------- workloads

_NODE_CLASSES = sorted(
    {
        c.__name__
        for m in (tir.expr, tir.stmt, tir.function)
        for c in vars(m).values()
        if isinstance(c, type) and issubclass(c, Node) and dataclasses.is_dataclass(c)
    }
)


def _matmul_schedule(n=32, note=True):
    A = te.placeholder((n, n), "float32", "A")
    B = te.placeholder((n, n), "float32", "B")
    k = te.reduce_axis((0, n), "k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((n, n), lambda i, j: te.exp(C[i, j] * 0.5), name="D")
    sch = ms.tir.Schedule(te.create_prim_func([A, B, D]), seed=0)
    block = sch.get_block("C")
    i, j, kk = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, kk, i1, j1)
    sch.cache_write(block, 0, "local")
    sch.parallel(i0)
    sch.vectorize(j1)
    if note:  # a list in annotations: mutators always rebuild lists
        sch.annotate(j0, "pragma_note", ["a", 1])
    return sch


_SCH = _matmul_schedule()
FUNCS = {"blocks": _SCH.mod["main"], "lowered": lower(_SCH.mod["main"])}


def _recorder(base, log):
    """A ``base`` subclass with a visit_<Name> for every node class, logging the walk."""

    def make(name):
        def method(self, node):
            log.append((name, id(node)))
            return self.generic_visit(node)

        return method

    methods = {"visit_" + name: make(name) for name in _NODE_CLASSES}

    def visit_buffer(self, b):
        log.append(("buffer", id(b)))
        return b

    methods["visit_buffer"] = visit_buffer
    return type("Recorder", (base,), methods)


def _value_recorder(base, log):
    """A ``base`` subclass that overrides ``visit`` and logs every value it is given."""

    def visit(self, node):
        log.append((type(node).__name__, id(node) if isinstance(node, Node) else repr(node)))
        return base.visit(self, node)

    return type("ValueRecorder", (base,), {"visit": visit})


# ----------------------------------------------------------------------------- random IR

_VARS = [Var("i"), Var("j"), Var("k")]
_BUF = tir.decl_buffer((4, 4), "float32", "X")
_IBUF = tir.decl_buffer((8,), "int32", "Y")


def _int_exprs():
    leaves = st.one_of(st.sampled_from(_VARS), st.integers(-3, 9).map(lambda v: const(v)))

    def extend(children):
        binop = st.sampled_from(
            [tir.Add, tir.Sub, tir.Mul, tir.FloorDiv, tir.FloorMod, tir.Min, tir.Max]
        )
        return st.one_of(
            st.tuples(binop, children, children).map(lambda t: t[0](t[1], t[2])),
            children.map(lambda e: BufferLoad(_IBUF, (e,))),
            st.tuples(children, children, children).map(
                lambda t: tir.Select(tir.LT(t[0], t[1]), t[2], t[0])
            ),
        )

    return st.recursive(leaves, extend, max_leaves=12)


def _stmts():
    def store(t):
        idx, val = t
        value = tir.Cast("float32", val) + BufferLoad(_BUF, (idx % 4, 0))
        return BufferStore(_BUF, value, (idx % 4, const(1)))

    leaf = st.tuples(_int_exprs(), _int_exprs()).map(store)

    def extend(children):
        return st.one_of(
            st.tuples(st.sampled_from(_VARS), _int_exprs(), children).map(
                lambda t: For(t[0], 0, 4, ForKind.SERIAL, t[2], annotations={"e": t[1]})
            ),
            st.lists(children, min_size=2, max_size=3).map(lambda s: SeqStmt(tuple(s))),
            st.tuples(_int_exprs(), children).map(
                lambda t: tir.IfThenElse(tir.LT(t[0], const(3)), t[1])
            ),
        )

    return st.recursive(leaf, extend, max_leaves=6)


# ----------------------------------------------------------------------------- agreement


def _same_walk(node):
    new_log, ref_log = [], []
    _recorder(Visitor, new_log)().visit(node)
    _recorder(RefVisitor, ref_log)().visit(node)
    assert new_log == ref_log
    new_vals, ref_vals = [], []
    _value_recorder(_recorder(Visitor, new_log), new_vals)().visit(node)
    _value_recorder(_recorder(RefVisitor, ref_log), ref_vals)().visit(node)
    assert new_vals == ref_vals  # an overridden visit still sees every field value
    assert [id(n) for n in _post_order(node)] == [id(n) for n in ref_post_order(node)]
    assert collect_vars(node) == {n for n in ref_post_order(node) if isinstance(n, Var)}
    return new_log


def _post_order(node):
    out = []
    post_order_visit(node, out.append)
    return out


class _Bump:
    """Mutation rules shared by the two implementations: 1 -> 2, i -> j, X -> X2."""

    X2 = Buffer("X2", _BUF.shape, "float32")

    def visit_IntImm(self, e):
        return IntImm(e.dtype, 2) if e.value == 1 and e.dtype == "int32" else e

    def visit_Var(self, v):
        return _VARS[1] if v is _VARS[0] else v

    def visit_buffer(self, b):
        return self.X2 if b is _BUF else b


class NewBump(_Bump, Mutator):
    pass


class RefBump(_Bump, RefMutator):
    pass


def _shared_ids(out, original) -> list[bool]:
    """For each node of ``out`` (post-order): is it an object of ``original``?"""
    ids = {id(n) for n in _post_order(original)}
    return [id(n) in ids for n in _post_order(out)]


def _same_mutation(node):
    new, ref = NewBump().visit(node), RefBump().visit(node)
    assert structural_equal(new, ref)
    assert _shared_ids(new, node) == _shared_ids(ref, node)
    assert (new is node) == (ref is node)
    return new


@pytest.mark.parametrize("which", sorted(FUNCS))
def test_walks_agree_with_reference_on_scheduled_matmul(which):
    func = FUNCS[which]
    log = _same_walk(func)
    assert {"For", "BufferStore", "BufferLoad", "buffer"} <= {name for name, _ in log}
    if which == "blocks":
        assert {"Block", "BlockRealize", "IterVar", "BufferRegion"} <= {n for n, _ in log}
    out = _same_mutation(func)
    assert out is not func


@settings(max_examples=60, deadline=None)
@given(_stmts())
def test_walks_and_mutations_agree_with_reference_on_random_statements(stmt):
    _same_walk(stmt)
    _same_mutation(stmt)
    pred = lambda n: isinstance(n, BufferLoad) and n.buffer is _IBUF
    assert any_node(stmt, pred) == any(pred(n) for n in ref_post_order(stmt))
    assert touches(stmt, _IBUF) == any(pred(n) for n in ref_post_order(stmt))


@settings(max_examples=60, deadline=None)
@given(_int_exprs())
def test_substitute_agrees_with_reference_on_random_expressions(e):
    _same_walk(e)
    _same_mutation(e)
    vmap = {_VARS[2]: _VARS[0] * 3}

    class RefSub(RefMutator):
        def visit_Var(self, v):
            return vmap.get(v, v)

    new, ref = substitute(e, vmap), RefSub().visit(e)
    assert structural_equal(new, ref)
    assert (new is e) == (ref is e)


# ----------------------------------------------------------------------------- caching


def test_subclass_defined_after_first_traversal_dispatches_its_own_methods():
    e = _VARS[0] + 1

    class Base(Visitor):
        def __init__(self):
            self.seen = []

        def visit_Var(self, v):
            self.seen.append("base")

    assert Base().visit(e) is None
    b = Base()
    b.visit(e)
    assert b.seen == ["base"]

    class Sub(Base):
        def visit_Var(self, v):
            self.seen.append("sub")

        def visit_IntImm(self, c):
            self.seen.append(c.value)

    s = Sub()
    s.visit(e)
    assert s.seen == ["sub", 1]
    b2 = Base()
    b2.visit(e)
    assert b2.seen == ["base"]  # the base's table did not pick up the subclass's methods


def test_method_assigned_to_class_after_traversal_is_used_and_removal_restores_generic():
    e = Add(_VARS[0], const(5))

    class Count(Visitor):
        def __init__(self):
            self.n = 0

    class Sub(Count):
        pass

    Sub().visit(e)  # fill both tables
    Count().visit(e)

    def visit_IntImm(self, c):
        self.n += c.value

    Count.visit_IntImm = visit_IntImm  # on the base: the subclass inherits it
    s = Sub()
    s.visit(e)
    assert s.n == 5
    del Count.visit_IntImm
    s = Sub()
    s.visit(e)
    assert s.n == 0


def test_visit_method_set_on_instance_in_init_is_used():
    class Names(Visitor):
        def __init__(self):
            self.names = []
            self.visit_Var = lambda v: self.names.append(v.name)

    n = Names()
    n.visit((_VARS[0] + _VARS[1], {"x": _VARS[2]}))
    assert n.names == ["i", "j", "k"]


def test_overridden_generic_visit_is_called_for_nodes_without_handlers():
    class Depth(Mutator):
        def __init__(self):
            self.kinds = []

        def generic_visit(self, node):
            self.kinds.append(type(node).__name__)
            return super().generic_visit(node)

        def visit_Var(self, v):
            return _VARS[2]

    m = Depth()
    out = m.visit(tir.Mul(_VARS[0], const(3)))
    assert m.kinds == ["Mul", "IntImm"]
    assert isinstance(out, tir.Mul) and out.a is _VARS[2] and out.b.value == 3


@dataclass(frozen=True, eq=False, repr=False)
class Twice(PrimExpr):
    """A node class the functors have never seen (defined by a test)."""

    value: PrimExpr
    label: str = "twice"
    dtype: str = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "dtype", self.value.dtype)


@dataclass(frozen=True, eq=False, repr=False)
class Tagged(Node):
    """A node class with keyword-only fields: rebuilt with keywords."""

    body: Any
    tag: str = field(default="t", kw_only=True)


def test_node_class_registered_later_is_traversed_and_rebuilt():
    e = Twice(_VARS[0] + 1, label="x")
    assert [type(n).__name__ for n in _post_order(e)] == ["Var", "IntImm", "Add", "Twice"]
    assert collect_vars(Tagged((e,), tag="q")) == {_VARS[0]}
    out = substitute(e, {_VARS[0]: _VARS[1]})
    assert type(out) is Twice and out.label == "x" and out.value.a is _VARS[1]
    with pytest.raises(TypeError, match="dtype"):  # the rebuilt node is validated
        substitute(e, {_VARS[0]: tir.Var("w", "int64")})
    t = Tagged(e, tag="kept")
    t2 = substitute(t, {_VARS[0]: _VARS[2]})
    assert type(t2) is Tagged and t2.tag == "kept" and t2.body.value.a is _VARS[2]
    assert node_fields(Tagged) == ("body", "tag")
    assert rebuild(t, [_VARS[0], "new"]).tag == "new"
    _same_walk(Tagged((e, [e], {"k": e}), tag="z"))


def test_functor_classes_made_per_call_are_not_kept_alive():
    def make():
        class Local(Visitor):
            def visit_Var(self, v):
                pass

        Local().visit(FUNCS["lowered"])
        return weakref.ref(Local)

    ref = make()
    gc.collect()
    assert ref() is None


def test_mutator_keeps_identity_when_nothing_changes():
    func = lower(_matmul_schedule(16, note=False).mod["main"])
    assert Mutator().visit(func) is func
    assert Mutator().visit(FUNCS["lowered"]) is not FUNCS["lowered"]  # it has a list
    assert RefMutator().visit(FUNCS["lowered"]) is not FUNCS["lowered"]
    ann = {"a": (1, _VARS[0]), "b": [2]}
    assert Mutator().visit(ann) is not ann  # a list inside is always rebuilt, as before
    assert Mutator().visit({"a": (1, _VARS[0])})["a"][1] is _VARS[0]
    same = {"a": (1, _VARS[0])}
    assert Mutator().visit(same) is same


def test_any_node_stops_at_the_first_match():
    seen = []

    def pred(n):
        seen.append(n)
        return isinstance(n, For)

    assert any_node(FUNCS["lowered"].body, pred)
    assert len(seen) < len(_post_order(FUNCS["lowered"].body)) // 4
    assert not any_node((1, "x", [None]), pred)


# ----------------------------------------------------------------------------- constructors
# The node constructors skip conversions that would not change anything; they must still
# normalise and validate what they are given.


def test_constructors_still_normalise_and_validate():
    assert type(IntImm("int32", True).value) is int and IntImm("int32", True).value == 1
    assert type(IntImm("int64", np.int64(3)).value) is int
    assert IntImm(np.dtype("int64"), 3).dtype == "int64"
    assert type(IntImm(np.dtype("int64"), 3).dtype) is str
    assert type(FloatImm("float32", np.float32(0.5)).value) is float
    assert FloatImm("float64", 2).value == 2.0 and type(FloatImm("float64", 2).value) is float
    assert Var("v", np.int64).dtype == "int64"
    with pytest.raises(TypeError, match="IntImm needs an integer"):
        IntImm("float32", 1)
    with pytest.raises(TypeError, match="FloatImm needs a float"):
        FloatImm("int32", 1)
    with pytest.raises(TypeError, match="unsupported dtype"):
        Var("v", "int31")
    loop = For(_VARS[0], 0, 4, "serial", tir.Evaluate(0))
    assert loop.kind is ForKind.SERIAL and loop.extent.value == 4
    iv = IterVar(_VARS[1], Range(0, 4), 2)
    assert iv.iter_type is IterType.COMM_REDUCE
    with pytest.raises(ValueError):
        For(_VARS[0], 0, 4, "sideways", tir.Evaluate(0))
    load = BufferLoad(_IBUF, [np.int32(1)])
    assert type(load.indices) is tuple and load.indices[0].value == 1


def test_replace_fields_matches_dataclasses_replace():
    loop = For(_VARS[0], 0, 4, ForKind.SERIAL, tir.Evaluate(0), annotations={"u": 2})
    new = replace_fields(loop, extent=8, kind="unroll")
    assert new.extent.value == 8 and new.kind is ForKind.UNROLLED  # __post_init__ ran
    assert new.body is loop.body and new.annotations == {"u": 2}
    assert new.annotations is not loop.annotations  # copied, as the constructor does
    assert replace_fields(Tagged(_VARS[0], tag="a"), tag="b").tag == "b"
    with pytest.raises(ValueError, match="init=False"):
        replace_fields(Add(_VARS[0], _VARS[1]), dtype="int64")
    with pytest.raises(TypeError):
        replace_fields(loop, no_such_field=1)
    with pytest.raises(TypeError, match="dtype"):
        replace_fields(Add(_VARS[0], _VARS[1]), b=tir.Var("w", "int64"))
