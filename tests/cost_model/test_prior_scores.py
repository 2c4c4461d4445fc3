"""The analytic prior's scores of recorded schedules stay what they were.

``data/prior_scores.json.gz`` holds random schedules of the design spaces of the suite
(``metaschedule.workloads``) for two ISAs read from the target (AVX-512 and AVX2), as
traces, with the score the prior gave each (``float.hex``). The test replays them and
asks for the very same scores: a refactoring of the prior (issue 32 split it into a
package) or of the code generator parts it reads must not move them. A change of the
estimate made on purpose records them again::

    python tests/cost_model/test_prior_scores.py --record

and says in its commit message why the scores moved.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np

from metaschedule.arg_info import ArgInfo
from metaschedule.cost_model.prior import AnalyticPrior
from metaschedule.measure_candidate import MeasureCandidate
from metaschedule.schedule import Schedule
from metaschedule.schedule.trace import Trace
from metaschedule.target import Target
from metaschedule.tune_context import TuneContext
from metaschedule.workloads import SUITE

DATA = Path(__file__).parent / "data" / "prior_scores.json.gz"
#: the ISAs come from the target's -mcpu (a table), not from the host
TARGETS = ("llvm -mcpu=x86-64-v4 -num-cores 2", "llvm -mcpu=haswell -num-cores 4")
PER_WORKLOAD = 3


def _candidate(sch: Schedule) -> MeasureCandidate:
    return MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod))


def _scores(target: str, schs: list[Schedule], func) -> list[str]:
    ctx = TuneContext(func, target=Target(target))
    return [float(s).hex() for s in AnalyticPrior().predict(ctx, [_candidate(s) for s in schs])]


def test_the_prior_scores_recorded_schedules_as_it_did():
    with gzip.open(DATA, "rt") as f:
        rows = json.load(f)
    assert len(rows) == len(TARGETS) * len(SUITE) * PER_WORKLOAD
    funcs = {name: w.func() for name, w in SUITE.items()}
    moved = []
    for row in rows:
        sch = Schedule(funcs[row["workload"]])
        Trace.from_json(row["trace"]).apply_to_schedule(sch, remove_postproc=False)
        (got,) = _scores(row["target"], [sch], funcs[row["workload"]])
        if got != row["score"]:
            moved.append(
                f"{row['workload']} on {row['target']}: "
                f"{float.fromhex(row['score']):.6g} -> {float.fromhex(got):.6g}"
            )
    assert not moved, f"{len(moved)} of {len(rows)} scores moved:\n" + "\n".join(moved)


# ----------------------------------------------------------------------------- recording
def _samples(func, target: str, n: int, seed: int) -> list[Schedule]:
    """``n`` random postprocessed schedules of the default design spaces of ``func``."""
    from metaschedule.space_generator import PostOrderApply

    ctx = TuneContext(
        func, target=Target(target), space_generator=PostOrderApply(), rand_state=seed
    )
    spaces, postprocs = ctx.generate_design_space(), ctx.space_generator.postprocs
    rng = np.random.default_rng(seed)
    out: list[Schedule] = []
    for _ in range(50 * n):
        if len(out) == n:
            break
        space = spaces[int(rng.integers(len(spaces)))]
        sch = Schedule(ctx.mod, seed=int(rng.integers(2**31)), error_render_level="none")
        Trace(space.trace.insts, {}).apply_to_schedule(sch, remove_postproc=True)
        sch.enter_postproc()
        if all(p.apply(sch) for p in postprocs):
            out.append(sch)
    return out


def record(path: Path = DATA, seed: int = 7) -> None:
    rows = []
    for target in TARGETS:
        for name, workload in SUITE.items():
            func = workload.func()
            schs = _samples(func, target, PER_WORKLOAD, seed)
            for sch, score in zip(schs, _scores(target, schs, func)):
                trace = sch.trace.as_json()
                rows.append({"workload": name, "target": target, "trace": trace, "score": score})
    path.parent.mkdir(exist_ok=True)
    text = json.dumps(rows, separators=(",", ":"))
    with gzip.GzipFile(path, "wb", mtime=0) as f:  # the same rows, the same bytes
        f.write(text.encode())
    print(f"{len(rows)} scores recorded in {path}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit(f"usage: python {sys.argv[0]} --record")
    record()
