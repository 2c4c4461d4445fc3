"""Does passive OpenMP waiting help a measured kernel when another process competes?

Builds a parallel matmul (the hand-written schedule of ``metaschedule.testing``), then
times it in fresh processes under each OpenMP wait policy, with and without one busy
process of our own beside it (on top of whatever else runs on the machine), in
interleaved rounds. Prints the median GFLOPS per (policy, competitor) cell::

    python benchmarks/omp_wait_policy.py --n 512 --rounds 5

A benchmark, not a test: nothing is asserted; on a shared machine the numbers are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common

POLICIES = {
    "default (spin, then sleep)": {},
    "active": {"OMP_WAIT_POLICY": "ACTIVE"},
    "passive (runner default)": {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0"},
}

_CHILD = """
import json, sys, numpy as np
from metaschedule.runtime import load_module
lib = load_module(sys.argv[1]); n = int(sys.argv[2])
a = np.random.rand(n, n).astype("float32"); b = np.random.rand(n, n).astype("float32")
c = np.zeros((n, n), "float32")
t = lib.time_evaluator(lib.entry_name, number=3, repeat=5, min_repeat_ms=50)(a, b, c)
print(json.dumps(t.median))
"""


def build(n: int) -> str:
    from metaschedule import te
    from metaschedule.codegen import build as ms_build
    from metaschedule.schedule import Schedule
    from metaschedule.target import Target
    from metaschedule.te import ops
    from metaschedule.testing.schedules import matmul_schedule

    target = Target(f"llvm -num-cores {os.cpu_count()}")
    a, b = te.placeholder((n, n), "float32", "A"), te.placeholder((n, n), "float32", "B")
    sch = matmul_schedule(Schedule(te.create_prim_func([a, b, ops.matmul(a, b)])), target)
    path = os.path.join(common.RESULTS_DIR, f".omp_matmul_{n}.so")
    os.makedirs(common.RESULTS_DIR, exist_ok=True)
    ms_build(sch.mod, target).export_library(path)
    return path


def time_once(path: str, n: int, env: dict[str, str]) -> float:
    full = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, path, str(n)],
        env={**full, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=512)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    path = build(args.n)
    flops = 2.0 * args.n**3
    cells: dict[tuple[str, bool], list[float]] = {}
    for r in range(args.rounds):
        for competitor in (False, True):
            hog = (
                subprocess.Popen([sys.executable, "-c", "while True: pass"]) if competitor else None
            )
            try:
                time.sleep(0.2 if hog else 0.0)
                for name, env in POLICIES.items():
                    secs = time_once(path, args.n, env)
                    cells.setdefault((name, competitor), []).append(flops / secs / 1e9)
            finally:
                if hog is not None:
                    hog.kill()
                    hog.wait()
        print(f"  round {r + 1}/{args.rounds}", flush=True)
    rows = []
    for name in POLICIES:
        quiet, busy = (statistics.median(cells[(name, c)]) for c in (False, True))
        rows.append([name, f"{quiet:.1f}", f"{busy:.1f}", f"{busy / quiet:.2f}"])
    common.print_table(
        f"matmul-{args.n} GFLOPS (median of {args.rounds} rounds)",
        ["OpenMP wait policy", "alone", "+1 busy process", "ratio"],
        rows,
        plain=True,
    )
    os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
