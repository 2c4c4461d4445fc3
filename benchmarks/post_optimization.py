"""Droplet post-optimization: the same tuning run with and without it.

For each workload: ``tune_tir`` with the given budget, then a copy of its work dir is
post-optimized with ``PostOpt`` (up to ``--post-trials`` neighbours). The best schedule
of each is rebuilt, checked against numpy and timed in interleaved rounds under the host
measurement lock; wall times are the search's, and the search's plus post-optimization's.

    python benchmarks/post_optimization.py --workloads gmm,c2d --trials 64 --post-trials 100
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import tune_ops  # noqa: E402

import metaschedule as ms  # noqa: E402
from metaschedule.codegen import build  # noqa: E402
from metaschedule.post_optimization import PostOpt  # noqa: E402

ALIASES = {"gmm": "matmul-1024", "c2d": "conv2d-resnet-3x3"}


def best_timer(work_dir: str, func, target, args, expected, wl):
    db = ms.Database.create("json", work_dir=work_dir)
    sch = ms.tir_integration.compile_tir(db, func, target)
    lib = build(sch.mod, target)
    out = np.zeros(expected.shape, np.float32)
    packed = lib.pack_weights(*args, out)[:-1]  # weights RewriteLayout re-laid out, once
    lib(*packed, out)
    tune_ops.check_close("metaschedule", out, expected, tune_ops.reduction_length(wl))
    return tune_ops.module_timer(lib, packed, out)


def run(name: str, trials: int, post_trials: int, seed: int) -> dict:
    wl = tune_ops.parse_workload(ALIASES.get(name, name))
    target = ms.Target("llvm")
    func = wl.ms_func()
    args = wl.inputs()
    expected = wl.reference(args)
    root = tempfile.mkdtemp(prefix=f"ms-postopt-{name}-")
    base, post = os.path.join(root, "base"), os.path.join(root, "post")
    start = time.perf_counter()
    ms.tune_tir(func, target, base, trials, seed=seed)
    tune_secs = time.perf_counter() - start
    shutil.copytree(base, post)
    start = time.perf_counter()
    opt = PostOpt(post, target, trials=post_trials)
    opt.run()
    post_secs = time.perf_counter() - start
    droplet = opt.results[0].droplet if opt.results else None
    timers = {
        "without": best_timer(base, func, target, args, expected, wl),
        "with": best_timer(post, func, target, args, expected, wl),
    }
    samples: dict[str, list[float]] = {k: [] for k in timers}
    for _ in range(3):  # interleaved rounds
        for key, timer in timers.items():
            samples[key].extend(timer())
    gflops = {k: wl.analytic_flops / min(v) / 1e9 for k, v in samples.items()}
    shutil.rmtree(root, ignore_errors=True)
    return {
        "workload": name,
        "trials": trials,
        "post_trials": post_trials,
        "gflops_without": gflops["without"],
        "gflops_with": gflops["with"],
        "wall_without": tune_secs,
        "wall_with": tune_secs + post_secs,
        "neighbours_measured": None if droplet is None else droplet.measured,
        "moves": None if droplet is None else droplet.moves,
        "droplet_speedup": None if droplet is None else droplet.speedup,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workloads", default="gmm,c2d", help="comma-separated workloads")
    parser.add_argument("--trials", type=int, default=64, help="trials of the main search")
    parser.add_argument(
        "--post-trials",
        type=int,
        default=100,
        help="neighbours Droplet measures at most, per workload",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the main search")
    parser.add_argument("--plain", action="store_true", help="plain-text table")
    ns = parser.parse_args(argv)
    info = common.machine_info()
    for line in common.machine_lines(info):
        print(line)
    rows = [run(n, ns.trials, ns.post_trials, ns.seed) for n in ns.workloads.split(",")]
    common.print_table(
        f"Droplet post-optimization ({ns.trials} trials + up to {ns.post_trials})",
        [
            "workload",
            "GFLOPS without",
            "GFLOPS with",
            "wall s without",
            "wall s with",
            "neighbours",
            "moves",
        ],
        [
            [
                r["workload"],
                r["gflops_without"],
                r["gflops_with"],
                r["wall_without"],
                r["wall_with"],
                r["neighbours_measured"],
                r["moves"],
            ]
            for r in rows
        ],
        plain=ns.plain,
    )
    print("JSON:", common.write_json("post_optimization", {"machine": info, "rows": rows}))


if __name__ == "__main__":
    main()
