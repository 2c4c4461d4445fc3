"""Structural equality and hashing: alpha-renaming, scoping, free variables, stability."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaschedule import te, tir
from metaschedule.tir import (
    EQ,
    Add,
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    CommReducer,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    IRModule,
    IterType,
    IterVar,
    Max,
    PrimFunc,
    Range,
    Reduce,
    SeqStmt,
    Var,
    const,
)
from metaschedule.tir.stmt import true
from metaschedule.tir.structural import (
    assert_structural_equal,
    structural_equal,
    structural_hash,
)


def matmul(
    n: int = 16,
    dtype: str = "float32",
    kind: ForKind = ForKind.SERIAL,
    init_value: float = 0.0,
    combine=Add,
    swap: bool = False,
    name: str = "C",
    annotations: dict | None = None,
    scope: str = "global",
    iter_type: IterType = IterType.COMM_REDUCE,
) -> PrimFunc:
    """D = A @ B into a root-allocated buffer, then C = D + 1; every part is fresh."""
    A = Buffer("A", (n, n), dtype)
    B = Buffer("B", (n, n), dtype)
    C = Buffer("C", (n, n), dtype)
    D = Buffer("D", (n, n), dtype, scope)
    i, j, k = Var("i"), Var("j"), Var("k")
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
    ivs = (
        IterVar(vi, Range(0, n)),
        IterVar(vj, Range(0, n)),
        IterVar(vk, Range(0, n), iter_type),
    )
    a_idx = (vk, vi) if swap else (vi, vk)
    update = BufferStore(D, combine(D[vi, vj], A[a_idx] * B[vk, vj]), (vi, vj))
    block = Block(
        ivs,
        reads=(
            BufferRegion(A, (Range(vi, 1), Range(0, n))),
            BufferRegion(B, (Range(0, n), Range(vj, 1))),
        ),
        writes=(BufferRegion(D, (Range(vi, 1), Range(vj, 1))),),
        name_hint=name,
        body=update,
        init=BufferStore(D, const(init_value, dtype), (vi, vj)),
        annotations=annotations if annotations is not None else {"tile": [4, 4], "unroll": 16},
    )
    nest = For(
        i,
        0,
        n,
        kind,
        For(
            j,
            0,
            n,
            ForKind.SERIAL,
            For(k, 0, n, ForKind.SERIAL, BlockRealize((i, j, k), true(), block)),
        ),
    )
    ci, cj = Var("i"), Var("j")
    wi, wj = Var("vi"), Var("vj")
    copy = Block(
        (IterVar(wi, Range(0, n)), IterVar(wj, Range(0, n))),
        reads=(BufferRegion(D, (Range(wi, 1), Range(wj, 1))),),
        writes=(BufferRegion(C, (Range(wi, 1), Range(wj, 1))),),
        name_hint="out",
        body=BufferStore(C, D[wi, wj] + const(1, dtype), (wi, wj)),
    )
    nest2 = For(
        ci,
        0,
        n,
        ForKind.SERIAL,
        For(cj, 0, n, ForKind.SERIAL, BlockRealize((ci, cj), true(), copy)),
    )
    root = Block((), (), (), "root", SeqStmt((nest, nest2)), alloc_buffers=(D,))
    return PrimFunc((A, B, C), BlockRealize((), true(), root), {"global_symbol": "main"})


def check_equal(a, b, map_free_vars=False):
    assert structural_equal(a, b, map_free_vars)
    assert structural_equal(b, a, map_free_vars)
    assert structural_hash(a) == structural_hash(b)
    assert_structural_equal(a, b, map_free_vars)


def check_differ(a, b, map_free_vars=False):
    assert not structural_equal(a, b, map_free_vars)
    assert not structural_equal(b, a, map_free_vars)
    with pytest.raises(ValueError, match="structural mismatch at root"):
        assert_structural_equal(a, b, map_free_vars)


# ----------------------------------------------------------------------------- functions


def test_alpha_renamed_functions_are_equal_and_hash_equal():
    f, g = matmul(), matmul()
    assert f.params[0] is not g.params[0]
    check_equal(f, g)


@pytest.mark.parametrize(
    "change",
    [
        {"n": 8},
        {"dtype": "float64"},
        {"kind": ForKind.PARALLEL},
        {"init_value": 1.0},
        {"combine": Max},
        {"swap": True},
        {"name": "C2"},
        {"annotations": {"tile": [4, 8], "unroll": 16}},
        {"annotations": {"tile": [4, 4], "unroll": 16.0}},
        {"annotations": {"tile": [4, 4], "unrol": 16}},
        {"annotations": {"tile": [4, 4]}},
        {"scope": "local"},
        {"iter_type": IterType.DATA_PAR},
    ],
    ids=lambda d: "-".join(f"{k}={v}" for k, v in d.items()),
)
def test_changed_functions_differ_and_hash_differently(change):
    f, g = matmul(), matmul(**change)
    check_differ(f, g)
    assert structural_hash(f) != structural_hash(g)


def test_mismatch_message_names_path_and_both_sides():
    with pytest.raises(ValueError) as info:
        assert_structural_equal(matmul(), matmul(combine=Max))
    msg = str(info.value)
    assert "root.body.block.body.seq[0].body.body.body.block.body.value" in msg
    assert "Add vs Max" in msg
    assert "lhs:" in msg and "rhs:" in msg
    assert str(matmul(combine=Max)) in msg  # the full right-hand side is printed


def test_function_parameter_order_matters():
    A, B = Buffer("A", (4,)), Buffer("B", (4,))
    i = Var("i")
    body = For(i, 0, 4, ForKind.SERIAL, BufferStore(B, A[i], (i,)))
    check_differ(PrimFunc((A, B), body), PrimFunc((B, A), body))


def test_symbolic_shape_vars_of_params_are_definitions():
    def f():
        n = Var("n")
        A = Buffer("A", (n,))
        i = Var("i")
        return PrimFunc((A,), For(i, 0, n, ForKind.SERIAL, BufferStore(A, A[i] + 1.0, (i,))))

    check_equal(f(), f())
    n = Var("n")
    i = Var("i")
    A = Buffer("A", (n,))
    two_vars = PrimFunc((A,), For(i, 0, Var("m"), ForKind.SERIAL, BufferStore(A, A[i] + 1.0, (i,))))
    check_differ(f(), two_vars)


def test_irmodule_compares_each_function():
    m1 = IRModule({"main": matmul(), "other": matmul(n=8)})
    m2 = IRModule({"other": matmul(n=8), "main": matmul()})  # key order does not matter
    check_equal(m1, m2)
    check_differ(m1, IRModule({"main": matmul(), "other": matmul(n=4)}))
    check_differ(m1, IRModule({"main": matmul()}))


# ----------------------------------------------------------------------------- variables


def test_bijection_distinguishes_reused_var():
    def nest(same: bool):
        B = Buffer("B", (4, 4))
        i, j = Var("i"), Var("j")
        second = i if same else j
        return PrimFunc(
            (B,),
            For(
                i,
                0,
                4,
                ForKind.SERIAL,
                For(j, 0, 4, ForKind.SERIAL, BufferStore(B, 0.0, (i, second))),
            ),
        )

    check_equal(nest(False), nest(False))
    check_differ(nest(False), nest(True))
    assert structural_hash(nest(False)) != structural_hash(nest(True))


def test_var_dtype_matters_for_definitions():
    i32, i64 = Var("i", "int32"), Var("i", "int64")
    f32 = For(i32, 0, 4, ForKind.SERIAL, Evaluate(i32))
    f64 = For(i64, 0, 4, ForKind.SERIAL, Evaluate(i64))
    check_differ(f32, f64)


def test_free_vars_need_identity_unless_mapped():
    x, y, z = Var("x"), Var("y"), Var("z")
    check_equal(x + 1, x + 1)
    check_differ(x + 1, y + 1)
    check_equal(x + 1, y + 1, map_free_vars=True)
    check_differ(x + y, z + z, map_free_vars=True)  # a bijection, not any renaming
    check_differ(x + x, y + z, map_free_vars=True)
    check_differ(x + 1, Var("x", "int64") + const(1, "int64"), map_free_vars=True)
    # the hash numbers free vars, so it agrees with map_free_vars=True
    assert structural_hash(x + 1) == structural_hash(y + 1)
    assert structural_hash(x + y) != structural_hash(z + z)


def test_defined_var_is_not_equal_to_a_free_var():
    i, j = Var("i"), Var("j")
    bound = For(i, 0, 4, ForKind.SERIAL, Evaluate(i + 1))
    free = For(j, 0, 4, ForKind.SERIAL, Evaluate(i + 1))
    check_differ(bound, free)
    check_differ(bound, free, map_free_vars=True)


def test_sibling_loops_may_reuse_one_var_object():
    B = Buffer("B", (4,))
    i, a, b = Var("i"), Var("a"), Var("b")
    reused = SeqStmt(
        (
            For(i, 0, 4, ForKind.SERIAL, BufferStore(B, 1.0, (i,))),
            For(i, 0, 4, ForKind.SERIAL, BufferStore(B, 2.0, (i,))),
        )
    )
    fresh = SeqStmt(
        (
            For(a, 0, 4, ForKind.SERIAL, BufferStore(B, 1.0, (a,))),
            For(b, 0, 4, ForKind.SERIAL, BufferStore(B, 2.0, (b,))),
        )
    )
    check_equal(reused, fresh)


def test_shadowing_refers_to_innermost_definition():
    B = Buffer("B", (4,))
    i, x, y = Var("i"), Var("x"), Var("y")
    shadow = For(i, 0, 4, ForKind.SERIAL, For(i, 0, 2, ForKind.SERIAL, BufferStore(B, 0.0, (i,))))
    inner = For(x, 0, 4, ForKind.SERIAL, For(y, 0, 2, ForKind.SERIAL, BufferStore(B, 0.0, (y,))))
    outer = For(x, 0, 4, ForKind.SERIAL, For(y, 0, 2, ForKind.SERIAL, BufferStore(B, 0.0, (x,))))
    check_equal(shadow, inner)
    check_differ(shadow, outer)


def test_definitions_end_with_their_scope():
    B = Buffer("B", (4,))
    i, j = Var("i"), Var("j")
    # after the loop, `i` is a free variable again on both sides
    left = SeqStmt((For(i, 0, 4, ForKind.SERIAL, BufferStore(B, 0.0, (i,))), Evaluate(i)))
    right = SeqStmt((For(j, 0, 4, ForKind.SERIAL, BufferStore(B, 0.0, (j,))), Evaluate(i)))
    check_equal(left, right)
    right2 = SeqStmt((For(j, 0, 4, ForKind.SERIAL, BufferStore(B, 0.0, (j,))), Evaluate(j)))
    check_differ(left, right2)


# ----------------------------------------------------------------------------- buffers


def test_free_buffers_need_identity_unless_mapped():
    A, B = Buffer("A", (4,)), Buffer("B", (4,))
    i = Var("i")
    check_equal(A[i], A[i])
    check_differ(A[i], B[i])
    check_equal(A[i], B[i], map_free_vars=True)
    check_differ(A[i], Buffer("B", (8,))[i], map_free_vars=True)
    check_differ(A[i], Buffer("B", (4,), "float32", "shared")[i], map_free_vars=True)
    check_differ(A[i] + A[i], A[i] + B[i], map_free_vars=True)


def test_allocate_defines_its_buffer():
    def alloc(shape=(4,), scope="local"):
        T = Buffer("T", shape, "float32", scope)
        return Allocate(T, BufferStore(T, 1.0, (0,)))

    check_equal(alloc(), alloc())
    check_differ(alloc(), alloc(scope="global"))
    check_differ(alloc(), alloc(shape=(5,)))


# ----------------------------------------------------------------------------- node kinds


def reduce_sum():
    x, y = Var("x", "float32"), Var("y", "float32")
    comb = CommReducer(x, y, x + y, const(0.0))
    A = Buffer("A", (8,))
    k = IterVar(Var("k"), Range(0, 8), IterType.COMM_REDUCE)
    return Reduce(comb, A[k.var], (k,), true())


def test_reduce_and_comm_reducer_bind_their_vars():
    check_equal(reduce_sum().combiner, reduce_sum().combiner)
    r1, r2 = reduce_sum(), reduce_sum()
    # the buffer is free, so it must be mapped
    check_differ(r1, r2)
    check_equal(r1, r2, map_free_vars=True)
    x, y = Var("x", "float32"), Var("y", "float32")
    flipped = CommReducer(x, y, y - x, const(0.0))
    straight = CommReducer(x, y, x - y, const(0.0))
    check_differ(flipped, straight)


def test_other_node_kinds():
    i = Var("i")
    A = Buffer("A", (4,))
    check_equal(Range(0, 4), Range(0, 4))
    check_differ(Range(0, 4), Range(1, 4))
    check_equal(IterVar(i, Range(0, 4)), IterVar(i, Range(0, 4)))
    check_differ(IterVar(i, Range(0, 4)), IterVar(i, Range(0, 4), IterType.COMM_REDUCE))
    check_equal(BufferRegion.full_region(A), BufferRegion.full_region(A))
    check_equal(A, A)
    check_differ(A, Buffer("A", (4,)))
    check_equal(A, Buffer("Z", (4,)), map_free_vars=True)
    check_equal(IfThenElse(i < 2, Evaluate(i)), IfThenElse(i < 2, Evaluate(i)))
    check_differ(IfThenElse(i < 2, Evaluate(i)), IfThenElse(i < 2, Evaluate(i), Evaluate(i)))
    check_equal(tir.exp(Var("x", "float32")), tir.exp(Var("y", "float32")), map_free_vars=True)
    check_differ(tir.exp(Var("x", "float32")), tir.log(Var("x", "float32")), map_free_vars=True)
    check_differ(tir.StringImm("a"), tir.StringImm("b"))


def test_python_eq_is_the_eq_operator():
    i = Var("i")
    built = i == 3
    assert type(built) is not EQ
    check_equal(built, EQ(i, const(3)))


def test_thread_binding_and_for_annotations():
    def loop(tag, ann):
        i = Var("i")
        return For(
            i, 0, 32, ForKind.THREAD_BINDING, Evaluate(i), thread_binding=tag, annotations=ann
        )

    check_equal(loop("threadIdx.x", {}), loop("threadIdx.x", {}))
    check_differ(loop("threadIdx.x", {}), loop("threadIdx.y", {}))
    check_differ(loop("threadIdx.x", {"a": 1}), loop("threadIdx.x", {"a": True}))


# ----------------------------------------------------------------------------- values


def test_annotation_values():
    def with_ann(value):
        return matmul(annotations={"v": value})

    nan, inf = float("nan"), float("inf")
    check_equal(with_ann([1, [2.5, "s"], {"k": nan}]), with_ann((1, (2.5, "s"), {"k": nan})))
    check_equal(with_ann({"a": 1, "b": 2}), with_ann({"b": 2, "a": 1}))
    check_equal(with_ann(inf), with_ann(math.inf))
    i = Var("i")
    check_equal(with_ann(i + 1), with_ann(i + 1))
    for a, b in [
        (1, True),
        (1, 1.0),
        (0.0, -0.0),
        (inf, -inf),
        ("1", 1),
        (None, 0),
        ([1, 2], [2, 1]),
        ([1], [1, 1]),
        ({"a": 1}, {"a": 2}),
        (nan, inf),
    ]:
        check_differ(with_ann(a), with_ann(b))
        assert structural_hash(with_ann(a)) != structural_hash(with_ann(b))


def test_unsupported_annotation_value_is_a_type_error():
    with pytest.raises(TypeError, match="does not support a object value"):
        structural_hash(matmul(annotations={"x": object()}))


# ----------------------------------------------------------------------------- hashing


def test_hash_is_a_63_bit_non_negative_int():
    h = structural_hash(matmul())
    assert isinstance(h, int) and 0 <= h < 2**63
    assert structural_hash(matmul()) == h


def test_hash_value_is_pinned():
    # Stored databases key workloads by this hash: a change here orphans their records.
    # If the canonical form changes on purpose, update the number and say so in the commit.
    assert structural_hash(Var("x") + 1) == 6093816305769600311


def test_hash_is_stable_across_processes():
    code = (
        f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
        "import test_structural as t; print(t.structural_hash(t.matmul()))"
    )
    outs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        res = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        outs.add(int(res.stdout.strip()))
    assert outs == {structural_hash(matmul())}


def big_function(stores: int = 1000) -> PrimFunc:
    A = Buffer("A", (stores,))
    B = Buffer("B", (stores,))
    i = Var("i")
    body = []
    for s in range(stores):
        body.append(BufferStore(B, A[i * 2 % stores] * 2.0 + A[(i + s) % stores], (s,)))
    return PrimFunc((A, B), For(i, 0, 4, ForKind.SERIAL, SeqStmt(tuple(body))))


def test_hash_and_equal_are_fast_on_10k_nodes():
    f, g = big_function(), big_function()
    count = [0]
    tir.post_order_visit(f, lambda n: count.__setitem__(0, count[0] + 1))
    assert count[0] >= 10_000
    start = time.perf_counter()
    assert structural_hash(f) == structural_hash(g)
    assert structural_equal(f, g)
    assert time.perf_counter() - start < 15  # both hashes and one comparison; quadratic: minutes


def test_deep_expressions_do_not_hit_the_recursion_limit():
    def chain(x):
        e = x
        for c in range(5000):
            e = e + c
        return e

    check_equal(chain(Var("x")), chain(Var("y")), map_free_vars=True)
    assert structural_hash(chain(Var("x"))) != structural_hash(chain(Var("x")) + 1)


# ----------------------------------------------------------------------------- properties

_OPS = [tir.Add, tir.Sub, tir.Mul, tir.Max, tir.Min, tir.FloorDiv]


@st.composite
def expr_recipes(draw, depth=0):
    """A recipe (nested tuples) so the same tree can be built twice with fresh variables."""
    if depth >= 4 or draw(st.booleans()):
        return (
            "leaf",
            draw(st.sampled_from(["x", "y", "i", "j"]))
            if draw(st.booleans())
            else draw(st.integers(-3, 3)),
        )
    op = draw(st.integers(0, len(_OPS) - 1))
    return ("op", op, draw(expr_recipes(depth + 1)), draw(expr_recipes(depth + 1)))


def build_recipe(recipe) -> tuple[For, dict]:
    """Wrap the expression in loops binding i and j; x and y stay free (shared objects)."""
    i, j = Var("i"), Var("j")
    env = {"i": i, "j": j, "x": FREE_X, "y": FREE_Y}

    def go(r):
        if r[0] == "leaf":
            return env[r[1]] if isinstance(r[1], str) else const(r[1])
        return _OPS[r[1]](go(r[2]), go(r[3]))

    return For(i, 0, 4, ForKind.SERIAL, For(j, 0, 4, ForKind.SERIAL, Evaluate(go(recipe))))


FREE_X, FREE_Y = Var("x"), Var("y")


def mutate(recipe, path_bits):
    """Change one leaf constant (always a structural change)."""
    if recipe[0] == "leaf":
        if isinstance(recipe[1], str):
            return ("leaf", 7)
        return ("leaf", recipe[1] + 10)
    bit, rest = path_bits[0], path_bits[1:] or [0]
    if bit:
        return ("op", recipe[1], recipe[2], mutate(recipe[3], rest))
    return ("op", recipe[1], mutate(recipe[2], rest), recipe[3])


@settings(max_examples=60, deadline=None)
@given(expr_recipes(), st.lists(st.booleans(), min_size=1, max_size=5))
def test_property_rebuilt_trees_equal_and_mutated_trees_differ(recipe, bits):
    a, b = build_recipe(recipe), build_recipe(recipe)
    check_equal(a, b)
    c = build_recipe(mutate(recipe, bits))
    check_differ(a, c)
    assert structural_hash(a) != structural_hash(c)


def test_te_functions_built_twice_are_equal():

    def mm(n):
        A = te.placeholder((n, n), name="A")
        B = te.placeholder((n, n), name="B")
        k = te.reduce_axis((0, n), name="k")
        C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
        return te.create_prim_func([A, B, C])

    check_equal(mm(16), mm(16))
    check_differ(mm(16), mm(8))
