"""Failures the fuzzer found, shrunk to small programs; each once broke the tuner."""

import numpy as np
import pytest

from metaschedule import te
from metaschedule.space_generator import PostOrderApply
from metaschedule.testing.fuzz import FuzzStats, Program, check_program
from metaschedule.tune_context import TuneContext


def _check(program: Program, builds: int = 0) -> FuzzStats:
    stats = FuzzStats()
    for seed in range(3):
        check_program(program, stats, num_schedules=4, num_builds=builds, seed=seed)
    assert [f.signature() for f in stats.failures] == []
    return stats


def test_matmul_then_padding_consumer_is_not_fused_by_reverse_compute_at():
    """Multi-level tiling took the padding consumer of a matmul for a write cache and
    ``reverse_compute_at`` raised a ScheduleError out of generate_design_space (the
    consumer reads ``T1[i - 1]``): the design space died. Now that fusion is skipped."""
    rng = np.random.default_rng(0)
    a = te.placeholder((3, 11), name="A")
    w = te.placeholder((11, 8), name="W")
    k = te.reduce_axis((0, 11), name="k")
    mm = te.compute((3, 8), lambda i, j: te.sum(a[i, k] * w[k, j], axis=k), name="T1")
    pad = te.compute(
        (5, 10),
        lambda i, j: te.if_then_else(te.all(i >= 1, i < 4, j >= 1, j < 9), mm[i - 1, j - 1], 0.0),
        name="T2",
    )
    spaces = TuneContext(
        te.create_prim_func([a, w, pad]),
        target="llvm",
        space_generator=PostOrderApply(),
        rand_state=0,
    ).generate_design_space()
    assert len(spaces) >= 1
    av, wv = (rng.uniform(-1, 1, s).astype("float32") for s in ((3, 11), (11, 8)))
    ref = np.pad(av @ wv, 1).astype("float32")
    _check(Program([a, w, pad], [av, wv], ref, ["matmul", "pad"]))


@pytest.mark.compiler
def test_gather_consumer_of_a_tiled_reduction_is_not_taken_for_a_write_cache():
    """The gather ``T2[i, j] = T1[i, idx[j]]`` reads a whole row of the matmul T1, yet it
    was taken for an element-wise write cache and fused under T1's tiles; the design
    space replayed only for the decisions it was generated with (``reverse_compute_at``
    raised on other tile sizes)."""
    rng = np.random.default_rng(1)
    a = te.placeholder((4, 6), name="A")
    w = te.placeholder((6, 7), name="W")
    idx = te.placeholder((5,), "int32", name="idx")
    k = te.reduce_axis((0, 6), name="k")
    mm = te.compute((4, 7), lambda i, j: te.sum(a[i, k] * w[k, j], axis=k), name="T1")
    gather = te.compute((4, 5), lambda i, j: mm[i, idx[j]], name="T2")
    av, wv = (rng.uniform(-1, 1, s).astype("float32") for s in ((4, 6), (6, 7)))
    iv = np.array([6, 0, 3, 3, 1], "int32")
    ref = (av @ wv)[:, iv].astype("float32")
    stats = FuzzStats()
    for seed in range(6):
        check_program(
            Program([a, w, idx, gather], [av, wv, iv], ref, ["matmul", "gather"]),
            stats,
            num_schedules=6,
            num_builds=1 if seed == 0 else 0,
            seed=seed,
        )
    assert [f.signature() for f in stats.failures] == []
    assert stats.built == 1
