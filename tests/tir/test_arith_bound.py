"""Constant integer bounds and symbolic intervals, checked by brute-force enumeration."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metaschedule.tir as T
from metaschedule.tir import expr as E
from metaschedule.tir.arith import (
    NEG_INF,
    POS_INF,
    Analyzer,
    ConstIntBound,
    IntervalSet,
    eval_bound,
    evaluate,
    union_interval,
)
from metaschedule.tir.arith.simplify import ExprKeyer

R = T.Range
i, j, k, n, x = T.Var("i"), T.Var("j"), T.Var("k"), T.Var("n"), T.Var("x")


def same(a, b) -> bool:
    kk = ExprKeyer()
    return kk.key(E.convert(a)) == kk.key(E.convert(b))


def brute_bounds(e, ranges):
    vs = list(ranges)
    vals = []
    for combo in itertools.product(*[range(lo, lo + ext) for lo, ext in ranges.values()]):
        try:
            vals.append(evaluate(e, dict(zip(vs, combo))))
        except ZeroDivisionError:
            pass
    return (min(vals), max(vals)) if vals else None


# ----------------------------------------------------------------------------- const bounds


def test_linear_bounds_are_exact():
    ana = Analyzer()
    ana.bind(i, R(0, 16))
    ana.bind(j, R(-3, 8))
    assert ana.const_int_bound(i * 4 + j) == ConstIntBound(-3, 64)
    assert ana.const_int_bound(i - j * 2) == ConstIntBound(-8, 21)
    assert ana.const_int_bound(i // 4) == ConstIntBound(0, 3)
    assert ana.const_int_bound(i % 5) == ConstIntBound(0, 4)
    assert ana.const_int_bound(j % 16) == ConstIntBound(0, 15)  # j spans a period boundary
    assert ana.const_int_bound((j + 3) % 16) == ConstIntBound(0, 7)
    assert ana.const_int_bound(T.min(i, j)) == ConstIntBound(-3, 4)
    assert ana.const_int_bound(T.max(i, 10)) == ConstIntBound(10, 15)
    assert ana.const_int_bound(T.Select(i < 3, j, i)) == ConstIntBound(-3, 15)
    assert ana.const_int_bound(T.cast("int64", i) * 2) == ConstIntBound(0, 30)


def test_unbounded_uses_sentinels():
    ana = Analyzer()
    b = ana.const_int_bound(x)
    assert (b.min_value, b.max_value) == (NEG_INF, POS_INF)
    assert not b.is_bounded()
    assert ConstIntBound.POS_INF == POS_INF == 2**63 - 1
    ana.bind(i, R(0, 4))
    b = ana.const_int_bound(x * 0 + i)
    assert b == ConstIntBound(0, 3) and b.is_bounded()
    # x >= 0 bounds floormod by a constant even though x is unbounded
    assert ana.const_int_bound(x % 8) == ConstIntBound(0, 7)
    assert ana.const_int_bound(x // 8).min_value == NEG_INF
    # narrow types range over their dtype
    u = T.Var("u", "uint8")
    assert ana.const_int_bound(u) == ConstIntBound(0, 255)
    assert ana.const_int_bound(T.cast("int8", x)) == ConstIntBound(-128, 127)
    assert ana.const_int_bound(i < 4) == ConstIntBound(1, 1)  # folded first
    assert ana.const_int_bound(i < 3) == ConstIntBound(0, 1)


def test_division_by_a_range_containing_zero():
    ana = Analyzer()
    ana.bind(i, R(-4, 9))  # [-4, 4]
    ana.bind(j, R(-2, 5))  # [-2, 2], 0 excluded as a divisor
    b = ana.const_int_bound(T.floordiv(i, j))
    assert b.min_value <= -4 and b.max_value >= 4
    got = brute_bounds(T.floordiv(i, j), {i: (-4, 9), j: (-2, 5)})
    assert b.min_value <= got[0] and got[1] <= b.max_value


VARS = [T.Var("a"), T.Var("b")]


def build(data, depth):
    if depth == 0 or data.draw(st.integers(0, 3)) == 0:
        if data.draw(st.booleans()):
            return data.draw(st.sampled_from(VARS))
        return T.const(data.draw(st.integers(-6, 6)))
    op = data.draw(st.sampled_from(["+", "-", "*", "//", "%", "min", "max", "sel", "c*", "/v"]))
    a, b = build(data, depth - 1), build(data, depth - 1)
    c = data.draw(st.sampled_from([1, 2, 3, 4, 8, -3]))
    return {
        "+": lambda: a + b,
        "-": lambda: a - b,
        "*": lambda: a * b,
        "c*": lambda: a * c,
        "//": lambda: T.floordiv(a, c),
        "%": lambda: T.floormod(a, c),
        "/v": lambda: T.floordiv(a, b),
        "min": lambda: T.min(a, b),
        "max": lambda: T.max(a, b),
        "sel": lambda: T.Select(a < b, a, b + c),
    }[op]()


@settings(max_examples=250, deadline=None)
@given(st.data())
def test_bounds_contain_every_value(data):
    ranges = {v: (data.draw(st.integers(-6, 6)), data.draw(st.integers(1, 7))) for v in VARS}
    e = build(data, data.draw(st.integers(1, 4)))
    got = brute_bounds(e, ranges)
    if got is None:
        return
    ana = Analyzer()
    for v, (lo, ext) in ranges.items():
        ana.bind(v, R(lo, ext))
    b = ana.const_int_bound(e)
    assert b.min_value <= got[0] and got[1] <= b.max_value, f"{e}: {b} vs {got}"
    s = ana.int_set(e)
    lo = evaluate(s.min) if s.min is not None else NEG_INF
    hi = evaluate(s.max) if s.max is not None else POS_INF
    assert lo <= got[0] and got[1] <= hi, f"{e}: {s} vs {got}"


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_linear_sums_are_exact(data):
    ranges = {v: (data.draw(st.integers(-6, 6)), data.draw(st.integers(1, 7))) for v in VARS}
    coeffs = [data.draw(st.integers(-5, 5)) for _ in VARS]
    e = VARS[0] * coeffs[0] + VARS[1] * coeffs[1] + data.draw(st.integers(-9, 9))
    ana = Analyzer()
    for v, (lo, ext) in ranges.items():
        ana.bind(v, R(lo, ext))
    b = ana.const_int_bound(e)
    assert (b.min_value, b.max_value) == brute_bounds(e, ranges)
    assert eval_bound(e, {v: R(lo, ext) for v, (lo, ext) in ranges.items()}) == brute_bounds(
        e, ranges
    )


# ----------------------------------------------------------------------------- eval_bound


def test_eval_bound():
    assert eval_bound(i * 4 + j, {i: R(0, 4), j: R(0, 4)}) == (0, 15)
    assert eval_bound((i * 4 + j) // 4, {i: R(0, 4), j: R(0, 4)}) == (0, 3)
    assert eval_bound(T.const(5)) == (5, 5)
    assert eval_bound(i - 1, {i: (1, 3)}) == (0, 2)  # (min, extent) pairs are accepted
    with pytest.raises(ValueError, match="not bounded"):
        eval_bound(i + x, {i: R(0, 4)})


# ----------------------------------------------------------------------------- symbolic intervals


def test_int_set_relaxes_only_the_given_variables():
    ana = Analyzer()
    s = ana.int_set(i * 16 + j * 4 + k, {j: R(0, 4), k: R(0, 4)})
    assert same(s.min, i * 16) and same(s.max, i * 16 + 15)
    s = ana.int_set(i * 16 + j * 4 + k, {i: R(0, 2), j: R(0, 4), k: R(0, 4)})
    assert same(s.min, 0) and same(s.max, 31)
    # a symbolic range
    s = ana.int_set(i * 2 + 1, {i: R(0, n)})
    assert same(s.min, 1) and same(s.max, n * 2 - 1)
    s = ana.int_set(n - 1 - i, {i: R(0, n)})
    assert same(s.min, 0) and same(s.max, n - 1)


def test_int_set_uses_bound_ranges_by_default():
    ana = Analyzer()
    ana.bind(i, R(0, 8))
    s = ana.int_set((i * 4 + 3) // 2)
    assert same(s.min, 1) and same(s.max, 15)
    assert s.to_range(ana).extent.value == 15
    s = ana.int_set(T.min(i, n))  # n stays symbolic
    assert same(s.min, T.min(n, 0)) and same(s.max, T.min(n, 7))


def test_int_set_triangular_and_unbounded():
    ana = Analyzer()
    dom = {i: R(0, 8), j: R(0, i + 1)}  # j <= i < 8
    s = ana.int_set(j, dom)
    assert same(s.min, 0) and same(s.max, 7)
    s = ana.int_set(i + x, {i: R(0, 8)})
    assert same(s.min, x) and same(s.max, x + 7)
    s = ana.int_set(i * x, {i: R(0, 8)})  # the sign of x is unknown
    assert s.min is None and s.max is None
    assert "inf" in repr(s)
    with pytest.raises(ValueError, match="unbounded"):
        s.to_range()


def test_int_set_floormod_and_division():
    ana = Analyzer()
    dom = {i: R(0, 32)}
    s = ana.int_set(i % 8, dom)
    assert same(s.min, 0) and same(s.max, 7)
    s = ana.int_set((i // 8) % 8, dom)
    assert same(s.min, 0) and same(s.max, 3)
    s = ana.int_set(i // n, {i: R(0, 32), n: R(1, 4)})
    assert s.min is not None and s.max is not None
    lo, hi = brute_bounds(i // n, {i: (0, 32), n: (1, 4)})
    assert evaluate(s.min) <= lo and hi <= evaluate(s.max)


def test_union_interval():
    ana = Analyzer()
    u = union_interval([IntervalSet(T.const(0), i), IntervalSet(T.const(2), i + 3)], ana)
    assert same(u.min, 0) and same(u.max, i + 3)
    u = union_interval([IntervalSet(None, T.const(4)), IntervalSet.point(T.const(9))], ana)
    assert u.min is None and same(u.max, 9)
    with pytest.raises(ValueError):
        union_interval([], ana)
