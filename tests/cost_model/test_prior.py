"""AnalyticPrior: hand-written schedules ranked as a CPU runs them, no data needed."""

import numpy as np
import pytest

from metaschedule import te
from metaschedule.cost_model.prior import AnalyticPrior, Machine
from metaschedule.schedule import Schedule
from metaschedule.te.ops.conv import conv2d_nhwc
from metaschedule.testing.tuning_records import matmul

MACHINE = Machine(lanes=8, cores=2)


def good_matmul(n=64):
    """A 4x16 register tile under the reduction, vectorized over j, parallel over i."""
    sch = Schedule(matmul(n))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i0, j0, k, i1, j1)
    sch.vectorize(j1)
    sch.parallel(i0)
    return sch


def bad_matmul(n=64):
    """The reduction outermost, i innermost: every access strides by n, nothing is
    vectorized, no parallel loop."""
    sch = Schedule(matmul(n))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    sch.reorder(k, j, i)
    return sch


def conv(n=1, hw=16, c=16, f=16):
    x = te.placeholder((n, hw, hw, c), "float32", name="X")
    w = te.placeholder((3, 3, c, f), "float32", name="W")
    y = conv2d_nhwc(x, w, 1, 1)
    return te.create_prim_func([x, w, y])


def conv_schedule(good: bool):
    sch = Schedule(conv())
    pad = sch.get_block("PaddedInput") if _has(sch, "PaddedInput") else None
    if pad is not None:
        sch.compute_inline(pad)
    block = sch.get_block("conv2d_nhwc")
    nn, yy, xx, ff, ry, rx, rc = sch.get_loops(block)
    if good:  # 4 output pixels x 16 channels in registers, f vectorized, y parallel
        x0, x1 = sch.split(xx, [None, 4])
        sch.reorder(nn, yy, x0, ry, rx, rc, x1, ff)
        sch.vectorize(ff)
        sch.parallel(yy)
    else:  # channels outermost, the output pixel innermost and strided, serial
        sch.reorder(ff, rc, ry, rx, nn, yy, xx)
    return sch


def _has(sch, name):
    try:
        sch.get_block(name)
    except Exception:  # noqa: BLE001 - no such block in this workload
        return False
    return True


def test_a_good_matmul_schedule_ranks_far_above_a_bad_one():
    prior = AnalyticPrior()
    good = prior.score_mod(good_matmul().mod, MACHINE)
    bad = prior.score_mod(bad_matmul().mod, MACHINE)
    assert good > 10 * bad > 0


def test_a_good_conv_schedule_ranks_far_above_a_bad_one():
    prior = AnalyticPrior()
    good = prior.score_mod(conv_schedule(True).mod, MACHINE)
    bad = prior.score_mod(conv_schedule(False).mod, MACHINE)
    assert good > 10 * bad > 0


def test_each_ingredient_counts():
    """Vectorizing, parallelizing and a register tile each improve the estimate."""
    prior = AnalyticPrior()

    def scored(vectorize, parallel, tile):
        sch = Schedule(matmul(64))
        i, j, k = sch.get_loops(sch.get_block("C"))
        i0, i1 = sch.split(i, [None, 4])
        j0, j1 = sch.split(j, [None, 16])
        if tile:
            sch.reorder(i0, j0, k, i1, j1)
        else:
            sch.reorder(i0, j0, i1, j1, k)  # the reduction innermost: a memory round trip
        if vectorize and tile:
            sch.vectorize(j1)
        if parallel:
            sch.parallel(i0)
        return prior.score_mod(sch.mod, MACHINE)

    best = scored(True, True, True)
    assert best > scored(False, True, True)
    assert best > scored(True, False, True)
    assert scored(False, False, True) > scored(False, False, False)


def test_parallel_balance_against_the_cores():
    """Three jobs on two cores idle one core half the time: worse than two or four."""
    prior = AnalyticPrior()

    def with_jobs(jobs):
        sch = Schedule(matmul(48, 48, 48))
        i, j, k = sch.get_loops(sch.get_block("C"))
        i0, _ = sch.split(i, [jobs, None])
        sch.parallel(i0)
        return prior.score_mod(sch.mod, MACHINE)

    assert with_jobs(2) > with_jobs(3) and with_jobs(4) > with_jobs(3)
    assert with_jobs(2) > 1.5 * with_jobs(1)


def test_predict_is_a_cost_model_and_deterministic():
    from metaschedule.arg_info import ArgInfo
    from metaschedule.measure_candidate import MeasureCandidate
    from metaschedule.target import Target
    from metaschedule.tune_context import TuneContext

    ctx = TuneContext(matmul(64), target=Target("llvm -num-cores 2"))
    cands = [
        MeasureCandidate(s, ArgInfo.from_entry_func(s.mod)) for s in (good_matmul(), bad_matmul())
    ]
    a = AnalyticPrior().predict(ctx, cands)
    b = AnalyticPrior().predict(ctx, cands)
    assert a.shape == (2,) and np.array_equal(a, b) and a[0] > a[1]
    AnalyticPrior().update(ctx, cands, [])  # learns nothing, accepts anything


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="oversample"):
        AnalyticPrior(oversample=0)
    with pytest.raises(ValueError, match="random_share"):
        AnalyticPrior(random_share=1.5)
