"""Cold build time of the suite's tuning candidates: what one build costs the tuner.

For each suite operator, replays random decisions of every design space (as the
evolutionary search's first samples are made, postprocessors included) and builds each
candidate with an empty kernel cache, so the C compiler always runs. Prints, per
operator, the candidates built, the generated C's size and the cold build seconds
(median and maximum, wall and CPU: the CPU seconds do not grow when other processes
share the cores), and writes ``benchmarks/results/cold_build.json``::

    python benchmarks/cold_build.py --workloads gmm,c2d,cbr --samples 3

Build seconds are wall time: on a machine others share they grow with the load (the
load average is printed), so compare runs made at the same load.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  (the benchmarks folder, not a package)
import suite  # noqa: E402


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", default=",".join(suite.SUITE), help="comma-separated suite names")
    p.add_argument("--samples", type=int, default=3, help="candidates per design space (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plain", action="store_true")
    p.add_argument("--json", default=None, help="output path (default benchmarks/results/)")
    p.add_argument(
        "--target", default="llvm", help='"llvm" (this CPU) or e.g. "llvm -mcpu=haswell"'
    )
    return p.parse_args(argv)


def _candidates(name: str, target, samples: int, seed: int):
    """Random schedules of every design space of suite op ``name``, postprocessed."""
    from metaschedule import te
    from metaschedule.postproc import Postproc
    from metaschedule.search_strategy.base import TraceReplayer
    from metaschedule.space_generator import PostOrderApply
    from metaschedule.tune_context import TuneContext

    func = te.create_prim_func(suite.ms_tensors(name))
    ctx = TuneContext(func, target=target, space_generator=PostOrderApply(), rand_state=seed)
    replay = TraceReplayer(ctx.mod, Postproc.create("llvm"))
    for index, space in enumerate(ctx.generate_design_space()):
        for k in range(samples):
            sch = replay(space.trace, seed + 7919 * k + index)
            if sch is not None:
                yield index, sch


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (the C compiler): unlike the
    wall time, it does not grow when other processes share the cores."""
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + child.ru_utime + child.ru_stime


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    from metaschedule.codegen import build
    from metaschedule.codegen.compiler import compiler_flags
    from metaschedule.target import Target

    target = Target(f"{args.target} -num-cores 2")
    names = [n for n in args.workloads.split(",") if n]
    unknown = [n for n in names if n not in suite.SUITE]
    if unknown:
        raise SystemExit(f"unknown suite operator(s) {unknown}; choose from {list(suite.SUITE)}")
    for line in common.machine_lines(common.machine_info()):
        print(line)
    print("compiler flags:", " ".join(compiler_flags(target)))
    rows, records = [], []
    with tempfile.TemporaryDirectory(prefix="ms-cold-build-") as tmp:
        for name in names:
            secs, cpus, sizes = [], [], []
            for index, sch in _candidates(name, target, args.samples, args.seed):
                cache = tempfile.mkdtemp(dir=tmp)  # empty: the compiler runs
                t0, c0 = time.perf_counter(), _cpu_seconds()
                lib = build(sch.mod, target, cache_dir=cache)
                secs.append(time.perf_counter() - t0)
                cpus.append(_cpu_seconds() - c0)
                sizes.append(len(lib.get_source()))
                records.append(
                    {
                        "op": name,
                        "space": index,
                        "build_s": secs[-1],
                        "cpu_s": cpus[-1],
                        "c_bytes": sizes[-1],
                    }
                )
                print(
                    f"  {name} space {index}: {secs[-1]:.2f} s ({cpus[-1]:.2f} s of CPU), "
                    f"{sizes[-1] / 1e3:.1f} KB of C",
                    flush=True,
                )
            rows.append(
                [
                    name,
                    str(len(secs)),
                    f"{max(sizes) / 1e3:.1f}",
                    f"{statistics.median(secs):.2f}",
                    f"{max(secs):.2f}",
                    f"{statistics.median(cpus):.2f}",
                    f"{max(cpus):.2f}",
                ]
            )
    load = os.getloadavg()[0]
    common.print_table(
        "Cold build of suite candidates (empty kernel cache)",
        ["op", "candidates", "max KB of C", "median s", "max s", "median CPU s", "max CPU s"],
        rows,
        [f"load average {load:.1f} on {os.cpu_count()} CPUs"],
        plain=args.plain,
    )
    path = common.write_json(
        "cold_build",
        {
            "target": str(target),
            "flags": compiler_flags(target),
            "load_average": load,
            "builds": records,
        },
        args.json,
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
