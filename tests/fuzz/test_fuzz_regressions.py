"""Failures the fuzzer found, shrunk to small programs; each once broke the tuner."""

import numpy as np

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
