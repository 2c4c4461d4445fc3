"""Profile the search part of ``ms.tune_tir`` with the dummy builder and runner.

The dummy builder compiles nothing and the dummy runner returns deterministic timings,
so the wall time is the search alone: sampling, mutation, replay, postprocessing,
feature extraction and the cost model. Prints the Profiler table per workload, the
search's CPU seconds (``process_time`` of candidate generation: steadier than wall time
on a shared machine), a digest of the traces of every record (equal digests: the
search picked the same schedules, e.g. before and after a speed-up) and, with
``--cprofile``, the top functions by cumulative time::

    python benchmarks/profile_search.py --workloads matmul-512,conv2d-resnet-3x3 --trials 64
    python benchmarks/profile_search.py --workloads matmul-512 --cprofile 30

A benchmark, not a test: nothing is asserted; timings vary with the machine's load.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import os
import pstats
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tune_ops import parse_workload


def profile_one(name: str, trials: int, seed: int, cprofile: int) -> dict:
    import metaschedule as ms
    from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner
    from metaschedule.tune_context import TuneContext

    func = parse_workload(name).ms_func()
    prof = cProfile.Profile() if cprofile else None
    search_cpu = [0.0]
    generate = TuneContext.generate_measure_candidates

    def timed_generate(self):
        start = time.process_time()
        try:
            return generate(self)
        finally:
            search_cpu[0] += time.process_time() - start

    TuneContext.generate_measure_candidates = timed_generate  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory() as work_dir:
            start = time.perf_counter()
            with ms.Profiler() as profiler:
                if prof:
                    prof.enable()
                db = ms.tune_tir(
                    func,
                    "llvm",
                    work_dir,
                    trials,
                    num_trials_per_iter=64,
                    builder=DummyBuilder(),
                    runner=DummyRunner(),
                    seed=seed,
                )
                if prof:
                    prof.disable()
            wall = time.perf_counter() - start
    finally:
        TuneContext.generate_measure_candidates = generate  # type: ignore[method-assign]
    traces = "\n".join(json.dumps(r.trace.as_json()) for r in db.get_all_tuning_records())
    digest = hashlib.sha1(traces.encode()).hexdigest()[:12]
    print(
        f"== {name}: {trials} trials, {wall:.2f} s, search CPU {search_cpu[0]:.2f} s, "
        f"traces {digest}"
    )
    print(profiler.table())
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(cprofile)
        pstats.Stats(prof).sort_stats("tottime").print_stats(cprofile)
    return {
        "wall_secs": wall,
        "search_cpu_secs": search_cpu[0],
        "traces_digest": digest,
        "phases": profiler.get(),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", default="matmul-512,conv2d-resnet-3x3")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cprofile", type=int, default=0, help="print the top N functions")
    p.add_argument("--json", default=None, help="write the phases here")
    args = p.parse_args(argv)
    out = {
        w: profile_one(w, args.trials, args.seed, args.cprofile) for w in args.workloads.split(",")
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
