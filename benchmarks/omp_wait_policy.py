"""Which OpenMP wait policy should a measurement run under, quiet machine or busy?

Builds short parallel kernels (a matmul from ``metaschedule.testing``'s hand schedule,
and the multi-nest ``sfm``/``pool`` of ``omp_regions.py``, one region each), then times
each in fresh processes under several wait policies (passive, ``GOMP_SPINCOUNT`` of
10^4 ... 3*10^5, libgomp's default) with 0, 1 or 2 busy processes of our own beside it
(on top of whatever else runs on the machine), in interleaved rounds. Each timing also
records the CPU share other processes used meanwhile (``/proc/stat``), so the table
says how quiet "alone" was. Prints the median GFLOPS (matmul) or us per call per cell,
and writes the JSON::

    python benchmarks/omp_wait_policy.py --rounds 3 --kernels mm128,sfm,pool

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
import omp_regions

#: policy name -> environment of the timed process
POLICIES = {
    "passive (spin 0)": {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0"},
    "spin 1e4": {"GOMP_SPINCOUNT": "10000"},
    "spin 3e4": {"GOMP_SPINCOUNT": "30000"},
    "spin 1e5": {"GOMP_SPINCOUNT": "100000"},
    "default (spin 3e5)": {},
}

_CHILD = """
import json, sys, numpy as np
from metaschedule.runtime import load_module
from metaschedule.runtime.timer import HostLoad
lib = load_module(sys.argv[1]); shapes = json.loads(sys.argv[2])
rng = np.random.default_rng(0)
args = [rng.standard_normal(s).astype("float32") for s in shapes[:-1]]
args.append(np.zeros(shapes[-1], "float32"))
f = lib.time_evaluator(lib.entry_name, number=5, repeat=5, min_repeat_ms=30)
before = HostLoad.now()
t = f(*args)
print(json.dumps([t.median, before.until(HostLoad.now())["others_cores"]]))
"""


_PAUSE_C = r"""
#include <stdio.h>
#include <time.h>
static volatile int flag = 0;
int main(void) {  /* libgomp's spin: load the flag, then a pause instruction */
  struct timespec a, b; long n = 2000000; double best = 1e9;
  for (int r = 0; r < 7; ++r) {
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
      if (__atomic_load_n(&flag, __ATOMIC_ACQUIRE) != 0) break;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n;
    if (ns < best) best = ns;
  }
  printf("%.3f\n", best);
  return 0;
}
"""


def spin_iteration_ns() -> float | None:
    """Nanoseconds of one spin iteration (``GOMP_SPINCOUNT`` counts them), best of 7."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "pause.c"), os.path.join(tmp, "pause")
        with open(src, "w") as f:
            f.write(_PAUSE_C)
        try:
            subprocess.run([os.environ.get("CC", "cc"), "-O2", src, "-o", exe], check=True)
            return float(subprocess.run([exe], capture_output=True, text=True).stdout)
        except (OSError, subprocess.CalledProcessError, ValueError):
            return None


def build_matmul(n: int, cores: int) -> str:
    from metaschedule import te
    from metaschedule.codegen import build as ms_build
    from metaschedule.schedule import Schedule
    from metaschedule.target import Target
    from metaschedule.te import ops
    from metaschedule.testing.schedules import matmul_schedule

    target = Target(f"llvm -num-cores {cores}")
    a, b = te.placeholder((n, n), "float32", "A"), te.placeholder((n, n), "float32", "B")
    sch = matmul_schedule(Schedule(te.create_prim_func([a, b, ops.matmul(a, b)])), target)
    path = os.path.join(common.RESULTS_DIR, f".omp_matmul_{n}.so")
    os.makedirs(common.RESULTS_DIR, exist_ok=True)
    ms_build(sch.mod, target).export_library(path)
    return path


def kernels(names: list[str], cores: int) -> dict[str, tuple[str, list, float | None]]:
    """name -> (library path, argument shapes, flops or None)."""
    out = {}
    for name in names:
        if name.startswith("mm"):
            n = int(name[2:])
            out[name] = (build_matmul(n, cores), [(n, n), (n, n), (n, n)], 2.0 * n**3)
        else:
            path, _ = omp_regions.build(name, True, cores)
            _, ins, res = omp_regions.KERNELS[name]
            out[name] = (path, [*ins, res], None)
    return out


def time_once(path: str, shapes: list, env: dict[str, str]) -> tuple[float, float | None]:
    """(median seconds per call, other processes' cores meanwhile) in a fresh process."""
    full = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, path, json.dumps(shapes)],
        env={**full, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    secs, others = json.loads(out.stdout.strip().splitlines()[-1])
    return float(secs), others


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--kernels", default="mm128,sfm,pool", help="mmN (matmul N^3), sfm, pool, dep")
    p.add_argument("--competitors", default="0,1,2", help="busy processes of our own beside")
    p.add_argument("--policies", default=",".join(POLICIES), help="names of POLICIES")
    args = p.parse_args(argv)
    cores = os.cpu_count() or 1
    built = kernels(args.kernels.split(","), cores)
    hogs_counts = [int(x) for x in args.competitors.split(",")]
    policies = args.policies.split(",")
    cells: dict[tuple[str, str, int], list[tuple[float, float | None]]] = {}
    for r in range(args.rounds):
        for hogs in hogs_counts:
            procs = [
                subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)
            ]
            try:
                time.sleep(0.2 if procs else 0.0)
                order = policies if r % 2 == 0 else policies[::-1]
                for name, (path, shapes, _) in built.items():
                    for pol in order:
                        cells.setdefault((name, pol, hogs), []).append(
                            time_once(path, shapes, POLICIES[pol])
                        )
            finally:
                for h in procs:
                    h.kill()
                    h.wait()
        print(f"  round {r + 1}/{args.rounds}, load {os.getloadavg()[0]:.2f}", flush=True)
    ns = spin_iteration_ns()
    rows, payload = [], []
    for name, (_, _, flops) in built.items():
        for pol in policies:
            row = [name, pol]
            for hogs in hogs_counts:
                runs = cells[(name, pol, hogs)]
                secs = statistics.median(s for s, _ in runs)
                others = [o for _, o in runs if o is not None]
                seen = statistics.median(others) if others else float("nan")
                value = f"{flops / secs / 1e9:.1f} GF" if flops else f"{secs * 1e6:.0f} us"
                row.append(f"{value} ({seen:.1f})")
                payload.append(
                    {"kernel": name, "policy": pol, "busy_processes": hogs, "secs": secs,
                     "others_cores": others, "all_secs": [s for s, _ in runs]}
                )  # fmt: skip
            rows.append(row)
    spin = f"; one spin iteration: {ns:.1f} ns (1e4 spins: {ns * 1e-2:.0f} us)" if ns else ""
    common.print_table(
        f"median of {args.rounds} rounds, {cores} threads; in parentheses: CPU cores other "
        f"processes used while timing (median; our busy processes included){spin}",
        ["kernel", "OpenMP wait policy", *(f"+{h} busy" for h in hogs_counts)],
        rows,
        plain=True,
    )
    print("JSON:", common.write_json("omp_wait_policy", {"spin_ns": ns, "cells": payload}))
    for path, _, _ in built.values():
        os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
