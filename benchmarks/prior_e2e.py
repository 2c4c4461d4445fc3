"""End to end: tuning with the analytic prior's warm-up batches against uniform ones.

For each workload, tunes twice with ``ms.tune_tir`` (the default search and cost model,
the same seed): once as is (``EvolutionarySearch(prior="analytic")``, the default), once
with ``prior=None`` (uniformly random warm-up batches, as TVM). On a shared machine the
speeds measured during tuning are noisy, so the best ``--top`` records of both runs are
then built again and measured together, in ``--rounds`` rounds that alternate which run
goes first; each schedule's speed is its best over the rounds. Prints, per workload, the
best speed of each run and their ratio, plus the tuning wall times; writes
``benchmarks/results/prior_e2e.json``::

    python benchmarks/prior_e2e.py --workloads c2d,dep,pool --trials 64

A benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # the benchmarks' shared helpers, beside this file
from cost_model_rank import measure
from tune_ops import parse_workload


def tune(func, target, work_dir: str, trials: int, per_iter: int, prior: bool, seed: int):
    import metaschedule as ms
    from metaschedule.search_strategy import EvolutionarySearch

    start = time.perf_counter()
    db = ms.tune_tir(
        func,
        target,
        work_dir,
        trials,
        num_trials_per_iter=per_iter,
        strategy=EvolutionarySearch(prior="analytic" if prior else None),
        seed=seed,
    )
    return db, time.perf_counter() - start


def top_candidates(db, func, k: int) -> list[Any]:
    from metaschedule.arg_info import ArgInfo
    from metaschedule.measure_candidate import MeasureCandidate
    from metaschedule.schedule import Schedule
    from metaschedule.tir.function import IRModule

    mod = IRModule({"main": func})
    workload = db.commit_workload(mod)
    out = []
    for rec in db.get_top_k(workload, k):
        sch = Schedule(mod)
        rec.trace.apply_to_schedule(sch, remove_postproc=False)
        out.append(MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod)))
    return out


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    from metaschedule.cost_model.metric import costs_of
    from metaschedule.flop_count import estimate_flops
    from metaschedule.target import Target

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", default="c2d,dep,pool")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--num-trials-per-iter", type=int, default=64)
    p.add_argument("--top", type=int, default=3, help="best records of each run re-measured")
    p.add_argument("--rounds", type=int, default=3, help="interleaved re-measurement rounds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-cores", type=int, default=None)
    p.add_argument("--plain", action="store_true")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    info = common.machine_info()
    target = Target(f"llvm -num-cores {args.num_cores or info['physical_cores']}")
    rows = []
    for name in [w.strip() for w in args.workloads.split(",") if w.strip()]:
        func = parse_workload(name).ms_func()
        flops = estimate_flops(func)
        runs: dict[str, Any] = {}
        with tempfile.TemporaryDirectory(prefix="prior_e2e-") as root:
            for mode in ("prior", "uniform"):
                print(f"== {name}: tuning, warm-up {mode}", flush=True)
                db, wall = tune(
                    func,
                    target,
                    os.path.join(root, mode),
                    args.trials,
                    args.num_trials_per_iter,
                    mode == "prior",
                    args.seed,
                )
                cands = top_candidates(db, func, args.top)
                speeds = sorted(
                    (
                        flops / float(np.mean(r.run_secs)) / 1e9
                        for r in db.get_all_tuning_records()
                        if r.run_secs
                    ),
                    reverse=True,
                )
                runs[mode] = {
                    "wall_secs": wall,
                    "cands": cands,
                    "tuning_gflops": speeds[0] if speeds else 0.0,
                    "tuning_median_gflops": float(np.median(speeds)) if speeds else 0.0,
                    "tuning_top8_gflops": float(np.mean(speeds[:8])) if speeds else 0.0,
                }
        both = runs["prior"]["cands"] + runs["uniform"]["cands"]
        n_prior = len(runs["prior"]["cands"])
        best = np.full(len(both), np.inf)
        for r in range(args.rounds):
            order = list(range(len(both)))
            if r % 2:
                order = order[n_prior:] + order[:n_prior]
            res = measure([both[i] for i in order], target, repeat=3)
            costs = costs_of(res)
            for i, c in zip(order, costs):
                best[i] = min(best[i], c)
        gflops = flops / best / 1e9
        row = {
            "workload": name,
            "prior_gflops": float(gflops[:n_prior].max()) if n_prior else 0.0,
            "uniform_gflops": float(gflops[n_prior:].max()) if len(both) > n_prior else 0.0,
            "prior_tuning_gflops": runs["prior"]["tuning_gflops"],
            "uniform_tuning_gflops": runs["uniform"]["tuning_gflops"],
            "prior_tuning_median_gflops": runs["prior"]["tuning_median_gflops"],
            "uniform_tuning_median_gflops": runs["uniform"]["tuning_median_gflops"],
            "prior_tuning_top8_gflops": runs["prior"]["tuning_top8_gflops"],
            "uniform_tuning_top8_gflops": runs["uniform"]["tuning_top8_gflops"],
            "prior_wall_secs": runs["prior"]["wall_secs"],
            "uniform_wall_secs": runs["uniform"]["wall_secs"],
            "remeasured_gflops": gflops.tolist(),
        }
        row["ratio"] = row["prior_gflops"] / row["uniform_gflops"] if row["uniform_gflops"] else 0
        rows.append(row)
        print(
            f"   {name}: prior {row['prior_gflops']:.1f} GFLOPS, uniform "
            f"{row['uniform_gflops']:.1f} GFLOPS, ratio {row['ratio']:.2f}; during tuning: "
            f"median of all {row['prior_tuning_median_gflops']:.1f} vs "
            f"{row['uniform_tuning_median_gflops']:.1f}, mean of the top 8 "
            f"{row['prior_tuning_top8_gflops']:.1f} vs {row['uniform_tuning_top8_gflops']:.1f}",
            flush=True,
        )
    common.print_table(
        f"Best GFLOPS after {args.trials} trials, re-measured together ({args.rounds} rounds)",
        [
            "workload",
            "prior",
            "uniform",
            "prior / uniform",
            "median prior / uniform (tuning)",
            "tuning s prior",
            "tuning s uniform",
        ],
        [
            [
                r["workload"],
                f"{r['prior_gflops']:.1f}",
                f"{r['uniform_gflops']:.1f}",
                f"{r['ratio']:.2f}",
                f"{r['prior_tuning_median_gflops']:.1f} / {r['uniform_tuning_median_gflops']:.1f}",
                f"{r['prior_wall_secs']:.0f}",
                f"{r['uniform_wall_secs']:.0f}",
            ]
            for r in rows
        ],
        [
            f"prior, uniform: the best of the best {args.top} records of each run, re-measured "
            f"in {args.rounds} interleaved rounds; median: of every record, as measured "
            "during tuning"
        ],
        plain=args.plain,
    )
    out = common.write_json(
        "prior_e2e", {"machine": info, "args": vars(args), "rows": rows}, args.json
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
