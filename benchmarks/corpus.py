"""Measure random schedules of many workloads into a corpus part (see
:mod:`metaschedule.cost_model.corpus`), to pre-train the XGBoost cost model.

Per workload: ``--n`` structurally distinct random schedules of the default design space
(``cost_model_rank.sample_schedules``: each design-space trace replayed with fresh
decisions and post-processed), built and measured once with the runner's protocol;
each becomes a tuning record (failures as ``[1e10]``) in the part's JSON database. The
part's ``machine.json`` holds the target's ``CpuIsa``, the CPU model and the command;
``workload_names.json`` maps each workload's structural hash to its name, so training
can hold workloads out by name. A killed run resumes: workloads with ``--n`` records
already are skipped.

Workloads: ``suite`` (the 8 suite operators), ``extra`` (16 operators outside it),
``shapes`` (matmul, dense and conv2d sizes from small to ResNet's), ``fuzz`` (``--fuzz``
random te programs of the fuzzer's generator: small, at most 2048 elements), or names as in
``tune_ops.py``::

    chrt -f 5 taskset -c 1 python benchmarks/corpus.py --out corpus/zen4-avx512 \\
        --workloads suite,extra,shapes --n 48 --num-cores 1
    chrt -f 5 taskset -c 1 python benchmarks/corpus.py --out corpus/zen4-avx2 \\
        --target "llvm -mcpu=haswell" --workloads suite,extra,shapes --n 48 --num-cores 1

A benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # the benchmarks' shared helpers, beside this file
import extra_ops
import suite
from cost_model_rank import sample_schedules
from tune_ops import parse_workload

#: matmul, dense and conv2d sizes between the toy and ResNet's (``tune_ops`` names)
SHAPES = (
    "matmul-64",
    "matmul-256",
    "matmul-128x512x64",
    "matmul-384x96x256",
    "dense-1x512x1000",
    "dense-32x768x768",
    "dense-128x256x1024",
    "conv2d-1x28x28x128-f128-k3-p1",
    "conv2d-1x14x14x256-f256-k3-p1",
    "conv2d-1x7x7x512-f512-k3-p1",
    "conv2d-1x28x28x64-f128-k1",
    "conv2d-1x56x56x32-f32-k3-s2-p1",
    "conv2d-1x30x30x16-f48-k5-p2",
)
NAMES_FILE = "workload_names.json"


def workload_names(spec: str) -> list[str]:
    out: list[str] = []
    for item in spec.split(","):
        item = item.strip()
        if item == "suite":
            out += list(suite.SUITE)
        elif item == "extra":
            out += list(extra_ops.EXTRA)
        elif item == "shapes":
            out += list(SHAPES)
        elif item == "fuzz":
            out.append("fuzz")
        elif item:
            parse_workload(item)  # fails early on a bad name
            out.append(item)
    return out


def fuzz_funcs(count: int, seed: int) -> list[tuple[str, Any]]:
    """``count`` random te programs of the fuzzer's generator, as PrimFuncs."""
    from metaschedule.testing.fuzz import NumpyDraw, random_program

    out = []
    for i in range(count):
        program = random_program(NumpyDraw(seed * 1000 + i))
        out.append((f"fuzz-{seed}-{i}", program.func()))
    return out


def measure_into(
    db, names: dict[str, str], name: str, func, target, n: int, seed: int, max_total_ms: int
) -> int:
    """Sample, build, measure and record ``n`` schedules of ``func``; returns how many."""
    from cost_model_rank import measure

    from metaschedule.database import TuningRecord
    from metaschedule.runner import EvaluatorConfig
    from metaschedule.tir.function import IRModule

    mod = IRModule({"main": func})
    workload = db.commit_workload(mod)
    have = sum(1 for r in db.get_all_tuning_records() if r.workload.shash == workload.shash)
    names[str(workload.shash)] = name
    if have >= n:
        print(f"{name}: {have} records already, skipped", flush=True)
        return 0
    candidates, meta = sample_schedules(func, target, n, seed)
    # three repeats of at least 20 ms, at most max_total_ms: a slow schedule's rank is
    # clear long before a precise time
    config = EvaluatorConfig(number=1, repeat=3, min_repeat_ms=20, max_total_ms=max_total_ms)
    results = measure(candidates, target, repeat=3, config=config)
    for c, r in zip(candidates, results):
        run_secs = r.run_secs if r.error_msg is None and r.run_secs else [1e10]
        db.commit_tuning_record(
            TuningRecord(c.sch.trace, workload, run_secs, target, list(c.args_info))
        )
    ok = [min(r.run_secs) for r in results if r.error_msg is None and r.run_secs]
    spread = f"{max(ok) / min(ok):.1f}x" if ok else "-"
    print(
        f"{name}: {len(candidates)} schedules ({meta['design_spaces']} spaces), "
        f"{len(ok)} ran, slowest/fastest {spread}",
        flush=True,
    )
    return len(candidates)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the corpus part (a folder) to write")
    p.add_argument("--workloads", default="suite,extra,shapes")
    p.add_argument("--n", type=int, default=48, help="random schedules per workload")
    p.add_argument("--fuzz", type=int, default=12, help="random te programs for 'fuzz'")
    p.add_argument("--target", default="llvm")
    p.add_argument("--num-cores", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--max-total-ms", type=int, default=500, help="timed milliseconds per schedule at most"
    )
    args = p.parse_args(argv)

    from metaschedule.cost_model.corpus import write_machine
    from metaschedule.target import Target

    info = common.machine_info()
    cores = args.num_cores or info["physical_cores"]
    target = Target(f"{args.target} -num-cores {cores}")
    part = write_machine(
        args.out,
        target,
        cpu_model=info.get("cpu_model"),
        date=time.strftime("%Y-%m-%d"),
        command=" ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
    )
    db = part.database()
    names_path = os.path.join(args.out, NAMES_FILE)
    names: dict[str, str] = {}
    if os.path.exists(names_path):
        with open(names_path) as f:
            names = json.load(f)
    jobs: list[tuple[str, Any]] = []
    for name in workload_names(args.workloads):
        if name == "fuzz":
            jobs += fuzz_funcs(args.fuzz, args.seed)
        else:
            jobs.append((name, parse_workload(name).ms_func()))
    print(f"corpus part {args.out}: {len(jobs)} workloads, {args.n} schedules each, {target}")
    start = time.perf_counter()
    total = 0
    for i, (name, func) in enumerate(jobs):
        total += measure_into(
            db, names, name, func, target, args.n, args.seed + i, args.max_total_ms
        )
        with open(names_path, "w") as f:
            json.dump(names, f, indent=1)
    print(f"measured {total} schedules in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
