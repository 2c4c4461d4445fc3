"""C compiler flags compared on the same schedules: does a flag set make our kernels faster?

Samples random points of our default llvm design space for suite operators, builds each
schedule once per flag set (the default flags of ``metaschedule.codegen.compiler`` plus
the extra flags of a variant), checks every build against numpy and times the builds
interleaved, one thread each. Prints, per operator and variant, the geometric mean of
the speed-up over the default flags, its worst and best case, and the speed-up of the
best schedule (what tuning would find); writes the rows as JSON::

    python benchmarks/compiler_flags.py --workloads dep c2d --samples 12
    python benchmarks/compiler_flags.py --variant "-funroll-loops" --variant ""

Ratios come from one run with interleaved timings, so a busy machine blurs them less
than absolute numbers; still, run it on a quiet machine before changing the defaults.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # the benchmarks' shared helpers, beside this file

DEFAULT_VARIANTS = (
    "--param max-completely-peel-times=64 --param max-completely-peeled-insns=1000",
    "-fno-tree-vectorize",
    "-funroll-loops",
)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", nargs="+", default=["dep", "c2d", "tbg", "dns", "sfm", "pool"])
    p.add_argument("--samples", type=int, default=8, help="schedules per workload (default 8)")
    p.add_argument("--variant", action="append", help="extra flags (repeatable)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    return p.parse_args(argv)


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    import importlib

    import numpy as np

    from metaschedule.codegen.compiler import compiler_flags
    from metaschedule.flop_count import estimate_flops
    from metaschedule.target import Target
    from metaschedule.workloads import get_workload

    build_mod = importlib.import_module("metaschedule.codegen.build")  # the module, not build()
    variants = [""] + [v for v in (args.variant or DEFAULT_VARIANTS) if v]
    target = Target({**Target("cpu").as_json(), "num_cores": 1})
    rows: list[dict] = []
    print(f"speed-up over the default flags, {args.samples} schedules per workload, 1 thread")
    for name in args.workloads:
        wl = get_workload(name)
        func, inputs = wl.func(), wl.inputs()
        ref = wl.reference(*inputs)
        flops = estimate_flops(func)
        samples = common.sampled_schedules(func, args.seed)
        secs: list[list[float]] = []  # per schedule, per variant
        builds: list[list[float]] = []  # per schedule, per variant: cold build seconds
        taken = 0
        while taken < args.samples:
            sch = next(samples)
            taken += 1
            libs = []
            for extra in variants:
                flags = compiler_flags(target) + shlex.split(extra)
                build_mod.compiler_flags = lambda _t, f=flags: f
                t0 = time.perf_counter()
                lib = build_mod.build(sch.mod, target)
                build_s = time.perf_counter() - t0
                out = np.zeros(wl.output_shape, np.float32)
                packed = lib.pack_weights(*inputs, out)[:-1]  # RewriteLayout's weights
                lib(*packed, out)
                if not np.allclose(out, ref, atol=1e-3, rtol=1e-3):
                    print(f"{name}: variant {extra!r} computes a wrong result", file=sys.stderr)
                    return 1
                libs.append((lib, packed, out, build_s))
            best = [float("inf")] * len(libs)
            for _ in range(args.rounds):
                for i, (lib, packed, out, _) in enumerate(libs):
                    ev = lib.time_evaluator("main", number=3, repeat=1)
                    best[i] = min(best[i], min(ev(*packed, out).results))
            secs.append(best)
            builds.append([lib[-1] for lib in libs])
            rows.append(
                {
                    "workload": name,
                    "trace": str(sch.trace),
                    "gflops": [flops / s / 1e9 for s in best],
                    "build_s": [lib[-1] for lib in libs],
                }
            )
        print(
            f"{name}: default best {flops / min(s[0] for s in secs) / 1e9:.1f} GFLOPS, "
            f"cold build max {max(b[0] for b in builds):.2f} s"
        )
        for j, extra in enumerate(variants[1:], start=1):
            ratios = [s[0] / s[j] for s in secs]
            best_ratio = min(s[0] for s in secs) / min(s[j] for s in secs)
            print(
                f"  {extra or '(default)':<72} geomean {_geomean(ratios):5.2f} "
                f"min {min(ratios):5.2f} max {max(ratios):5.2f} best-of {best_ratio:5.2f} "
                f"build max {max(b[j] for b in builds):.2f} s"
            )
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "compiler_flags.json")
    with open(path, "w") as f:
        json.dump({"variants": variants, "rows": rows}, f, indent=1)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
