"""JSON round trip of IR nodes: every kind, sharing, annotations, registry, malformed input."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaschedule import te, tir
from metaschedule.tir import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    Cast,
    CommReducer,
    Evaluate,
    FloatImm,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IRModule,
    IterType,
    IterVar,
    Not,
    PrimExpr,
    PrimFunc,
    Range,
    Reduce,
    Select,
    SeqStmt,
    StringImm,
    Var,
    const,
)
from metaschedule.tir.expr import Node
from metaschedule.tir.serialize import (
    from_json_dict,
    load_json,
    register_node,
    registered_types,
    save_json,
    to_json_dict,
)
from metaschedule.tir.stmt import true
from metaschedule.tir.structural import assert_structural_equal, structural_equal


def roundtrip(node):
    text = save_json(node)
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON literal {c}"))
    back = load_json(text)
    assert type(back) is type(node)
    assert_structural_equal(node, back, map_free_vars=True)
    assert save_json(back) == text  # a fixed point: nothing lost or reordered
    return back


# ----------------------------------------------------------------------------- expressions

X, Y = Var("x"), Var("y")
F = Var("f", "float32")
A = Buffer("A", (4, 8), "float32")


def _expressions():
    out = [
        X,
        Var("w", "int64"),
        IntImm("int64", 2**62 + 5),
        IntImm("int64", -(2**63)),
        IntImm("uint8", 255),
        const(True),
        FloatImm("float32", 0.1),
        FloatImm("float64", -0.0),
        FloatImm("float32", float("inf")),
        FloatImm("float32", float("-inf")),
        FloatImm("float16", float("nan")),
        StringImm('he said "hi"\n\u00e9'),
        Cast("float32", X),
        Not(X < Y),
        Select(X < Y, F, F * 2.0),
        tir.exp(F),
        tir.pow(F, F),
        A[X, Y + 1],
        X == Y,
        X != Y,
    ]
    for op in (
        tir.Add,
        tir.Sub,
        tir.Mul,
        tir.Div,
        tir.FloorDiv,
        tir.FloorMod,
        tir.Min,
        tir.Max,
        tir.EQ,
        tir.NE,
        tir.LT,
        tir.LE,
        tir.GT,
        tir.GE,
    ):
        out.append(op(X, Y))
    out.append(tir.And(X < Y, X > 0))
    out.append(tir.Or(X < Y, X > 0))
    return out


@pytest.mark.parametrize("expr", _expressions(), ids=lambda e: type(e).__name__)
def test_expression_round_trip(expr):
    back = roundtrip(expr)
    assert back.dtype == expr.dtype
    for f in dataclasses.fields(expr):
        v, w = getattr(expr, f.name), getattr(back, f.name)
        if isinstance(v, float) and math.isnan(v):
            assert math.isnan(w)
        elif isinstance(v, float):
            assert v == w and math.copysign(1, v) == math.copysign(1, w)
        elif not isinstance(v, (Node, tuple)):
            assert v == w and type(v) is type(w)


def test_reduce_round_trip():
    x, y = Var("x", "float32"), Var("y", "float32")
    comb = CommReducer(x, y, x + y, const(0.0))
    k = IterVar(Var("k"), Range(0, 8), IterType.COMM_REDUCE)
    red = Reduce(comb, A[0, k.var], (k,), true())
    back = roundtrip(red)
    assert back.axis[0].iter_type is IterType.COMM_REDUCE
    assert back.axis[0].var is back.source.indices[1]


def test_python_comparison_nodes_keep_their_class():
    back = load_json(save_json(X == Y))
    assert type(back) is type(X == Y)
    assert bool(back) is False  # identity semantics survive: different objects


# ----------------------------------------------------------------------------- statements


@pytest.mark.parametrize("kind", list(ForKind))
def test_for_kinds_round_trip(kind):
    i = Var("i")
    tag = "threadIdx.x" if kind is ForKind.THREAD_BINDING else None
    loop = For(
        i,
        0,
        16,
        kind,
        Evaluate(i),
        thread_binding=tag,
        annotations={"pragma_auto_unroll_max_step": 64},
    )
    back = roundtrip(loop)
    assert back.kind is kind and back.thread_binding == tag
    assert back.body.value is back.loop_var


def test_statement_round_trips():
    i = Var("i")
    T = Buffer("T", (4,), "float32", "local")
    stmts = [
        IfThenElse(i < 2, Evaluate(i)),
        IfThenElse(i < 2, Evaluate(i), Evaluate(i + 1)),
        SeqStmt((Evaluate(i), Evaluate(const(0)))),
        Allocate(T, BufferStore(T, 1.5, (i,))),
        BufferStore(A, F, (i, i + 1)),
    ]
    for s in stmts:
        roundtrip(s)
    back = roundtrip(stmts[3])
    assert back.buffer.scope == "local" and back.body.buffer is back.buffer
    assert roundtrip(stmts[0]).else_case is None


def make_func() -> PrimFunc:
    n = Var("n")
    A_ = Buffer("A", (n, 8), "float32")
    C_ = Buffer("C", (n,), "float32")
    T = Buffer("T", (n,), "float32", "local")
    i, k = Var("i"), Var("k")
    vi, vk = Var("vi"), Var("vk")
    block = Block(
        (IterVar(vi, Range(0, n)), IterVar(vk, Range(0, 8), IterType.COMM_REDUCE)),
        reads=(BufferRegion(A_, (Range(vi, 1), Range(0, 8))),),
        writes=(BufferRegion(T, (Range(vi, 1),)),),
        name_hint="rowsum",
        body=BufferStore(T, T[vi] + A_[vi, vk], (vi,)),
        init=BufferStore(T, 0.0, (vi,)),
        annotations={
            "meta_schedule.tiling_structure": "SSR",
            "tile": [4, [2, 2], (1, 2)],
            "nested": {"a": {"b": [1.5, float("inf"), float("-inf"), float("nan")]}},
            "expr": vi * 2,
            "big": 2**70,
            "flag": True,
            "none": None,
            "int_keys": {1: "one", 2: "two"},
        },
    )
    nest = For(
        i,
        0,
        n,
        ForKind.PARALLEL,
        For(k, 0, 8, ForKind.UNROLLED, BlockRealize((i, k), i < n, block)),
    )
    j, vj = Var("j"), Var("vj")
    copy = Block(
        (IterVar(vj, Range(0, n)),),
        (BufferRegion(T, (Range(vj, 1),)),),
        (BufferRegion(C_, (Range(vj, 1),)),),
        "copy",
        BufferStore(C_, T[vj], (vj,)),
    )
    nest2 = For(j, 0, n, ForKind.VECTORIZED, BlockRealize((j,), true(), copy))
    root = Block((), (), (), "root", SeqStmt((nest, nest2)), alloc_buffers=(T,))
    return PrimFunc(
        (A_, C_), BlockRealize((), true(), root), {"global_symbol": "rowsum", "tir.noalias": True}
    )


def test_primfunc_round_trip_preserves_everything():
    f = make_func()
    g = roundtrip(f)
    assert structural_equal(f, g)  # the param shape var n is a definition: no mapping needed
    block = g.body.block.body.seq[0].body.body.block
    ann = block.annotations
    assert ann["tile"] == [4, [2, 2], (1, 2)] and isinstance(ann["tile"][2], tuple)
    inner = ann["nested"]["a"]["b"]
    assert inner[:3] == [1.5, math.inf, -math.inf] and math.isnan(inner[3])
    assert ann["big"] == 2**70 and ann["flag"] is True and ann["none"] is None
    assert ann["int_keys"] == {1: "one", 2: "two"}
    assert isinstance(ann["expr"], PrimExpr) and ann["expr"].a is block.iter_vars[0].var
    assert block.iter_vars[1].iter_type is IterType.COMM_REDUCE
    assert block.init is not None and block.name_hint == "rowsum"
    assert g.attrs == {"global_symbol": "rowsum", "tir.noalias": True}
    loops = g.body.block.body.seq
    assert [loops[0].kind, loops[0].body.kind, loops[1].kind] == [
        ForKind.PARALLEL,
        ForKind.UNROLLED,
        ForKind.VECTORIZED,
    ]


def test_sharing_survives_the_round_trip():
    g = load_json(save_json(make_func()))
    A_, C_ = g.params
    root = g.body.block
    (T,) = root.alloc_buffers
    n = A_.shape[0]
    assert C_.shape[0] is n and T.shape[0] is n
    realize = root.body.seq[0].body.body
    block = realize.block
    assert block.writes[0].buffer is T and block.body.buffer is T
    assert block.reads[0].buffer is A_
    vi = block.iter_vars[0].var
    assert block.body.indices[0] is vi and block.init.indices[0] is vi
    assert realize.iter_values[0] is root.body.seq[0].loop_var


def test_irmodule_round_trip():
    mod = IRModule({"main": make_func(), "second": make_func()})
    back = roundtrip(mod)
    assert list(back.functions) == ["main", "second"]
    assert back["main"] is not back["second"]


def test_json_format_is_a_node_table():
    data = to_json_dict(X + 1)
    assert data["version"] == 1
    assert [e["type"] for e in data["nodes"]] == ["Var", "IntImm", "Add"]
    assert data["root"] == 2
    assert data["nodes"][2]["fields"] == {"a": {"node": 0}, "b": {"node": 1}}
    assert structural_equal(from_json_dict(data), X + 1, map_free_vars=True)


def test_pretty_output_loads_the_same():
    f = make_func()
    assert save_json(load_json(save_json(f, indent=2))) == save_json(f)


def test_deep_expression_round_trip():
    e = X
    for c in range(5000):
        e = e + c
    back = load_json(save_json(e))
    assert structural_equal(e, back, map_free_vars=True)


# ----------------------------------------------------------------------------- registry


def test_core_classes_are_registered():
    names = set(registered_types())
    expected = {
        "Var",
        "IntImm",
        "FloatImm",
        "StringImm",
        "Cast",
        "Add",
        "Sub",
        "Mul",
        "Div",
        "FloorDiv",
        "FloorMod",
        "Min",
        "Max",
        "EQ",
        "NE",
        "LT",
        "LE",
        "GT",
        "GE",
        "And",
        "Or",
        "Not",
        "Select",
        "Call",
        "BufferLoad",
        "CommReducer",
        "Reduce",
        "Buffer",
        "Range",
        "IterVar",
        "BufferRegion",
        "BufferStore",
        "For",
        "SeqStmt",
        "IfThenElse",
        "Evaluate",
        "Allocate",
        "Block",
        "BlockRealize",
        "PrimFunc",
        "IRModule",
        "IterType",
        "ForKind",
        "EqualOp",
        "NotEqualOp",
    }
    assert expected <= names


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Prefetch(tir.Stmt):
    """A node class defined outside tir, to test opting in."""

    buffer: Buffer
    offsets: tuple
    hint: str = "L1"


def test_registered_node_class_serializes_generically():
    with pytest.raises(ValueError, match="not registered"):
        save_json(Prefetch(A, (X,)))
    register_node(Prefetch, "test.Prefetch")
    p = Prefetch(A, (X, X + 1), "L2")
    back = load_json(save_json(p))
    assert type(back) is Prefetch and back.hint == "L2"
    assert back.offsets[1].a is back.offsets[0]
    # a field with a default may be absent (older files stay readable)
    data = to_json_dict(p)
    del data["nodes"][data["root"]]["fields"]["hint"]
    assert from_json_dict(data).hint == "L1"
    # and the name is now taken
    with pytest.raises(ValueError, match="name is taken"):
        register_node(For, "test.Prefetch")
    with pytest.raises(TypeError, match="expects a Node dataclass"):
        register_node(int)


def test_unsupported_values_are_rejected_on_save():
    with pytest.raises(TypeError, match="cannot serialize a object value"):
        save_json(For(Var("i"), 0, 2, ForKind.SERIAL, Evaluate(X), annotations={"o": object()}))
    with pytest.raises(TypeError, match="expects an IR node"):
        save_json([X])


# ----------------------------------------------------------------------------- malformed


def _valid():
    return to_json_dict(X + 1)


def _with(mutator):
    data = _valid()
    mutator(data)
    return json.dumps(data)


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be an object"),
        ('{"version": 1, "nodes": []}', "lacks the keys \\['root'\\]"),
        (_with(lambda d: d.update(version=99)), "unsupported IR JSON version 99"),
        (_with(lambda d: d.update(root=7)), "'root' must be a node index"),
        (_with(lambda d: d.update(nodes={})), "'nodes' must be a list"),
        (_with(lambda d: d["nodes"][0].update(type="Bogus")), "node 0: unknown node type 'Bogus'"),
        (_with(lambda d: d["nodes"][0].update(type="ForKind")), "unknown node type 'ForKind'"),
        (_with(lambda d: d["nodes"][0].pop("fields")), "node 0: expected an object"),
        (_with(lambda d: d["nodes"][0]["fields"].update(color=1)), "unknown fields \\['color'\\]"),
        (_with(lambda d: d["nodes"][1]["fields"].pop("value")), "field 'value': missing"),
        (_with(lambda d: d["nodes"][2]["fields"].update(b={"node": 2})), "refers to node 2"),
        (_with(lambda d: d["nodes"][2]["fields"].update(b={"node": "0"})), "refers to node '0'"),
        (_with(lambda d: d["nodes"][2]["fields"].update(b={"blob": 1})), "unrecognized encoded"),
        (_with(lambda d: d["nodes"][1]["fields"].update(dtype="float32")), "cannot build it"),
        (_with(lambda d: d["nodes"][1]["fields"].update(dtype="int33")), "cannot build it"),
        (
            _with(lambda d: d["nodes"][2]["fields"].update(b=3)),
            "node 2 \\(Add\\), field 'b': expected PrimExpr, got int",
        ),
        (
            '{"version": 1, "root": 0, "nodes": [{"type": "Var", "fields": '
            '{"name": NaN, "dtype": "int32"}}]}',
            "invalid JSON literal NaN",
        ),
    ],
)
def test_malformed_input_raises_value_error(text, message):
    with pytest.raises(ValueError, match=message):
        load_json(text)


def test_bad_enum_member_is_named():
    i = Var("i")
    data = to_json_dict(For(i, 0, 2, ForKind.SERIAL, Evaluate(i)))
    data["nodes"][data["root"]]["fields"]["kind"] = {"enum": "ForKind", "name": "SIDEWAYS"}
    with pytest.raises(ValueError, match="ForKind has no member 'SIDEWAYS'; members: SERIAL"):
        from_json_dict(data)
    data["nodes"][data["root"]]["fields"]["kind"] = {"enum": "Nope", "name": "SERIAL"}
    with pytest.raises(ValueError, match="unknown enum 'Nope'"):
        from_json_dict(data)


def test_nodes_wired_into_the_wrong_field_are_rejected():
    i = Var("i")
    data = to_json_dict(SeqStmt((For(i, 0, 2, ForKind.SERIAL, Evaluate(i)), Evaluate(X))))
    types = [e["type"] for e in data["nodes"]]
    loop, var = types.index("For"), types.index("Var")
    data["nodes"][loop]["fields"]["body"] = {"node": var}
    with pytest.raises(ValueError, match=f"node {loop} \\(For\\), field 'body': expected Stmt"):
        from_json_dict(data)
    data = to_json_dict(SeqStmt((Evaluate(i), Evaluate(X))))
    seq = data["root"]
    data["nodes"][seq]["fields"]["seq"]["tuple"][1] = {"node": 0}  # the Var, not a Stmt
    with pytest.raises(ValueError, match="expected tuple\\[Stmt,...\\], got an item Var"):
        from_json_dict(data)
    data = to_json_dict(IRModule({"main": make_func()}))
    data["nodes"][data["root"]]["fields"]["functions"]["dict"]["main"] = {"node": 0}
    with pytest.raises(ValueError, match="expected dict\\[str,PrimFunc\\]"):
        from_json_dict(data)


def test_load_json_rejects_non_strings():
    with pytest.raises(TypeError, match="expects a JSON string"):
        load_json({"version": 1})


# ----------------------------------------------------------------------------- properties

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.text(max_size=5)
    | st.floats(allow_nan=True, allow_infinity=True),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3)
        | st.dictionaries(st.integers(0, 5), inner, max_size=2)
    ),
    max_leaves=10,
)


@settings(max_examples=80, deadline=None)
@given(_json_values)
def test_property_annotation_values_round_trip(value):
    i = Var("i")
    loop = For(i, 0, 2, ForKind.SERIAL, Evaluate(i), annotations={"v": value})
    back = load_json(save_json(loop))
    assert_structural_equal(loop, back)  # structural equality is type- and bit-exact on floats
    assert type(back.annotations["v"]) is type(value)


def test_te_function_round_trip():
    A = te.placeholder((8, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    B = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="B")
    func = te.create_prim_func([A, B])
    back = roundtrip(func)
    assert structural_equal(func, back)
