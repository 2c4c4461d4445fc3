"""Re-measurement rank correlation: how well two measurements of the same schedules agree.

Samples N distinct random schedules of a workload (as ``cost_model_rank.py`` does), builds
each once, and measures all of them in four passes, alternating two protocols:

* ``before``: the protocol of the runner before the recorded one: ``number`` sized from
  the first repeat alone (no probes, no time bound) and OpenMP at libgomp's default wait
  policy (threads spin ``GOMP_SPINCOUNT=300000`` before sleeping);
* ``after``: ``EvaluatorConfig()``'s defaults (three-probe sizing, bounded time) with
  passive OpenMP waiting (``OMP_WAIT_POLICY=PASSIVE``, ``GOMP_SPINCOUNT=0``).

Passes run in the order before, after, before, after, so the two protocols see the same
drift of the machine's load. For each protocol it prints Spearman's rank correlation of
the two passes (``1 / mean seconds``), the median relative difference, and the load the
runner recorded (others' CPU cores while timing). Writes
``benchmarks/results/remeasure.json``::

    python benchmarks/remeasure.py --workload matmul-256 --n 100

A benchmark, not a test: nothing is asserted; on a shared machine the numbers are noisy.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # the benchmarks' shared helpers, beside this file
from cost_model_rank import sample_schedules
from tune_ops import parse_workload

#: protocol name -> (EvaluatorConfig overrides, environment of the runner workers)
PROTOCOLS: dict[str, tuple[dict[str, int], dict[str, str | None]]] = {
    "before": (
        {"num_probes": 0, "max_total_ms": 0},
        {"GOMP_SPINCOUNT": "300000", "OMP_WAIT_POLICY": None},
    ),
    "after": ({}, {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0"}),
}


def spearman(a: list[float], b: list[float]) -> float:
    import numpy as np

    def ranks(x):
        order = np.argsort(x, kind="stable")
        r = np.empty(len(x))
        r[order] = np.arange(len(x))
        return r

    ra, rb = ranks(np.asarray(a)), ranks(np.asarray(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def build_all(candidates, target) -> list[str | None]:
    from metaschedule.builder import BuilderInput, LocalBuilder

    with LocalBuilder() as builder:
        built = builder.build([BuilderInput(c.sch.mod, target) for c in candidates])
    return [b.artifact_path if b.error_msg is None else None for b in built]


def measure_pass(candidates, paths, target, protocol: str) -> list[Any]:
    from metaschedule.runner import EvaluatorConfig, LocalRunner, RunnerInput
    from metaschedule.runner.config import WorkerEnv

    overrides, env = PROTOCOLS[protocol]
    config = EvaluatorConfig(**overrides)
    ok = [i for i, p in enumerate(paths) if p is not None]
    # The workers fork from a server started with the first pool's environment: the
    # initializer sets each pass's OpenMP variables in the worker itself.
    with LocalRunner(evaluator_config=config, initializer=WorkerEnv(env)) as runner:
        futures = runner.run(
            [RunnerInput(paths[i], target.kind, list(candidates[i].args_info)) for i in ok]
        )
        results = {i: f.result() for i, f in zip(ok, futures)}
    return [results.get(i) for i in range(len(paths))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", default="matmul-256", help="a workload name of tune_ops.py")
    p.add_argument("--n", type=int, default=100, help="distinct schedules")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="where to write the results")
    args = p.parse_args(argv)
    from metaschedule.target import Target

    target = Target(f"llvm -num-cores {os.cpu_count()}")
    func = parse_workload(args.workload).ms_func()
    print(f"== {args.workload}: sampling {args.n} schedules", flush=True)
    candidates, meta = sample_schedules(func, target, args.n, args.seed)
    start = time.perf_counter()
    paths = build_all(candidates, target)
    print(
        f"  built {sum(p is not None for p in paths)}/{len(paths)} in "
        f"{time.perf_counter() - start:.1f} s",
        flush=True,
    )
    passes: dict[str, list[list[Any]]] = {name: [] for name in PROTOCOLS}
    for _ in range(2):
        for name in PROTOCOLS:
            start = time.perf_counter()
            passes[name].append(measure_pass(candidates, paths, target, name))
            print(
                f"  {name}: pass {len(passes[name])} in {time.perf_counter() - start:.1f} s",
                flush=True,
            )
    for path in paths:
        if path and os.path.exists(path):
            os.unlink(path)
    rows, out = (
        [],
        {
            "workload": args.workload,
            "n": len(candidates),
            "meta": meta,
            "machine": common.machine_info(),
            "protocols": {},
        },
    )
    for name, (first, second) in passes.items():
        both = [
            (a, b)
            for a, b in zip(first, second)
            if a is not None and b is not None and a.run_secs and b.run_secs
        ]
        x = [1.0 / statistics.fmean(a.run_secs) for a, _ in both]
        y = [1.0 / statistics.fmean(b.run_secs) for _, b in both]
        rho = spearman(x, y) if len(both) > 2 else float("nan")
        rel = statistics.median(abs(u - v) / max(u, v) for u, v in zip(x, y)) if both else None
        loads = [r.info.get("others_cores") for r, _ in both if r.info] + [
            r.info.get("others_cores") for _, r in both if r.info
        ]
        loads = [v for v in loads if v is not None]
        load = statistics.median(loads) if loads else None
        rows.append(
            [
                name,
                len(both),
                f"{rho:.3f}",
                f"{100 * rel:.1f}%" if rel is not None else "-",
                f"{load:.2f}" if load is not None else "-",
            ]
        )
        policies = sorted({str(r.info.get("omp_wait_policy")) for r, _ in both if r.info})
        print(f"  {name}: OpenMP wait policy in the workers: {', '.join(policies)}")
        out["protocols"][name] = {
            "pairs": len(both),
            "spearman": rho,
            "median_rel_diff": rel,
            "others_cores_median": load,
            "protocol": (first[0].info if first and first[0] else None),
        }
    common.print_table(
        f"Re-measurement agreement, {args.workload}, {len(candidates)} schedules",
        ["protocol", "pairs", "Spearman", "median |diff|", "others' cores"],
        rows,
        plain=True,
    )
    print(f"wrote {common.write_json('remeasure', out, args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
