"""A switch of the C code generator on and off for the same schedules.

Samples schedules of our default design space for a suite or extra operator (or takes
the top records of a tuning database), builds each twice with a module-level switch of
``metaschedule.codegen.c_codegen`` (``AUTO_VECTORIZE``, ``VERSION_GUARDS``, ...; or
``MODULE.NAME`` of another codegen module) off and on, checks both builds compute the
same numbers, and times them in interleaved rounds (best of the rounds), one thread
unless ``--cores``::

    python benchmarks/codegen_ab.py dw2 --switch AUTO_VECTORIZE --samples 24
    python benchmarks/codegen_ab.py dep --switch AUTO_VECTORIZE --db W/dep/metaschedule
    python benchmarks/codegen_ab.py gconv --switch c_accumulate.JAM_SMALL_TILES

Only schedules whose C differs between the two builds are timed (``--all``: every one).
Prints a line per schedule and the geometric mean of off/on (above 1: the switch helps).
A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # the benchmarks' shared helpers, beside this file


def _schedules(args, func):
    """``(label, schedule)`` pairs: sampled points of the design space, or top records."""
    from metaschedule import tir
    from metaschedule.database import JSONDatabase

    if args.db:
        db = JSONDatabase(work_dir=args.db)
        records = db.get_top_k(db.get_all_tuning_records()[0].workload, args.samples)
        for i, rec in enumerate(records):
            sch = tir.Schedule(rec.workload.mod)
            rec.trace.apply_to_schedule(sch, remove_postproc=False)
            yield f"record {i}", sch
        return
    samples = common.sampled_schedules(func, args.seed)
    for i in range(args.samples):
        yield f"sample {i}", next(samples)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload", help="a suite or extra operator of tune_ops.py")
    p.add_argument(
        "--switch",
        required=True,
        help="a boolean of codegen.c_codegen (NAME) or of another codegen module (MODULE.NAME)",
    )
    p.add_argument("--samples", type=int, default=16, help="schedules (default 16)")
    p.add_argument("--db", default=None, help="a tuning folder: its top records instead")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--cores", type=int, default=1, help="threads of the kernels (default 1)")
    p.add_argument("--all", action="store_true", help="also time schedules whose C is equal")
    args = p.parse_args(argv)

    from tune_ops import parse_workload

    from metaschedule.codegen import build
    from metaschedule.runner.local_runner import host_measurement_lock
    from metaschedule.target import Target

    module_name, _, name = args.switch.rpartition(".")
    try:
        module = importlib.import_module(f"metaschedule.codegen.{module_name or 'c_codegen'}")
    except ImportError:
        p.error(f"no codegen module {module_name}")
    if not isinstance(getattr(module, name, None), bool):
        p.error(f"{module.__name__} has no boolean switch {name}")
    wl = parse_workload(args.workload)
    func = wl.ms_func()
    target = Target({**Target("llvm").as_json(), "num_cores": args.cores})
    inputs = wl.inputs()
    shape = np.asarray(wl.reference(inputs)).shape
    ratios = []
    for label, sch in _schedules(args, func):
        libs = {}
        for on in (False, True):
            setattr(module, name, on)
            libs[on] = build(sch.mod, target)
        setattr(module, name, True)
        if libs[False].get_source() == libs[True].get_source() and not args.all:
            continue
        outs = {}
        for on, lib in libs.items():
            outs[on] = np.zeros(shape, np.float32)
            lib(*lib.pack_weights(*inputs, outs[on])[:-1], outs[on])
        np.testing.assert_allclose(outs[True], outs[False], rtol=1e-4, atol=1e-4)
        best = {False: float("inf"), True: float("inf")}
        for _ in range(args.rounds):
            for on in (False, True):
                out = np.zeros(shape, np.float32)
                packed = libs[on].pack_weights(*inputs, out)[:-1]
                ev = libs[on].time_evaluator("main", number=5, repeat=10)
                with host_measurement_lock():
                    best[on] = min(best[on], min(ev(*packed, out).results))
        ratios.append(best[False] / best[True])
        print(
            f"{label}: off {best[False] * 1e6:9.1f} us, on {best[True] * 1e6:9.1f} us, "
            f"off/on {ratios[-1]:.2f}",
            flush=True,
        )
    if ratios:
        gm = float(np.exp(np.mean(np.log(ratios))))
        print(f"{len(ratios)} schedule(s) with different C: geometric mean off/on {gm:.3f}")
    else:
        print("no schedule's C changed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
