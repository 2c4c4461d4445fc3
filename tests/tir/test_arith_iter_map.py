"""Affine iteration-map detection: split / fuse / reorder patterns and rejections."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metaschedule.tir as T
from metaschedule.tir import expr as E
from metaschedule.tir.arith import Analyzer, evaluate, simplify
from metaschedule.tir.arith.iter_map import (
    IterSplitExpr,
    IterSumExpr,
    detect_iter_map,
    is_affine_binding,
    iter_map_simplify,
    normalize_iter_map_to_expr,
)
from metaschedule.tir.arith.simplify import ExprKeyer
from metaschedule.tir.functor import substitute

R = T.Range
i, j, k, f, n, m = (T.Var(s) for s in ("i", "j", "k", "f", "n", "m"))
i0, i1, i2 = T.Var("i0"), T.Var("i1"), T.Var("i2")


def same(a, b) -> bool:
    kk = ExprKeyer()
    return kk.key(E.convert(a)) == kk.key(E.convert(b))


def values_agree(indices, result, dom):
    """The normalized IterSumExprs compute the same values as ``indices`` everywhere."""
    vs = list(dom)
    norm = [normalize_iter_map_to_expr(s) for s in result.indices]
    for combo in itertools.product(
        *[range(r.min.value, r.min.value + r.extent.value) for r in dom.values()]
    ):
        env = dict(zip(vs, combo))
        assert [evaluate(e, env) for e in indices] == [evaluate(e, env) for e in norm]
    return True


# ----------------------------------------------------------------------------- accepted


def test_split():
    dom = {i0: R(0, 4), i1: R(0, 8)}
    r = detect_iter_map([i0 * 8 + i1], dom, check_level="bijective")
    assert r.success and r.errors == []
    (s,) = r.indices
    assert isinstance(s, IterSumExpr) and len(s.args) == 1
    sp = s.args[0]
    assert isinstance(sp, IterSplitExpr) and sp.extent.value == 32 and sp.scale.value == 1
    assert same(simplify(normalize_iter_map_to_expr(s), dom), i0 * 8 + i1)
    assert values_agree([i0 * 8 + i1], r, dom)


def test_fuse_and_reorder():
    dom = {f: R(0, 64)}
    r = detect_iter_map([f // 8, f % 8], dom, check_level="bijective")
    assert r.success
    lfs = [s.args[0].lower_factor.value for s in r.indices]
    assert lfs == [8, 1]
    assert all(s.args[0].source is r.indices[0].args[0].source for s in r.indices)
    # reordered fuse: the inner block axis comes from the outer digit
    r = detect_iter_map([f % 8, f // 8], dom, check_level="bijective")
    assert r.success and values_agree([f % 8, f // 8], r, dom)
    # reorder alone: loops permuted, bindings are the loop vars
    r = detect_iter_map([j, i], {i: R(0, 4), j: R(0, 3)}, check_level="bijective")
    assert r.success


def test_split_of_fused_loop():
    dom = {i0: R(0, 16), i1: R(0, 4)}
    idx = [(i0 * 4 + i1) // 8, (i0 * 4 + i1) % 8]
    r = detect_iter_map(idx, dom, check_level="bijective")
    assert r.success and values_agree(idx, r, dom)
    assert r.indices[0].args[0].source is r.indices[1].args[0].source  # one fused mark


def test_fuse_of_split_loops_and_three_level_tiling():
    dom = {f: R(0, 32)}
    r = detect_iter_map([f // 4 * 4 + f % 4], dom, check_level="bijective")
    assert r.success
    assert same(simplify(normalize_iter_map_to_expr(r.indices[0]), dom), f)
    dom = {i0: R(0, 2), i1: R(0, 4), i2: R(0, 4)}
    idx = [i0 * 16 + i1 * 4 + i2]
    r = detect_iter_map(idx, dom, check_level="bijective")
    assert r.success and values_agree(idx, r, dom)
    idx = [(i0 * 16 + i1 * 4 + i2) // 8, (i0 * 16 + i1 * 4 + i2) % 8]
    assert detect_iter_map(idx, dom, check_level="bijective").success


def test_nonzero_min_unit_extent_and_constants():
    dom = {i: R(2, 6), j: R(0, 1), k: R(0, 4)}
    r = detect_iter_map([i + 3, j * 7 + 5, k], dom, check_level="bijective")
    assert r.success and values_agree([i + 3, j * 7 + 5, k], r, dom)
    assert r.indices[1].args == ()  # a unit loop is a constant
    for idx in ([0, k * 2], [7 - k]):  # scaled and reversed iterators
        r = detect_iter_map(idx, {k: R(0, 4)}, check_level="bijective")
        assert r.success and values_agree(idx, r, {k: R(0, 4)})


def test_symbolic_extents():
    dom = {i0: R(0, m), i1: R(0, n)}
    r = detect_iter_map([i0 * n + i1], dom, check_level="bijective")
    assert r.success
    assert same(simplify(normalize_iter_map_to_expr(r.indices[0])), i0 * n + i1)
    assert detect_iter_map([f // 4, f % 4], {f: R(0, n * 4)}, check_level="bijective").success
    # dividing by n needs n > 0, which only an analyzer that knows n's range can prove
    idx = [f // n, f % n]
    assert not detect_iter_map(idx, {f: R(0, m * n)}).success
    ana = Analyzer()
    ana.bind(n, R(1, 64))
    r = detect_iter_map(idx, {f: R(0, m * n)}, check_level="bijective", analyzer=ana)
    assert r.success, r.errors
    got = iter_map_simplify([(i0 * n + i1) // n], dom, analyzer=ana)
    assert same(got[0], i0)


def test_predicate_of_non_divisible_split():
    dom = {i0: R(0, 3), i1: R(0, 4)}  # a loop of 10 split by 4
    pred = i0 * 4 + i1 < 10
    r = detect_iter_map([i0 * 4 + i1], dom, predicate=pred, check_level="bijective")
    assert r.success
    assert r.indices[0].args[0].source.extent.value == 10
    r = detect_iter_map([i0 * 4 + i1], dom, predicate=T.all(pred, i0 < 2), check_level="bijective")
    assert r.success and r.indices[0].args[0].source.extent.value == 8
    r = detect_iter_map([(i0 * 4 + i1) // 2], dom, predicate=pred)
    assert r.success
    assert is_affine_binding([i0 * 4 + i1], dom, predicate=pred)
    # the predicate must bound something the indices use whole
    assert not detect_iter_map([i0, i1], dom, predicate=pred).success
    assert not detect_iter_map([i0 * 4 + i1], dom, predicate=i0 * i1 < 3).success


def test_mixed_views_of_one_fused_iterator():
    # what the simplifier makes of (l9*6 + l10) // 48 and (l9*6 + l10) % 4
    a, b = T.Var("a"), T.Var("b")
    dom = {a: R(0, 64), b: R(0, 6)}
    fz = a * 6 + b
    idx = [a // 8, fz // 4 % 12, (a * 3 + b // 2) % 2 * 2 + b % 2]
    r = detect_iter_map(idx, dom, check_level="bijective")
    assert r.success, r.errors
    assert values_agree(idx, r, dom)


def _enumerated_level(indices, dom):
    """ "bijective", "surjective" or None, by enumerating the loop domain."""
    vs = list(dom)
    image = [
        tuple(evaluate(e, dict(zip(vs, p))) for e in indices)
        for p in itertools.product(*[range(r.extent.value) for r in dom.values()])
    ]
    per_index = [sorted({p[n] for p in image}) for n in range(len(indices))]
    if set(image) != set(itertools.product(*per_index)) or any(
        len({b - a for a, b in itertools.pairwise(v)}) > 1 for v in per_index
    ):
        return None
    return "bijective" if len(set(image)) == len(image) else "surjective"


L = {n: T.Var(f"l{n}") for n in range(14)}


def _digit_views():
    l2, l5, l6, l7, l8, l9, l10, l11, l12, l13 = (L[n] for n in (2, 5, 6, 7, 8, 9, 10, 11, 12, 13))
    fz, a = l7 * 3 + l8, l10 * 4 + l12
    k, g, b = l8 + l11 % 4 * 3, l10 * 12 + l11, l11 * 4 + l12
    return [
        # found by the property test: with l8 < 3, l7 // 8 is (l7 * 3 + l8) // 24
        ([l5 * 2 + l7 // 8, fz // 8 % 3, fz % 8], {l5: 2, l7: 16, l8: 3}),
        ([l7 // 8 + l5 * 2, fz % 8, fz // 8 % 3], {l5: 2, l7: 16, l8: 3}),
        ([fz // 24, fz // 8 % 3, fz % 8, l5], {l5: 2, l7: 16, l8: 3}),
        # the same shapes with a digit used twice or left out
        ([l5 * 2 + l7 // 4 % 2, fz // 8 % 3, fz % 8], {l5: 2, l7: 16, l8: 3}),
        ([l5 * 2 + l7 // 8, fz // 8 % 3], {l5: 2, l7: 16, l8: 3}),
        ([l7 // 8, fz // 8 % 6, fz % 8], {l7: 16, l8: 3}),
        # a lone split straddling a term of a fusion is cut at the term's edge
        ([l8 // 3, (l8 % 6 * 4 + l9) // 6 % 2, (l8 % 6 * 4 + l9) % 6], {l8: 12, l9: 4}),
        # a fusion that is consecutive digits of another one
        ([(l6 * 6 + l7) // 8, (l6 * 3 + l7 // 2) % 4 * 2 + l7 % 2], {l6: 4, l7: 6}),
        ([(l6 * 6 + l7) // 4 % 6, l6 // 4 * 4 + (l6 * 6 + l7) % 4], {l6: 12, l7: 6}),
        # the widest fusion is the frame of reference
        (
            [
                (l9 * 6 + l11) // 4,
                l2,
                (l11 * 3 + l12) % 2,
                (l9 * 18 + l11 * 3 + l12) // 4 % 3 * 2 + (l9 * 9 + (l11 * 3 + l12) // 2) % 2,
            ],
            {l9: 4, l11: 6, l2: 2, l12: 3},
        ),
        (
            [
                (a % 6 * 384 + l13 * 96 + a // 6) // 36 % 16,
                (a % 6 * 4 + l13) // 6,
                (a % 6 * 64 + l13 * 16 + l10 // 9) % 6,
                a // 6 % 6,
            ],
            {l10: 144, l12: 4, l13: 4},
        ),
        # the answer does not depend on which fusion the indices reach first
        (
            [g // 8 % 3 * 2 + (l10 * 3 + l11 // 4) % 2, k // 2, k % 2, l10 // 2],
            {l8: 3, l10: 16, l11: 12},
        ),
        (
            [k // 2, k % 2, g // 8 % 3 * 2 + (l10 * 3 + l11 // 4) % 2, l10 // 2],
            {l8: 3, l10: 16, l11: 12},
        ),
        # two fusions of the same digits in other orders: the one an index splits is the
        # frame of reference (l11 // 18 * 8 + a // 9 % 8 is a // 9, and its first digits)
        (
            [
                (l11 // 18 * 8 + b // 9 % 8) % 3,
                (b % 9 * 16 + (l11 // 18 * 8 + b // 9 % 8) // 3) % 12,
                (b % 9 * 48 + l11 // 18 * 8 + b // 9 % 8) // 36,
            ],
            {l11: 108, l12: 4},
        ),
        # a fusion of which the indices need only the low digits
        (
            [
                (l10 // 36 * 6 + l10 // 6 % 6) // 4,
                (l10 // 36 * 6 + l10 // 6 % 6) % 4,
                (l10 % 36 * 4 + l11) // 3 % 8,
                (l10 % 36 * 4 + l11) % 3,
            ],
            {l10: 72, l11: 4},
        ),
    ]


@pytest.mark.parametrize("indices, extents", _digit_views())
def test_splits_seen_as_digits_of_a_common_fusion(indices, extents):
    dom = {v: R(0, e) for v, e in extents.items()}
    truth = _enumerated_level(indices, dom)
    for level in ("surjective", "bijective"):
        r = detect_iter_map(indices, dom, check_level=level)
        expected = truth == "bijective" or (truth == "surjective" and level == "surjective")
        assert r.success == expected, (level, truth, r.errors)
        if r.success:
            assert values_agree(indices, r, dom)


def test_negative_scale_is_not_divided_as_a_split():
    # -(x // 2) // 2 is not a split of x; it was once taken for x // -4
    x = T.Var("x")
    r = detect_iter_map([(0 - x // 2) // 2], {x: R(0, 4)})
    assert not r.success and "cannot divide" in r.errors[0], r.errors
    r = detect_iter_map([(0 - x) % 2], {x: R(0, 4)})
    assert not r.success and "modulo" in r.errors[0], r.errors
    r = detect_iter_map([(x * -2) // 2], {x: R(0, 4)})  # an exact multiple is fine
    assert r.success and values_agree([(x * -2) // 2], r, {x: R(0, 4)})


def test_surjective_allows_unused_and_partial_iterators():
    dom = {i: R(0, 4), j: R(0, 4)}
    assert detect_iter_map([i], dom).success
    assert not detect_iter_map([i], dom, check_level="bijective").success
    assert detect_iter_map([f // 8], {f: R(0, 64)}).success
    assert not detect_iter_map([f // 8], {f: R(0, 64)}, check_level="bijective").success
    assert detect_iter_map([(i * 16 + j) // 16], dom).success  # gap, then the high part


# ----------------------------------------------------------------------------- rejected


@pytest.mark.parametrize(
    "indices, level, message",
    [
        ([i * j], "surjective", "multiplies two iterator"),
        ([i * i], "surjective", "multiplies two iterator"),
        ([i + j], "bijective", "overlap or leave gaps"),
        ([i + j], "surjective", "overlap or leave gaps"),
        ([i * 8 + j], "surjective", "overlap or leave gaps"),  # j < 4: a gap
        ([i, i], "surjective", "overlap"),
        ([i, j, i + j * 4], "surjective", "overlap"),
        ([T.min(i, 3)], "surjective", "not affine"),
        ([T.Select(i < 2, i, j)], "surjective", "not affine"),
        ([i // j], "surjective", "divides by an iterator"),
        ([f // 3, f % 3], "surjective", "not exact"),
        ([i // 2 + 1, (i + 1) // 2], "surjective", "not a multiple"),
    ],
)
def test_rejections(indices, level, message):
    dom = {i: R(0, 4), j: R(0, 4), f: R(0, 8)}
    r = detect_iter_map(indices, dom, check_level=level)
    assert not r.success and r.indices == []
    assert message in r.errors[0], r.errors
    assert not is_affine_binding(indices, dom) or level == "bijective"


def test_bad_arguments():
    with pytest.raises(ValueError, match="check_level"):
        detect_iter_map([i], {i: R(0, 4)}, check_level="injective")
    with pytest.raises(TypeError, match="must be a Range"):
        detect_iter_map([i], {i: (0, 4)})


# ----------------------------------------------------------------------------- simplify


def test_iter_map_simplify():
    dom = {i0: R(0, 4), i1: R(0, 8)}
    got = iter_map_simplify([(i0 * 8 + i1) // 8, (i0 * 8 + i1) % 8, ((i0 * 8 + i1) % 16) // 8], dom)
    assert same(got[0], i0) and same(got[1], i1) and same(got[2], i0 % 2)
    assert same(iter_map_simplify([f // 8 * 8 + f % 8], {f: R(0, 64)})[0], f)
    # not affine: still simplified, by the plain simplifier
    assert same(iter_map_simplify([i * i + 0], {i: R(0, 4)})[0], i * i)


# ----------------------------------------------------------------------------- properties


def _divisors(e):
    return [d for d in range(2, e) if e % d == 0]


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_random_split_fuse_reorder_bindings_are_bijective(data):
    """Block bindings after any sequence of split / fuse / reorder are a bijective map."""
    exts = data.draw(st.lists(st.sampled_from([2, 3, 4, 6, 8, 12]), min_size=1, max_size=3))
    loops = [(T.Var(f"l{n}"), e) for n, e in enumerate(exts)]
    bindings = [v for v, _ in loops]
    count = len(loops)
    for _ in range(data.draw(st.integers(1, 5))):
        op = data.draw(st.sampled_from(["split", "fuse", "reorder"]))
        if op == "split":
            pos = data.draw(st.integers(0, len(loops) - 1))
            v, e = loops[pos]
            if not _divisors(e):
                continue
            fac = data.draw(st.sampled_from(_divisors(e)))
            outer, inner = T.Var(f"l{count}"), T.Var(f"l{count + 1}")
            count += 2
            bindings = [substitute(b, {v: outer * fac + inner}) for b in bindings]
            loops[pos : pos + 1] = [(outer, e // fac), (inner, fac)]
        elif op == "fuse" and len(loops) >= 2:
            pos = data.draw(st.integers(0, len(loops) - 2))
            (va, ea), (vb, eb) = loops[pos], loops[pos + 1]
            fused = T.Var(f"l{count}")
            count += 1
            bindings = [substitute(b, {va: fused // eb, vb: fused % eb}) for b in bindings]
            loops[pos : pos + 2] = [(fused, ea * eb)]
        elif op == "reorder":
            loops = data.draw(st.permutations(loops))
    dom = {v: R(0, e) for v, e in loops}
    if data.draw(st.booleans()):
        bindings = [simplify(b, dom) for b in bindings]
    r = detect_iter_map(bindings, dom, check_level="bijective")
    assert r.success, (bindings, loops, r.errors)
    assert values_agree(bindings, r, dom)
    simplified = iter_map_simplify(bindings, dom)
    for combo in itertools.product(*[range(e) for _, e in loops]):
        env = dict(zip([v for v, _ in loops], combo))
        assert [evaluate(b, env) for b in bindings] == [evaluate(s, env) for s in simplified]


XS = [T.Var("x0"), T.Var("x1"), T.Var("x2")]


def _index(data, depth):
    if depth == 0 or data.draw(st.integers(0, 3)) == 0:
        if data.draw(st.integers(0, 6)) == 0:
            return T.const(data.draw(st.integers(0, 5)))
        return data.draw(st.sampled_from(XS))
    op = data.draw(st.sampled_from(["+", "+", "-", "*", "c*", "//", "%"]))
    a = _index(data, depth - 1)
    c = data.draw(st.sampled_from([2, 3, 4, 6, 8]))
    if op == "+":
        return a + _index(data, depth - 1)
    if op == "-":
        return a - _index(data, depth - 1)
    if op == "*":
        return a * _index(data, depth - 1)
    if op == "c*":
        return a * c
    return T.floordiv(a, c) if op == "//" else T.floormod(a, c)


@settings(max_examples=250, deadline=None)
@given(st.data())
def test_accepted_maps_are_surjective_or_bijective(data):
    """Whenever the detector accepts, enumeration confirms the claim."""
    exts = [data.draw(st.sampled_from([1, 2, 3, 4, 6, 8])) for _ in XS]
    idx = [_index(data, data.draw(st.integers(1, 4))) for _ in range(data.draw(st.integers(1, 3)))]
    dom = {v: R(0, e) for v, e in zip(XS, exts)}
    points = [dict(zip(XS, p)) for p in itertools.product(*[range(e) for e in exts])]
    image = [tuple(evaluate(e, env) for e in idx) for env in points]
    for level in ("surjective", "bijective"):
        r = detect_iter_map(idx, dom, check_level=level)
        if not r.success:
            continue
        values_agree(idx, r, dom)
        per_index = [sorted({p[n] for p in image}) for n in range(len(idx))]
        assert set(image) == set(itertools.product(*per_index)), (level, idx, exts)
        for vals in per_index:  # each index is an arithmetic progression
            assert len({b - a for a, b in itertools.pairwise(vals)}) <= 1, (idx, exts, vals)
        if level == "bijective":
            assert len(set(image)) == len(image), (idx, exts)
