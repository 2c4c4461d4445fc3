"""The block analyses the rules share (schedule_rule/analysis.py)."""

import pytest

from metaschedule import te
from metaschedule.schedule import Schedule
from metaschedule.schedule_rule import analysis as an


def realize(sch, name):
    return an.realize_of(sch, sch.get_block(name))


def one_block(fcompute, shape=(8,), ashape=(8, 8)):
    a = te.placeholder(ashape, "float32", "A")
    b = te.compute(shape, lambda *i: fcompute(a, *i), name="B")
    sch = Schedule(te.create_prim_func([a, b]))
    return realize(sch, "B")[1].block


@pytest.mark.parametrize(
    "fcompute, shape, expected",
    [
        # B[i, j] = A[i, j]: the identity
        (
            lambda a, i, j: a[i, j],
            (8, 8),
            {
                "exists": True,
                "surjective": True,
                "injective": True,
                "ordered": True,
                "no_const_read": True,
                "no_shift_read": True,
            },
        ),
        # a transpose is injective but not ordered
        (lambda a, i, j: a[j, i], (8, 8), {"exists": True, "injective": True, "ordered": False}),
        # a diagonal read maps two read dims onto one write dim
        (
            lambda a, i, j: a[i, i],
            (8, 8),
            {"exists": True, "injective": False, "surjective": False},
        ),
        # a constant index and a shift
        (
            lambda a, i: a[0, i + 1],  # i in [0, 7): stays inside A's 8 columns
            (7,),
            {"exists": True, "no_const_read": False, "no_shift_read": False, "injective": True},
        ),
        # a scaled index is not a variable plus a constant
        (lambda a, i: a[i // 2, 0], (8,), {"exists": False, "injective": False}),
    ],
)
def test_read_write_pattern(fcompute, shape, expected):
    block = one_block(fcompute, shape)
    pat = an.read_write_pattern(block.reads[0], block.writes[0])
    assert {k: getattr(pat, k) for k in expected} == expected
    assert an.is_write_cache(block) == (pat.injective and pat.ordered)


def test_needs_multi_level_tiling(wl):
    sch = Schedule(wl.conv2d(relu=True))
    wanted = {
        name: an.needs_multi_level_tiling(sch, *realize(sch, name))
        for name in ("PaddedInput", "conv2d_nhwc", "T_add", "T_relu")
    }
    assert wanted == {"PaddedInput": False, "conv2d_nhwc": True, "T_add": False, "T_relu": False}
    sch.annotate(sch.get_block("conv2d_nhwc"), an.TILING_STRUCTURE_KEY, "SSRSRS")
    assert not an.needs_multi_level_tiling(sch, *realize(sch, "conv2d_nhwc"))  # tiled already
    sch = Schedule(wl.softmax())
    assert not an.needs_multi_level_tiling(sch, *realize(sch, "T_softmax_maxelem"))
    assert an.is_spatial_prim_func(sch, "main") is False


def test_cumulative_lengths_and_binding(wl):
    sch = Schedule(wl.matmul(4, 6, 10))
    fname, r = realize(sch, "T_matmul_NN")
    assert an.cumulative_lengths(sch, fname, r) == (24, 10)
    assert an.is_trivial_binding(sch, fname, r) and an.is_reduction(sch, fname, r)
    i, j, k = sch.get_loops(sch.get_block("T_matmul_NN"))
    sch.reorder(j, i, k)
    assert not an.is_trivial_binding(sch, *realize(sch, "T_matmul_NN"))


def test_branches_and_intrinsics(wl):
    sch = Schedule(wl.conv2d())
    assert an.has_if_then_else(realize(sch, "PaddedInput")[1])
    assert not an.has_if_then_else(realize(sch, "conv2d_nhwc")[1])
    sch = Schedule(wl.softmax())
    assert an.has_op(realize(sch, "T_softmax_exp")[1], ["tir.exp"])
    assert not an.has_op(realize(sch, "T_softmax_norm")[1], ["exp"])


def test_fork_gives_an_independent_stream(wl):
    sch = Schedule(wl.matmul(16, 16, 16), seed=5)
    loop = sch.get_loops(sch.get_block("T_matmul_NN"))[0]
    a, b = an.fork(sch), an.fork(sch)
    assert len({a._rand_state, b._rand_state, sch._rand_state}) == 3

    def draws(s):
        return [tuple(s.get(v) for v in s.sample_perfect_tile(loop, 4, 16)) for _ in range(4)]

    assert draws(a) != draws(b)
    assert draws(sch.copy()) == draws(sch)  # a plain copy shares the stream
