"""AddRFactor: when a reduction is factored, the spaces it makes, and their numbers."""

import math

import pytest

from metaschedule import te
from metaschedule.schedule import Schedule
from metaschedule.schedule_rule import AddRFactor, RandomComputeLocation

PRODUCER_KEY = "meta_schedule.random_compute_producer"


def rf_spaces(ck, func, **kwargs):
    return ck.spaces(func, [AddRFactor(max_jobs_per_core=16, max_innermost_factor=64)], **kwargs)


def test_long_reduction_gets_one_space_per_split_loop_plus_the_original(ck, wl):
    func = wl.row_sum(4, 64)
    spaces = rf_spaces(ck, func)
    assert len(spaces) == 3
    factored = [s for s in spaces if "RFactor" in ck.kinds(s)]
    assert len(factored) == 2
    (original,) = [s for s in spaces if "RFactor" not in ck.kinds(s)]
    assert set(ck.kinds(original)) == {"GetBlock"}
    axes = set()
    for sch in factored:
        assert ck.kinds(sch)[-5:] == [
            "GetLoops",
            "SamplePerfectTile",
            "Split",
            "RFactor",
            "Annotate",
        ]
        (tile,) = [
            sch.trace.decisions[i] for i in sch.trace.insts if i.kind.name == "SamplePerfectTile"
        ]
        assert math.prod(tile) == 64 and tile[1] <= 64
        rf = sch.get(sch.get_block("B_rf"))
        axes.add(next(i for i in sch.trace.insts if i.kind.name == "RFactor").inputs[0])
        assert sch.get(sch.get_block("B")).annotations[PRODUCER_KEY] == 1
        assert rf.writes[0].buffer.ndim == 2  # the factored dimension appended
    assert len(axes) == 2  # the outer and the inner split loop
    ck.assert_space_correct(func, spaces, replays=2)


def test_reduction_fused_when_there_are_several_loops(ck):
    a = te.placeholder((2, 8, 8), "float32", "A")
    k1, k2 = te.reduce_axis((0, 8), "k1"), te.reduce_axis((0, 8), "k2")
    b = te.compute((2,), lambda i: te.sum(a[i, k1, k2], axis=[k1, k2]), name="B")
    func = te.create_prim_func([a, b])
    spaces = rf_spaces(ck, func)
    assert len(spaces) == 3
    assert all(ck.kinds(s).count("Fuse") == 1 for s in spaces if "RFactor" in ck.kinds(s))
    ck.assert_space_correct(func, spaces, replays=1)


@pytest.mark.parametrize(
    "shape, factored",
    [
        ((8, 8, 8), False),  # enough spatial parallelism: tile instead
        ((2, 2, 64), True),  # 4 outputs, a reduction of 64
    ],
)
def test_matmul_only_when_spatial_work_is_short(ck, wl, shape, factored):
    func = wl.matmul(*shape)
    spaces = rf_spaces(ck, func)
    assert any("RFactor" in ck.kinds(s) for s in spaces) is factored
    ck.assert_space_correct(func, spaces, replays=1)


def test_short_reductions_are_left_alone(ck, wl):
    # a reduction of 2 on a 2-core target: not longer than the core count
    (sch,) = rf_spaces(ck, wl.row_sum(4, 2))
    assert set(ck.kinds(sch)) == {"GetBlock"}


def test_random_compute_location_places_the_rfactor_block(ck, wl):
    func = wl.softmax(4, 32)
    rules = [AddRFactor(max_jobs_per_core=16, max_innermost_factor=64), RandomComputeLocation()]
    spaces = ck.spaces(func, rules)
    assert len(spaces) == 9  # (rfactor outer, inner, none) for each of the two reductions
    with_rf = [s for s in spaces if "RFactor" in ck.kinds(s)]
    for sch in with_rf:
        kinds = ck.kinds(sch)
        assert "GetProducers" in kinds and "Unannotate" in kinds
        for name in ("T_softmax_maxelem", "T_softmax_expsum"):
            assert PRODUCER_KEY not in sch.get(sch.get_block(name)).annotations
    ck.assert_space_correct(func, spaces, replays=1)


def test_needs_a_core_count(wl):
    sch = Schedule(wl.row_sum())
    with pytest.raises(ValueError, match="core count"):
        AddRFactor().apply(sch, sch.get_block("B"))


def test_bad_arguments():
    with pytest.raises(ValueError, match="max_jobs_per_core"):
        AddRFactor(max_jobs_per_core=0)
    with pytest.raises(ValueError, match="max_innermost_factor"):
        AddRFactor(max_innermost_factor=0)
