"""Repeated final selections: does re-measuring the top candidates pick the same winner?

Tunes one operator of the suite (or loads a work_dir tuned before), takes its ``top_k``
best records, and runs the final selection (``select_best``: each candidate built once,
timed in ``rounds`` interleaved rounds, the lowest median wins) ``N`` times on the same
records, committing nothing. Prints, per candidate, its tuning time, the spread of its
medians over the N selections and how often it won, then how often the most frequent
winner won (the issue's goal: the same in 9 of 10) and the median relative spread of the
medians. Writes ``benchmarks/results/final_selection.json``::

    python benchmarks/final_selection.py --op c2d --trials 32 --repeats 10
    python benchmarks/final_selection.py --op c2d --work-dir /tmp/c2d  # reuse a tuning

Tuning here runs with ``final_selection_top_k=0``, so the records are tuning's single
timings. A benchmark, not a test: nothing is asserted; on a shared machine the numbers
are noisy (the load the runner saw is reported).
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # the benchmarks' shared helpers, beside this file
from remeasure import spearman
from tune_ops import parse_workload


def tune_or_load(func, target, work_dir: str, trials: int, per_iter: int, seed: int):
    """The JSON database of ``work_dir``, tuned first when it holds no record of ``func``."""
    import metaschedule as ms
    from metaschedule.database import JSONDatabase
    from metaschedule.tir.function import IRModule

    db = JSONDatabase(work_dir=work_dir)
    if db.query_tuning_record(IRModule({"main": func})) is not None:
        print(f"  loaded {len(db)} record(s) from {work_dir}", flush=True)
        return db
    print(f"  tuning {trials} trials into {work_dir}", flush=True)
    start = time.perf_counter()
    db = ms.tune_tir(
        func,
        target,
        work_dir,
        trials,
        num_trials_per_iter=per_iter,
        seed=seed,
        final_selection_top_k=0,
    )
    print(f"  tuned in {time.perf_counter() - start:.1f} s", flush=True)
    return db


def repeat_selections(db, func, target, top_k: int, rounds: int, repeats: int) -> list[Any]:
    from metaschedule.builder import LocalBuilder
    from metaschedule.final_selection import select_best
    from metaschedule.runner import LocalRunner

    selections = []
    with LocalBuilder() as builder, LocalRunner() as runner:
        for n in range(repeats):
            start = time.perf_counter()
            sel = select_best(
                db, func, target, top_k=top_k, rounds=rounds, builder=builder, runner=runner
            )
            if sel is None:
                raise SystemExit("no valid record to select from")
            selections.append(sel)
            print(
                f"  selection {n + 1}/{repeats}: winner #{sel.best_index + 1} "
                f"({sel.medians[sel.best_index] * 1e6:.1f} us) in "
                f"{time.perf_counter() - start:.1f} s",
                flush=True,
            )
    return selections


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--op", default="c2d", help="a workload of tune_ops.py (suite: gmm, c2d, ...)")
    p.add_argument("--trials", type=int, default=32, help="tuning trials (without --work-dir)")
    p.add_argument("--per-iter", type=int, default=16)
    p.add_argument("--work-dir", default=None, help="a tuning folder to load (or to fill)")
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repeats", type=int, default=10, help="final selections to run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="where to write the results")
    args = p.parse_args(argv)
    from metaschedule.target import Target

    target = Target(f"llvm -num-cores {os.cpu_count()}")
    func = parse_workload(args.op).ms_func()
    work_dir = args.work_dir or tempfile.mkdtemp(prefix=f"final-selection-{args.op}-")
    print(f"== {args.op}: final selection repeated {args.repeats} times", flush=True)
    db = tune_or_load(func, target, work_dir, args.trials, args.per_iter, args.seed)
    sels = repeat_selections(db, func, target, args.top_k, args.rounds, args.repeats)
    records = sels[0].records
    wins = collections.Counter(s.best_index for s in sels)
    mode, mode_count = wins.most_common(1)[0]
    rows, candidates = [], []
    for i, record in enumerate(records):
        medians = [s.medians[i] for s in sels]
        finite = [m for m in medians if m != float("inf")]
        mid = statistics.median(finite) if finite else None
        spread = (max(finite) - min(finite)) / mid if finite and mid else None
        rows.append(
            [
                f"#{i + 1}",
                f"{record.mean_run_sec * 1e6:.1f}",
                f"{mid * 1e6:.1f}" if mid is not None else "failed",
                f"{min(finite) * 1e6:.1f}..{max(finite) * 1e6:.1f}" if finite else "-",
                f"{100 * spread:.1f}%" if spread is not None else "-",
                f"{wins.get(i, 0)}/{len(sels)}",
            ]
        )
        candidates.append(
            {
                "tuning_secs": record.mean_run_sec,
                "medians": medians,
                "rounds": [list(s.round_secs[i]) for s in sels],
                "median_of_medians": mid,
                "relative_spread": spread,
                "wins": wins.get(i, 0),
            }
        )
    spreads = [c["relative_spread"] for c in candidates if c["relative_spread"] is not None]
    # rank agreement of consecutive selections (Spearman of the medians), over the pairs
    rhos = [
        spearman(list(a.medians), list(b.medians))
        for a, b in zip(sels, sels[1:])
        if all(m != float("inf") for m in a.medians + b.medians) and len(records) > 2
    ]
    notes = [
        f"same winner (#{mode + 1}) in {mode_count} of {len(sels)} selections "
        f"(goal: 9 of 10); tuning's own choice was #1",
        "median relative spread of a candidate's medians over the selections: "
        + (f"{100 * statistics.median(spreads):.1f}%" if spreads else "-"),
    ]
    if rhos:
        notes.append(
            f"Spearman of consecutive selections' medians: median {statistics.median(rhos):.3f}"
        )
    common.print_table(
        f"Final selection of {args.op}: top {len(records)}, {args.rounds} rounds, "
        f"{len(sels)} repeats",
        ["candidate", "tuning (us)", "median (us)", "range (us)", "spread", "won"],
        rows,
        notes,
        plain=True,
    )
    out = {
        "op": args.op,
        "work_dir": work_dir,
        "top_k": args.top_k,
        "rounds": args.rounds,
        "repeats": len(sels),
        "winners": [s.best_index for s in sels],
        "same_winner": mode_count,
        "median_relative_spread": statistics.median(spreads) if spreads else None,
        "spearman_consecutive": rhos,
        "candidates": candidates,
        "machine": common.machine_info(),
    }
    print(f"wrote {common.write_json('final_selection', out, args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
