"""The simplifier, the Analyzer's proofs, and the reference evaluator."""

import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metaschedule.tir as T
from metaschedule.tir import expr as E
from metaschedule.tir.arith import Analyzer, evaluate, simplify
from metaschedule.tir.arith.simplify import ExprKeyer

R = T.Range


def same(a, b) -> bool:
    """Structural equality (variables by identity)."""
    k = ExprKeyer()
    return k.key(E.convert(a)) == k.key(E.convert(b))


x, y, z, n = T.Var("x"), T.Var("y"), T.Var("z"), T.Var("n")
i, j, k = T.Var("i"), T.Var("j"), T.Var("k")
RANGES = {i: R(0, 16), j: R(0, 8), k: R(0, 4), y: R(0, 4)}

# (input, expected) under RANGES; x, z and n are unbounded
REWRITES = [
    (i * 4 + j - i * 4, j),
    ((i + 1) * 2 - 2, i * 2),
    (x * 3 - x * 2 - x, 0),
    (j + i * 4, i * 4 + j),
    ((x * 4 + z) // 4, x + z // 4),
    ((x * 4 + y) // 4, x),
    ((x * 4 + y) % 4, y),
    (x // 1, x),
    (x % 1, 0),
    ((x // 4) // 8, x // 32),
    (j // 8, 0),
    (j % 8, j),
    ((x % 8) % 4, x % 4),
    ((x % 16) // 4, x // 4 % 4),
    ((i * 8 + j) // 8, i),
    ((i * 8 + j) % 8, j),
    ((i * 8 + j) // 4, i * 2 + j // 4),
    ((i * 32 + j * 4 + k) // 4, i * 8 + j),
    ((i * 32 + j * 4 + k) % 32 // 4, j),
    ((j * 4 + k) // 8, j // 2),
    ((j * 4 + k) % 8, j % 2 * 4 + k),
    ((x * 2 + 2) // 4, (x + 1) // 2),
    ((x * 4 + z * 4 + 8) // 4, x + z + 2),
    (x // 4 * 4 + x % 4, x),
    ((x // 4 * 4 + x % 4) * 2, x * 2),
    (x - x // 4 * 4, x % 4),
    ((i * n + j) // n, i + j // n),
    (i * n % n, 0),
    (T.min(i, i + 1), i),
    (T.max(i, i + 1), i + 1),
    (T.min(i * 4 + k, 100), i * 4 + k),
    (T.max(j - 8, -1), -1),
    (T.min(T.min(x, 3), 5), T.min(x, 3)),
    (T.min(x, T.max(x, z)), x),
    (T.max(x, x), x),
    (E.Div(i, T.const(4)), i // 4),
    (T.Select(i < 16, i, j), i),
    (T.Select(x < 3, z, z), z),
    (i * 4 < 64, True),
    (j < 4, j < 4),
    (x + 3 < 7, x < 4),
    (i >= 0, True),
    (T.all(i < 100, j < 8), True),
    (T.all(x < 3, T.const(True)), x < 3),
    (T.any(i > 100, x < 3), x < 3),
    (~(x < 3), x >= 3),
    (~~(x < 3), x < 3),
    (T.all(x < 3, ~(x < 3)), False),
    (T.const(7) // -2, -4),
    (T.const(7) % -2, -1),
    (E.Div(T.const(-7), T.const(2)), -3),
    (T.max(T.const(3), 9), 9),
    (T.cast("int64", T.const(5)), T.const(5, "int64")),
]


@pytest.mark.parametrize("case", range(len(REWRITES)))
def test_expected_rewrites(case):
    before, want = REWRITES[case]
    got = simplify(before, RANGES)
    assert same(got, want), f"{before} -> {got}, expected {want}"
    # and the rewrite is an identity on sample points
    rng = np.random.default_rng(case)
    for _ in range(20):
        env = {v: int(rng.integers(0, 4)) for v in (x, z, n)}
        env[n] = env[n] + 1
        env.update({v: int(rng.integers(0, r.extent.value)) for v, r in RANGES.items()})
        assert evaluate(got, env) == evaluate(before, env)


def test_modulo_by_non_divisor_keeps_value():
    # (x % 8) // 4 cannot drop the modulo
    e = simplify((x % 8) // 4)
    for v in range(-20, 20):
        assert evaluate(e, {x: v}) == (v % 8) // 4


def test_float_expressions_only_fold_constants():
    f = T.Var("f", "float32")
    e = (f + 1.0) + 2.0
    assert same(simplify(e), e)  # no reassociation
    assert same(simplify(f * 1.0), f * 1.0)
    c = simplify(T.const(0.1) + T.const(0.2))
    assert isinstance(c, E.FloatImm)
    assert c.value == float(np.float32(0.1) + np.float32(0.2))
    assert simplify(T.exp(T.const(1.0, "float64"))).value == pytest.approx(math.e, rel=1e-15)
    assert same(simplify(T.sqrt(f + 0.0)), T.sqrt(f + 0.0))


def test_already_simple_expression_keeps_identity():
    e = simplify(i * 4 + j, RANGES)
    assert simplify(e, RANGES) is e


# ----------------------------------------------------------------------------- properties

VARS = [T.Var(f"v{n}") for n in range(3)]
CMPS = [E.LT, E.LE, E.EQ, E.NE, E.GE, E.GT]


def build(data, depth, pool):
    """Draw a random integer expression over VARS, sharing sub-expressions from ``pool``."""
    if pool and data.draw(st.integers(0, 9)) < 2:
        return data.draw(st.sampled_from(pool))
    if depth == 0 or data.draw(st.integers(0, 4)) == 0:
        if data.draw(st.booleans()):
            return data.draw(st.sampled_from(VARS))
        return T.const(data.draw(st.integers(-10, 10)))
    op = data.draw(
        st.sampled_from(
            ["add", "sub", "mul", "mulc", "div", "mod", "min", "max", "select", "fuse", "unfuse"]
        )
    )
    a = build(data, depth - 1, pool)
    c = data.draw(st.sampled_from([1, 2, 3, 4, 8, 16]))
    if op == "mulc":
        out = a * data.draw(st.integers(-4, 8))
    elif op == "div":
        out = T.floordiv(a, c)
    elif op == "mod":
        out = T.floormod(a, c)
    elif op == "fuse":
        out = T.floordiv(a, c) * c + T.floormod(a, c)
    elif op == "unfuse":
        out = a - T.floordiv(a, c) * c
    else:
        b = build(data, depth - 1, pool)
        if op == "add":
            out = a + b
        elif op == "sub":
            out = a - b
        elif op == "mul":
            out = a * b
        elif op == "min":
            out = T.min(a, b)
        elif op == "max":
            out = T.max(a, b)
        else:
            cond = data.draw(st.sampled_from(CMPS))(a, build(data, depth - 1, pool))
            if data.draw(st.booleans()):
                cond = E.And(cond, data.draw(st.sampled_from(CMPS))(b, a))
            out = T.Select(cond, a, b)
    pool.append(out)
    return out


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_simplify_preserves_value_within_ranges(data):
    ranges = {v: (data.draw(st.integers(-8, 8)), data.draw(st.integers(1, 20))) for v in VARS}
    e = build(data, data.draw(st.integers(1, 5)), [])
    s = simplify(e, {v: R(lo, ext) for v, (lo, ext) in ranges.items()})
    for _ in range(15):
        env = {v: data.draw(st.integers(lo, lo + ext - 1)) for v, (lo, ext) in ranges.items()}
        try:
            want = evaluate(e, env)
        except ZeroDivisionError:
            continue
        assert evaluate(s, env) == want, f"{e} -> {s} at {env}"


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_simplify_without_ranges_preserves_value_and_is_idempotent(data):
    e = build(data, data.draw(st.integers(1, 5)), [])
    s = simplify(e)
    assert same(simplify(s), s)
    for _ in range(10):
        env = {v: data.draw(st.integers(-1000, 1000)) for v in VARS}
        try:
            want = evaluate(e, env)
        except ZeroDivisionError:
            continue
        assert evaluate(s, env) == want, f"{e} -> {s} at {env}"


# ----------------------------------------------------------------------------- analyzer


def test_bind_value_is_substituted():
    ana = Analyzer()
    ana.bind(i, R(0, 4))
    ana.bind(x, i * 2 + 1)
    assert same(ana.simplify(x - i * 2), 1)
    assert ana.const_int_bound(x) == ana.const_int_bound(i * 2 + 1)
    assert ana.const_int_bound(x).max_value == 7


def test_rebinding_needs_allow_override():
    ana = Analyzer()
    ana.bind(i, R(0, 4))
    ana.bind(i, R(0, 4))  # the same fact again is fine
    with pytest.raises(ValueError, match="already bound"):
        ana.bind(i, R(0, 8))
    ana.bind(i, R(0, 8), allow_override=True)
    assert ana.const_int_bound(i).max_value == 7
    with pytest.raises(TypeError, match="expects a Var"):
        ana.bind(i + 1, R(0, 2))


def test_constraint_scope_tightens_and_restores():
    ana = Analyzer()
    ana.bind(i, R(0, 16))
    with ana.constraint_scope(T.all(i + 1 < 5, i >= 2)):
        assert ana.const_int_bound(i).min_value == 2
        assert ana.const_int_bound(i).max_value == 3
        assert ana.can_prove(i < 4)
        assert same(ana.simplify(i // 4), 0)
    assert ana.const_int_bound(i).max_value == 15
    assert not ana.can_prove(i < 4)


def test_can_prove_and_equal():
    ana = Analyzer()
    ana.bind(i, R(0, 16))
    assert ana.can_prove(i < 16) and ana.can_prove(i * 2 <= 30)
    assert not ana.can_prove(i < 15)
    assert not ana.can_prove(x < 3)  # unknown, not false
    assert ana.can_prove(T.any(x < 3, i >= 0))
    assert ana.can_prove_equal(x * 2 + z, z + x + x)
    assert ana.can_prove_equal((i * 4 + 3) // 4, i)
    assert not ana.can_prove_equal(x, z)
    f = T.Var("f", "float32")
    assert ana.can_prove_equal(f + 1.0, f + 1.0)
    assert not ana.can_prove_equal(f + 1.0, 1.0 + f)  # floats: structural only


def test_can_prove_with_symbolic_ranges():
    ana = Analyzer()
    ana.bind(i, R(0, n))
    assert ana.can_prove(i < n)
    assert ana.can_prove(i + 1 <= n)
    assert not ana.can_prove(i < n - 1)


# ----------------------------------------------------------------------------- robustness


def test_long_sums_do_not_recurse_or_crawl():
    vs = [T.Var(f"w{n}") for n in range(50)]
    e = T.const(0)
    for m in range(3000):
        e = e + vs[m % 50] * (m % 7 + 1)
    t0 = time.perf_counter()
    s = simplify(e)
    assert time.perf_counter() - t0 < 20.0  # a crawl (quadratic or worse) takes minutes
    env = {v: n for n, v in enumerate(vs)}
    assert evaluate(s, env) == evaluate(e, env)
    assert evaluate(s - e, env) == 0


def test_repeated_products_stay_small():
    vs = [T.Var(f"w{n}") for n in range(30)]
    e = vs[0] + 1
    for v in vs[1:]:
        e = e * (v + 1)
    s = simplify(e)
    # printing is a tree walk: an exponential tree would never finish
    assert len(str(s)) < 5000
    env = {v: (n % 3) - 1 for n, v in enumerate(vs)}
    assert evaluate(s, env) == evaluate(e, env)


def test_shared_subexpressions_are_simplified_once():
    e = x
    for _ in range(60):  # a DAG of 2**60 paths
        e = T.min(e + 1, e * 2)
    t0 = time.perf_counter()
    s = simplify(e)
    assert time.perf_counter() - t0 < 10.0  # 2**60 paths walked one by one never end
    assert evaluate(s, {x: 3}) == evaluate(e, {x: 3})


# ----------------------------------------------------------------------------- evaluate


def test_evaluate_integer_semantics():
    a, b = T.Var("a"), T.Var("b")
    cases = [(-7, 2), (7, -2), (-7, -2), (7, 2), (0, 3)]
    for va, vb in cases:
        env = {a: va, b: vb}
        assert evaluate(a // b, env) == va // vb
        assert evaluate(a % b, env) == va % vb
        assert evaluate(E.Div(a, b), env) == int(va / vb)  # truncation as in C
    with pytest.raises(ZeroDivisionError):
        evaluate(a // b, {a: 1, b: 0})
    with pytest.raises(ValueError, match="no value given for variable 'a'"):
        evaluate(a + 1, {})
    env = {a: 5, b: 3}
    assert evaluate(T.min(a, b), env) == 3 and evaluate(T.max(a, b), env) == 5
    assert evaluate(T.Select(a < b, a, b), env) == 3
    assert evaluate(T.all(a > 1, b > 1), env) is True
    assert evaluate(~(a < b), env) is True
    assert evaluate(T.cast("int8", a * 100), env) == np.int64(500).astype(np.int8)
    assert evaluate(T.cast("uint8", a - 6), env) == 255
    assert evaluate(T.cast("bool", a), env) is True


def test_evaluate_float_semantics_match_numpy():
    f = T.Var("f", "float32")
    g = T.Var("g", "float64")
    v = 0.7
    env = {f: v, g: v}
    f32 = np.float32(v)
    assert evaluate(f * 3.0 + 1.0, env) == float(f32 * np.float32(3.0) + np.float32(1.0))
    assert evaluate(g * 3.0 + 1.0, env) == v * 3.0 + 1.0
    for name, ref in [
        ("exp", np.exp),
        ("sqrt", np.sqrt),
        ("tanh", np.tanh),
        ("log", np.log),
        ("floor", np.floor),
        ("sin", np.sin),
    ]:
        got = evaluate(getattr(T, name)(g), env)
        assert got == pytest.approx(float(ref(v)), rel=1e-12)
    assert evaluate(T.sigmoid(g), env) == pytest.approx(1 / (1 + math.exp(-v)), rel=1e-12)
    assert evaluate(T.pow(g, T.const(3.0, "float64")), env) == pytest.approx(v**3, rel=1e-12)
    assert evaluate(T.cast("int32", -g * 10.0), env) == -7  # float -> int truncates
    assert evaluate(E.Div(g, T.const(0.0, "float64")), env) == math.inf
    assert evaluate(T.floordiv(g, T.const(0.5, "float64")), env) == 1.0


def test_evaluate_buffer_load():
    buf = T.decl_buffer((2, 3), "float32", name="A")
    arr = np.arange(6, dtype="float32").reshape(2, 3)
    assert evaluate(buf[i, j] * 2.0, {buf: arr, i: 1, j: 2}) == 10.0
    with pytest.raises(ValueError, match="no array given for buffer 'A'"):
        evaluate(buf[0, 0], {})
