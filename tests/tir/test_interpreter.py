"""Tests of the numpy reference interpreter (metaschedule.tir.interpreter)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaschedule import tir
from metaschedule.testing import RandomArrays
from metaschedule.tir import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    Cast,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    IRModule,
    IterType,
    IterVar,
    PrimFunc,
    Range,
    Select,
    SeqStmt,
    Var,
    const,
)
from metaschedule.tir.expr import Div
from metaschedule.tir.interpreter import compile_func, interpret
from metaschedule.tir.stmt import true

rand = RandomArrays(0)


def _loop(var, extent, body, kind=ForKind.SERIAL, lo=0):
    return For(var, lo, extent, kind, body)


def _point(buf, *idx):
    return BufferRegion(buf, tuple(Range(i, 1) for i in idx))


def _root(body, allocs=()):
    return BlockRealize((), true(), Block((), (), (), "root", body, alloc_buffers=allocs))


def _spatial(name, buf_out, extents, value_fn, reads=()):
    """One data-parallel block over ``extents`` writing ``value_fn(*vs)`` to ``buf_out[vs]``."""
    loops = [Var(f"i{k}") for k in range(len(extents))]
    vs = [Var(f"v{k}") for k in range(len(extents))]
    block = Block(
        tuple(IterVar(v, Range(0, e)) for v, e in zip(vs, extents)),
        tuple(BufferRegion.full_region(b) for b in reads),
        (_point(buf_out, *vs),),
        name,
        BufferStore(buf_out, value_fn(*vs), tuple(vs)),
    )
    stmt = BlockRealize(tuple(loops), true(), block)
    for v, e in reversed(list(zip(loops, extents))):
        stmt = _loop(v, e, stmt)
    return stmt


def tiled_matmul(m=8, n=12, k=6, tile=4) -> PrimFunc:
    """C = A @ B with the i/j loops split by ``tile`` and a vectorized/parallel inner nest."""
    A, B, C = Buffer("A", (m, k)), Buffer("B", (k, n)), Buffer("C", (m, n))
    i0, j0, kk, i1, j1 = (Var(x) for x in ("i0", "j0", "k", "i1", "j1"))
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
    block = Block(
        (
            IterVar(vi, Range(0, m)),
            IterVar(vj, Range(0, n)),
            IterVar(vk, Range(0, k), IterType.COMM_REDUCE),
        ),
        (_point(A, vi, vk), _point(B, vk, vj)),
        (_point(C, vi, vj),),
        "C",
        BufferStore(C, C[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
        init=BufferStore(C, const(0.0), (vi, vj)),
    )
    realize = BlockRealize((i0 * tile + i1, j0 * tile + j1, kk), true(), block)
    nest = _loop(i1, tile, _loop(j1, tile, realize, ForKind.VECTORIZED), ForKind.UNROLLED)
    nest = _loop(i0, m // tile, _loop(j0, n // tile, _loop(kk, k, nest)), ForKind.PARALLEL)
    return PrimFunc((A, B, C), _root(nest))


def test_matmul_matches_numpy():
    a, b = rand(8, 6), rand(6, 12)
    c = np.full((8, 12), 123.0, "float32")  # init must overwrite whatever is there
    interpret(tiled_matmul(), a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_module_runs_main_and_compiled_runner_is_reusable():
    run = compile_func(IRModule({"main": tiled_matmul()}))
    for _ in range(2):
        a, b, c = rand(8, 6), rand(6, 12), np.zeros((8, 12), "float32")
        run(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="no function 'main'"):
        interpret(IRModule({"f": tiled_matmul(), "g": tiled_matmul()}))


def test_row_max_reduction_with_init_at_nonzero_domain_min():
    """max over columns 2..7 of each row; init runs only at the first reduction step."""
    A, B = Buffer("A", (5, 8)), Buffer("B", (5,))
    i, r, vi, vr = Var("i"), Var("r"), Var("vi"), Var("vr")
    block = Block(
        (IterVar(vi, Range(0, 5)), IterVar(vr, Range(2, 6), IterType.COMM_REDUCE)),
        (_point(A, vi, vr),),
        (_point(B, vi),),
        "rowmax",
        BufferStore(B, tir.max(B[vi], A[vi, vr]), (vi,)),
        init=BufferStore(B, tir.min_value("float32"), (vi,)),
    )
    body = _loop(i, 5, _loop(r, 6, BlockRealize((i, r), true(), block), lo=2))
    a, b = rand(5, 8), np.full(5, 1e9, "float32")
    interpret(PrimFunc((A, B), _root(body)), a, b)
    np.testing.assert_array_equal(b, a[:, 2:].max(axis=1))


def test_elementwise_select_and_exp():
    A, B = Buffer("A", (4, 5)), Buffer("B", (4, 5))
    body = _spatial(
        "B", B, (4, 5), lambda x, y: Select(A[x, y] > 0.0, tir.exp(A[x, y]), A[x, y] * 0.5), (A,)
    )
    a, b = rand(4, 5), np.zeros((4, 5), "float32")
    interpret(PrimFunc((A, B), _root(body)), a, b)
    np.testing.assert_allclose(b, np.where(a > 0, np.exp(a), a * 0.5), rtol=1e-6)


def test_intermediate_buffer_in_block_form_and_lowered_form():
    A, B, T = Buffer("A", (6,)), Buffer("B", (6,)), Buffer("T", (6,))
    block_form = PrimFunc(
        (A, B),
        _root(
            SeqStmt(
                (
                    _spatial("T", T, (6,), lambda v: A[v] * 2.0, (A,)),
                    _spatial("B", B, (6,), lambda v: T[v] + 1.0, (T,)),
                )
            ),
            allocs=(T,),
        ),
    )
    i, j = Var("i"), Var("j")
    lowered = PrimFunc(
        (A, B),
        Allocate(
            T,
            SeqStmt(
                (
                    _loop(i, 6, BufferStore(T, A[i] * 2.0, (i,))),
                    _loop(
                        j,
                        6,
                        IfThenElse(
                            j < 3,
                            BufferStore(B, T[j] + 1.0, (j,)),
                            BufferStore(B, T[j] - 1.0, (j,)),
                        ),
                    ),
                    Evaluate(0),
                )
            ),
        ),
    )
    a = rand(6)
    b = np.zeros(6, "float32")
    interpret(block_form, a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)
    interpret(lowered, a, b)
    np.testing.assert_allclose(b, np.where(np.arange(6) < 3, a * 2 + 1, a * 2 - 1), rtol=1e-6)


def test_unwritten_intermediate_reads_as_nan():
    A, T = Buffer("A", (3,)), Buffer("T", (3,))
    i = Var("i")
    func = PrimFunc((A,), Allocate(T, _loop(i, 3, BufferStore(A, T[i], (i,)))))
    a = np.zeros(3, "float32")
    interpret(func, a)
    assert np.isnan(a).all()


def test_predicate_guards_a_non_divisible_split():
    A, B = Buffer("A", (10,)), Buffer("B", (10,))
    io, ii, v = Var("io"), Var("ii"), Var("v")
    block = Block(
        (IterVar(v, Range(0, 10)),),
        (_point(A, v),),
        (_point(B, v),),
        "B",
        BufferStore(B, A[v] + 1.0, (v,)),
    )
    realize = BlockRealize((io * 4 + ii,), io * 4 + ii < 10, block)
    func = PrimFunc((A, B), _root(_loop(io, 3, _loop(ii, 4, realize))))
    a, b = rand(10), np.zeros(10, "float32")
    interpret(func, a, b)
    np.testing.assert_allclose(b, a + 1, rtol=1e-6)
    unguarded = PrimFunc(
        (A, B), _root(_loop(io, 3, _loop(ii, 4, BlockRealize((io * 4 + ii,), true(), block))))
    )
    with pytest.raises(IndexError, match="iter var v is bound to 10, outside its domain"):
        interpret(unguarded, a, b)


def test_guarded_padding_load_is_lazy():
    A, B = Buffer("A", (4,)), Buffer("B", (6,))
    body = _spatial(
        "pad",
        B,
        (6,),
        lambda v: tir.if_then_else(tir.all(v >= 1, v < 5), A[v - 1], const(0.0)),
        (A,),
    )
    a, b = rand(4), np.ones(6, "float32")
    interpret(PrimFunc((A, B), _root(body)), a, b)
    np.testing.assert_array_equal(b, np.pad(a, 1))


def test_out_of_bounds_raises_instead_of_wrapping():
    A, B = Buffer("A", (4,)), Buffer("B", (4,))
    shifted = PrimFunc((A, B), _root(_spatial("shift", B, (4,), lambda v: A[v - 1], (A,))))
    with pytest.raises(IndexError, match=r'load A\[-1\] is out of bounds .*block "shift"'):
        interpret(shifted, rand(4), np.zeros(4, "float32"))
    i = Var("i")
    over = PrimFunc((A,), _loop(i, 5, BufferStore(A, const(0.0), (i,))))
    with pytest.raises(IndexError, match=r"store A\[4\] is out of bounds for buffer A of shape"):
        interpret(over, np.zeros(4, "float32"))
    M = Buffer("M", (2, 3))
    j = Var("j")
    over2 = PrimFunc((M,), _loop(i, 2, _loop(j, 4, BufferStore(M, M[i, j], (i, 0)))))
    with pytest.raises(IndexError, match=r"load M\[0, 3\]"):
        interpret(over2, np.zeros((2, 3), "float32"))


def test_argument_checks():
    f = tiled_matmul()
    a, b, c = rand(8, 6), rand(6, 12), np.zeros((8, 12), "float32")
    with pytest.raises(TypeError, match=r"takes 3 arrays \(A, B, C\), got 2"):
        interpret(f, a, b)
    with pytest.raises(TypeError, match=r"argument 1 \(B\) has dtype float64; buffer B expects"):
        interpret(f, a, b.astype("float64"), c)
    with pytest.raises(ValueError, match=r"argument 2 \(C\) has shape \(12, 8\)"):
        interpret(f, a, b, c.T.copy())
    with pytest.raises(ValueError, match="has 1 dimensions"):
        interpret(f, a, b, c.ravel())
    with pytest.raises(TypeError, match="must be a numpy.ndarray, got list"):
        interpret(f, a.tolist(), b, c)


def test_symbolic_shapes_bind_from_arguments():
    n, i = Var("n"), Var("i")
    A, B = Buffer("A", (n,)), Buffer("B", (n,))
    func = PrimFunc((A, B), _loop(i, n, BufferStore(B, A[i] * A[i], (i,))))
    for size in (3, 7):
        a, b = rand(size), np.zeros(size, "float32")
        interpret(func, a, b)
        np.testing.assert_allclose(b, a * a, rtol=1e-6)
    with pytest.raises(ValueError, match=r"argument 1 \(B\) has shape \(4,\); buffer B expects"):
        interpret(func, rand(3), np.zeros(4, "float32"))


def test_integer_semantics():
    """FloorDiv/FloorMod floor, Div truncates, casts truncate, narrow stores wrap."""
    X = Buffer("X", (6,), "int32")
    Y = Buffer("Y", (6, 4), "int32")
    F = Buffer("F", (6,), "float32")
    Z = Buffer("Z", (6,), "int8")
    i = Var("i")
    body = _loop(
        i,
        6,
        SeqStmt(
            (
                BufferStore(Y, X[i] // 4, (i, 0)),
                BufferStore(Y, X[i] % 4, (i, 1)),
                BufferStore(Y, Div(X[i], const(4)), (i, 2)),
                BufferStore(Y, Cast("int32", F[i]), (i, 3)),
                BufferStore(Z, Cast("int8", X[i] * 40), (i,)),
            )
        ),
    )
    x = np.array([-9, -4, -1, 0, 5, 11], "int32")
    f = np.array([-2.7, -0.5, 0.5, 1.9, 3.0, -3.0], "float32")
    y, z = np.zeros((6, 4), "int32"), np.zeros(6, "int8")
    interpret(PrimFunc((X, Y, F, Z), body), x, y, f, z)
    np.testing.assert_array_equal(y[:, 0], x // 4)
    np.testing.assert_array_equal(y[:, 1], x % 4)
    np.testing.assert_array_equal(y[:, 2], np.trunc(x / 4).astype("int32"))
    np.testing.assert_array_equal(y[:, 3], np.trunc(f).astype("int32"))
    np.testing.assert_array_equal(z, (x * 40).astype("int8"))


def test_float32_rounds_per_operation_and_store():
    A, B = Buffer("A", (1,), "float32"), Buffer("B", (1,), "float64")
    i = Var("i")
    # (1e8 + 1) - 1e8 is 0 in float32 and 1 in float64
    one, big = const(1.0), const(1e8)
    body = _loop(
        i,
        1,
        SeqStmt(
            (
                BufferStore(A, (big + one) - big, (i,)),
                BufferStore(B, Cast("float64", const(1.0) / const(3.0)), (i,)),
            )
        ),
    )
    a, b = np.zeros(1, "float32"), np.zeros(1, "float64")
    interpret(PrimFunc((A, B), body), a, b)
    assert a[0] == 0.0
    assert b[0] == float(np.float32(1) / np.float32(3)) and b[0] != 1 / 3


@pytest.mark.parametrize(
    "name, ref",
    [
        ("exp", np.exp),
        ("log", np.log),
        ("sqrt", np.sqrt),
        ("rsqrt", lambda x: 1 / np.sqrt(x)),
        ("tanh", np.tanh),
        ("erf", np.vectorize(math.erf)),
        ("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
        ("fabs", np.abs),
        ("floor", np.floor),
        ("ceil", np.ceil),
        ("round", np.round),
        ("sin", np.sin),
        ("cos", np.cos),
        ("exp2", np.exp2),
        ("log2", np.log2),
        ("trunc", np.trunc),
    ],
)
def test_unary_intrinsics(name, ref):
    A, B = Buffer("A", (8,)), Buffer("B", (8,))
    body = _spatial("f", B, (8,), lambda v: getattr(tir, name)(A[v]), (A,))
    a = np.array([0.25, 0.5, 1.5, 2.5, 3.7, 0.01, 4.0, 10.0], "float32")
    b = np.zeros(8, "float32")
    interpret(PrimFunc((A, B), _root(body)), a, b)
    np.testing.assert_allclose(b, ref(a.astype("float64")).astype("float32"), rtol=2e-6)


def test_pow_and_nonfinite_values_do_not_raise():
    A, B = Buffer("A", (4,)), Buffer("B", (4,))
    body = _spatial("f", B, (4,), lambda v: tir.pow(A[v], 2.0) + tir.log(A[v]), (A,))
    a = np.array([0.0, -1.0, 2.0, 1e30], "float32")
    b = np.zeros(4, "float32")
    with np.errstate(all="raise"):  # the interpreter silences IEEE warnings itself
        interpret(PrimFunc((A, B), _root(body)), a, b)
    assert b[0] == -np.inf and np.isnan(b[1]) and b[3] == np.inf
    assert b[2] == pytest.approx(4 + math.log(2), rel=1e-6)


def test_undefined_variable_and_buffer_are_reported():
    A, i, n = Buffer("A", (4,)), Var("i"), Var("n")
    with pytest.raises(ValueError, match="variable n: it is not defined"):
        interpret(PrimFunc((A,), _loop(i, n, Evaluate(0))), np.zeros(4, "float32"))
    ghost = Buffer("ghost", (4,))
    with pytest.raises(ValueError, match="load of buffer ghost"):
        interpret(
            PrimFunc((A,), _loop(i, 4, BufferStore(A, ghost[i], (i,)))), np.zeros(4, "float32")
        )


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-50, 50), min_size=1, max_size=6), st.integers(-7, 7).filter(bool))
def test_affine_index_arithmetic_matches_python(values, divisor):
    n = len(values)
    X, Y = Buffer("X", (n,), "int32"), Buffer("Y", (n, 3), "int64")
    i = Var("i")
    e = X[i] * 3 - divisor
    body = _loop(
        i,
        n,
        SeqStmt(
            (
                BufferStore(Y, Cast("int64", tir.floordiv(e, divisor)), (i, 0)),
                BufferStore(Y, Cast("int64", tir.floormod(e, divisor)), (i, 1)),
                BufferStore(Y, Cast("int64", tir.max(e, X[i]) + tir.min(e, divisor)), (i, 2)),
            )
        ),
    )
    x = np.array(values, "int32")
    y = np.zeros((n, 3), "int64")
    interpret(PrimFunc((X, Y), body), x, y)
    for k, v in enumerate(values):
        ev = v * 3 - divisor
        assert tuple(y[k]) == (ev // divisor, ev % divisor, max(ev, v) + min(ev, divisor))
