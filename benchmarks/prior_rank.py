"""How well the analytic prior (``metaschedule.cost_model.prior``) ranks random schedules.

The prior picks the first batches of a search while the learned cost model warms up
(``EvolutionarySearch(prior=...)``), so what matters is how it ranks uniform random
samples of the default design space. Per workload this samples N distinct random
schedules (``cost_model_rank.sample_schedules``), builds and measures each once with the
runner's normal protocol (``cost_model_rank.measure``), scores them with the prior, and
reports, against the measured throughput:

* ``spearman``: rank correlation over all N (a random ranking: 0, std ``1/sqrt(N-1)``);
* ``hit8``: whether the prior's top 8 holds one of the true top 5% (``hit8 random``: the
  chance that 8 random picks do);
* the warm-up batch, simulated: from many random pools of ``pool`` schedules (the
  oversampled candidates), pick ``batch`` as the search does (the prior's best, a share
  ``random_share`` at random) or uniformly at random (the search without prior), and
  compare the best measured speed picked to the pool's best (``best/pool``) and the
  median speed picked (``median``): the means over the pools.

Measured data is kept (``--data-dir``, one JSON per workload, as ``cost_model_rank.py``
writes it) and reused unless ``--remeasure``; ``--tuning-dir`` adds the records of earlier
tuning runs (``<dir>/<op>/metaschedule``, JSON databases: a 64-trial run's records are
random warm-up samples) as extra rows. Prints a table and writes
``benchmarks/results/prior_rank.json``::

    python benchmarks/prior_rank.py --workloads dep,pool,sfm,tbg,c2d --n 96

Measurements on a shared machine are noisy: compare ranks, not absolute speeds. A
benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # the benchmarks' shared helpers, beside this file
from cost_model_rank import load_data, measure, sample_schedules, save_data
from tune_ops import parse_workload

DEFAULT_WORKLOADS = "dep,pool,sfm,tbg,c2d,matmul-256,cbr,dns"


def hit_chance(n: int, top: int, k: int) -> float:
    """Chance that ``k`` of ``n`` drawn at random hold one of the ``top`` best."""
    if k >= n:
        return 1.0
    return 1.0 - math.comb(n - top, k) / math.comb(n, k)


def simulate(scores, thr, pool: int, batch: int, random_share: float, trials: int, seed: int):
    """Mean best-picked/pool-best and picked-median/pool-median, prior vs random."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = len(thr)
    pool = min(pool, n)
    batch = min(batch, pool)
    out: dict[str, list[float]] = {
        k: [] for k in ("prior_best", "rand_best", "prior_med", "rand_med")
    }
    n_best = batch - int(round(batch * random_share))
    for _ in range(trials):
        idx = rng.choice(n, pool, replace=False)
        order = idx[np.argsort(-scores[idx], kind="stable")]
        rest = order[n_best:]
        picks = np.concatenate([order[:n_best], rng.choice(rest, batch - n_best, replace=False)])
        rand = rng.choice(idx, batch, replace=False)
        out["prior_best"].append(thr[picks].max() / thr[idx].max())
        out["rand_best"].append(thr[rand].max() / thr[idx].max())
        out["prior_med"].append(np.median(thr[picks]) / np.median(thr[idx]))
        out["rand_med"].append(np.median(thr[rand]) / np.median(thr[idx]))
    return {k: float(np.mean(v)) for k, v in out.items()}


def load_tuning_records(work_dir: str, workload: str):
    """Candidates and results of the records of a tuning run's JSON database."""
    from metaschedule.arg_info import ArgInfo
    from metaschedule.database import JSONDatabase
    from metaschedule.measure_candidate import MeasureCandidate
    from metaschedule.runner import RunnerResult
    from metaschedule.schedule import Schedule
    from metaschedule.tir.function import IRModule

    db = JSONDatabase(work_dir=work_dir, allow_missing=False)
    mod = IRModule({"main": parse_workload(workload).ms_func()})
    cands, results = [], []
    for rec in db.get_all_tuning_records():
        sch = Schedule(mod)
        rec.trace.apply_to_schedule(sch, remove_postproc=False)
        cands.append(MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod)))
        results.append(RunnerResult(rec.run_secs, None if rec.run_secs else "failed"))
    return cands, results


def evaluate(name: str, target, cands, results, args) -> dict[str, Any]:
    import numpy as np

    from metaschedule.cost_model.metric import costs_of, rank_correlation
    from metaschedule.cost_model.prior import AnalyticPrior, Machine
    from metaschedule.search_strategy import WarmUpPolicy

    costs = costs_of(results)
    ok = np.isfinite(costs)
    prior = AnalyticPrior()
    machine = Machine.of_target(target)
    start = time.perf_counter()
    scores = np.array([prior.score_mod(c.sch.mod, machine) for c in cands])
    per_cand = (time.perf_counter() - start) / max(1, len(cands))
    scores, thr = scores[ok], 1.0 / costs[ok]
    n = len(thr)
    top = max(1, math.ceil(0.05 * n))
    k = min(8, n)
    best_true = set(np.argsort(-thr, kind="stable")[:top].tolist())
    best_prior = np.argsort(-scores, kind="stable")[:k]
    sim = simulate(
        scores,
        thr,
        args.pool,
        args.batch,
        WarmUpPolicy().random_share,  # the search's default share
        args.sim_trials,
        args.seed,
    )
    return {
        "workload": name,
        "n": n,
        "failed": int((~ok).sum()),
        "spearman": rank_correlation(scores, thr),
        "spearman_random_std": 1.0 / math.sqrt(max(1, n - 1)),
        "hit8": bool(best_true & set(best_prior.tolist())),
        "hit8_random": hit_chance(n, top, k),
        "top8_best_over_best": float(thr[best_prior].max() / thr.max()),
        "best_gflops_ratio_spread": float(thr.max() / np.median(thr)),
        "prior_ms_per_candidate": per_cand * 1e3,
        **{f"sim_{key}": v for key, v in sim.items()},
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", default=DEFAULT_WORKLOADS, help="tune_ops.py workload names")
    p.add_argument("--n", type=int, default=96, help="distinct random schedules per workload")
    p.add_argument("--repeat", type=int, default=2, help="measurements per schedule")
    p.add_argument("--num-cores", type=int, default=None, help="threads (default: physical)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--data-dir",
        default=os.path.join(common.RESULTS_DIR, "prior_rank_data"),
        help="measured data, one <workload>.json each; reused when present",
    )
    p.add_argument("--remeasure", action="store_true", help="measure even when data exists")
    p.add_argument(
        "--tuning-dir",
        default=None,
        help="a tune_ops work dir: <dir>/<op>/metaschedule databases are scored too",
    )
    p.add_argument("--pool", type=int, default=64, help="simulated oversampled pool")
    p.add_argument("--batch", type=int, default=16, help="simulated picks from each pool")
    p.add_argument("--sim-trials", type=int, default=400, help="simulated pools")
    p.add_argument("--plain", action="store_true", help="plain-text tables (no rich)")
    p.add_argument("--json", default=None, help="output (default results/prior_rank.json)")
    p.add_argument(
        "--target",
        default="llvm",
        help='"llvm" (this CPU) or another CPU ("llvm -mcpu=haswell": AVX2 code); '
        "measured data of another target in --data-dir is measured again",
    )
    return p.parse_args(argv)


def _data_dir(args) -> str:
    """``--data-dir``, with the target's CPU appended when it is not the host's."""
    mcpu = [f for f in args.target.split() if f.startswith("-mcpu=")]
    return args.data_dir + (f"-{mcpu[0][6:]}" if mcpu else "")


def main(argv: list[str] | None = None) -> int:
    from metaschedule.target import Target

    args = parse_args(argv)
    info = common.machine_info()
    cores = args.num_cores or info["physical_cores"]
    rows: list[dict[str, Any]] = []
    for workload in [w.strip() for w in args.workloads.split(",") if w.strip()]:
        path = os.path.join(_data_dir(args), f"{workload}.json")
        wanted = Target(f"{args.target} -num-cores {cores}")
        stored = load_data(path) if os.path.exists(path) and not args.remeasure else None
        if stored is not None and str(Target(stored[1])) == str(wanted):
            _, target_str, cands, results, _, _ = stored
            target = Target(target_str)
            print(f"{workload}: {len(cands)} measured schedules from {path}", flush=True)
        else:
            target = wanted
            print(f"{workload}: sampling {args.n} schedules", flush=True)
            cands, meta = sample_schedules(
                parse_workload(workload).ms_func(), target, args.n, args.seed
            )
            results = measure(cands, target, args.repeat)
            save_data(path, workload, target, cands, results, meta)
        rows.append(evaluate(workload, target, cands, results, args))
        if args.tuning_dir:
            db_dir = os.path.join(args.tuning_dir, workload, "metaschedule")
            if os.path.isdir(db_dir):
                cands, results = load_tuning_records(db_dir, workload)
                if sum(r.error_msg is None for r in results) < 8:
                    print(f"{workload}: fewer than 8 records in {db_dir}; skipped")
                    continue
                target = wanted
                rows.append(evaluate(f"{workload} (tuning log)", target, cands, results, args))
    columns = [
        "workload",
        "n",
        "spearman",
        "hit8",
        "hit8 random",
        "top8 best/best",
        f"best/pool prior ({args.batch} of {args.pool})",
        "best/pool random",
        "median prior",
        "median random",
        "ms/cand",
    ]
    table = [
        [
            r["workload"],
            str(r["n"]),
            f"{r['spearman']:.2f}",
            "yes" if r["hit8"] else "no",
            f"{r['hit8_random']:.2f}",
            f"{r['top8_best_over_best']:.2f}",
            f"{r['sim_prior_best']:.2f}",
            f"{r['sim_rand_best']:.2f}",
            f"{r['sim_prior_med']:.2f}",
            f"{r['sim_rand_med']:.2f}",
            f"{r['prior_ms_per_candidate']:.1f}",
        ]
        for r in rows
    ]
    notes = [
        "spearman: prior score vs measured throughput (random ranking: 0 +- 1/sqrt(n-1));",
        "hit8: the prior's top 8 holds one of the true top 5% (hit8 random: chance of 8 random);",
        "best/pool, median: picks of simulated warm-up batches relative to their pool (means).",
    ]
    common.print_table("Analytic prior vs measured speed", columns, table, notes, plain=args.plain)
    out = common.write_json(
        "prior_rank", {"machine": info, "args": vars(args), "rows": rows}, args.json
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
