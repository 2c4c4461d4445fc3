"""The prior follows the code generator's switches as :class:`CodegenOptions` sets them:
it reads them at each estimate, not once at import (issue 32: one value of every switch)."""

from __future__ import annotations

import gzip
import json

from test_prior_scores import DATA, _scores  # (this folder is on sys.path)

from metaschedule.codegen import CodegenOptions
from metaschedule.schedule import Schedule
from metaschedule.schedule.trace import Trace
from metaschedule.workloads import SUITE

#: switches of the plan stages the prior mirrors (tiles, invariant and shared loads)
OFF = {
    "split_large_tiles": False,
    "jam_small_tiles": False,
    "hoist_invariant_loads": False,
    "share_broadcasts": False,
    "merge_contiguous": False,
    "vectorize_outputs": False,
}


def _recorded():
    """The recorded rows with their schedules replayed, and the row count."""
    with gzip.open(DATA, "rt") as f:
        rows = json.load(f)
    funcs = {name: w.func() for name, w in SUITE.items()}

    def replayed():
        for row in rows:
            func = funcs[row["workload"]]
            sch = Schedule(func)
            Trace.from_json(row["trace"]).apply_to_schedule(sch, remove_postproc=False)
            yield row, sch, func

    return replayed(), len(rows)


def test_switches_set_by_codegen_options_reach_the_prior():
    recorded, count = _recorded()
    moved = 0
    for row, sch, func in recorded:
        with CodegenOptions(**OFF).applied():
            (off,) = _scores(row["target"], [sch], func)
        (on,) = _scores(row["target"], [sch], func)
        assert on == row["score"]  # the defaults are back after the block
        moved += off != on
    # most recorded schedules have a register tile whose plan these switches change
    assert moved >= count // 4, f"only {moved} of {count} estimates followed the switches"


def test_the_auto_unroll_bound_in_vector_pieces_reaches_the_prior():
    """The code generator unrolls a loop only within ``AUTO_UNROLL_PIECES`` register-sized
    vector statements; the prior's explicit-unroll test (invariant loads hoisted around
    written-out loops) follows it."""
    recorded, _ = _recorded()
    moved = 0
    for row, sch, func in recorded:
        with CodegenOptions(auto_unroll_pieces=1).applied():
            (bounded,) = _scores(row["target"], [sch], func)
        moved += bounded != row["score"]
    assert moved > 0  # a vector statement of several pieces stops some explicit unrolling
