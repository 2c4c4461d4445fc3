"""Linear index expressions: the relaxation shortcut and the prover agree with the
analyzer."""

from __future__ import annotations

from schedule_shortcuts import general_paths

from metaschedule import te, tir
from metaschedule.schedule import analysis as an
from metaschedule.schedule.linear import LinearProver, linear_terms
from metaschedule.tir import Range, Var
from metaschedule.tir.structural import structural_equal


def conv():
    data = te.placeholder((1, 6, 6, 4), "float32", "data")
    kernel = te.placeholder((3, 3, 4, 8), "float32", "kernel")
    return te.create_prim_func([data, kernel, te.ops.conv2d_nhwc(data, kernel, padding=1)])


def test_linear_terms():
    i, j = Var("i"), Var("j")
    assert linear_terms(i * 4 - (j - 3) * 2 + i) == (6, {i: 5, j: -2})
    assert list(linear_terms(j + i)[1]) == [j, i]  # in the order they appear
    assert linear_terms(i * j) is None and linear_terms(i // 2) is None


def test_relax_linear_is_what_int_set_gives():
    sch = tir.Schedule(conv())
    c = sch.state.block_realize("main", "conv2d_nhwc")
    loops = sch.state.loops_above("main", c)
    for k in range(len(loops) + 1):
        ana = an.analyzer_for_loops(loops[:k])
        fast = an.relax_region(c.block.reads, c, loops[k:], ana)
        with general_paths():
            slow = an.relax_region(c.block.reads, c, loops[k:], ana)
        for f, s in zip(fast, slow):
            for a, b in zip(f.region, s.region):
                assert structural_equal(a.min, b.min) and structural_equal(a.extent, b.extent)


def test_linear_prover_agrees_with_the_analyzer():
    i, j = Var("i"), Var("j")
    ranges = {i: Range(0, 4), j: Range(2, 3)}
    prover = LinearProver(an.analyzer_for_loops([]), ranges)
    for v, r in ranges.items():
        prover.ana.bind(v, r)
    cases = [
        (i * 4 + j, 16),
        (i * 4 + j, 17),
        (i - j, 1),
        (j - i, -1),
        (i * 2, i + 3),
        (i + j, 7),
        (i + j, 6),
        (i * i, 9),
    ]  # the last is not linear: analyzer
    for a, b in cases:
        assert prover.le(a, b) == prover.ana.can_prove(a <= b), (a, b)
    assert prover.simplify(i * 4 - i * 4 + 3).value == 3
    assert structural_equal(prover.simplify(i + 0), prover.ana.simplify(i + 0))
