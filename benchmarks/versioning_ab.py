"""Loop versioning on and off (``codegen/c_versioning.py``) for the same schedules.

The top records of a tuning database (``tune_ops.py --work-dir DIR`` keeps them in
``DIR/<workload>/metaschedule``) are built twice, with ``c_codegen.VERSION_GUARDS`` on
and off, checked against each other, and timed in interleaved rounds under the host
measurement lock (best of the rounds)::

    python benchmarks/versioning_ab.py /tmp/work/apool/metaschedule --top 8 --rounds 6

``--reverse`` times the versioned build first in each round (the order moved some
kernels by 10-30% on a loaded machine: compare both). ``--cores 1`` builds single-thread
kernels, less sensitive to other load. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from metaschedule import tir
from metaschedule.codegen import build, c_codegen
from metaschedule.codegen.c_versioning import version_guards
from metaschedule.database import JSONDatabase
from metaschedule.runner.local_runner import host_measurement_lock
from metaschedule.runtime.module import Module
from metaschedule.target import Target
from metaschedule.tir.stmt import For, IfThenElse
from metaschedule.tir.transform import lower


def _versioned(stmt) -> bool:
    if isinstance(stmt, For):
        if isinstance(stmt.body, IfThenElse) and stmt.body.else_case is not None:
            return True
        return _versioned(stmt.body)
    for name in ("body", "then_case", "else_case"):
        child = getattr(stmt, name, None)
        if child is not None and _versioned(child):
            return True
    return any(_versioned(c) for c in getattr(stmt, "seq", ()))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", help="folder with database_workload.json, database_tuning_record.json")
    p.add_argument("--top", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--cores", type=int, default=0, help="threads of the kernels (0: target's)")
    p.add_argument("--reverse", action="store_true", help="time the versioned build first")
    p.add_argument("--all", action="store_true", help="also records without a versioned body")
    args = p.parse_args(argv)
    db = JSONDatabase(
        path_workload=os.path.join(args.dir, "database_workload.json"),
        path_tuning_record=os.path.join(args.dir, "database_tuning_record.json"),
    )
    records = db.get_top_k(db.get_all_tuning_records()[0].workload, args.top)
    target = Target({"kind": "cpu", "num_cores": args.cores}) if args.cores else Target("llvm")
    ratios = []
    for i, rec in enumerate(records):
        sch = tir.Schedule(rec.workload.mod)
        rec.trace.apply_to_schedule(sch, remove_postproc=False)
        versioned = _versioned(version_guards(lower(sch.mod["main"]).body))
        if not (versioned or args.all):
            continue
        libs: dict[bool, Module] = {}
        for on in (False, True):
            c_codegen.VERSION_GUARDS = on
            lib = build(sch.mod, target)
            assert isinstance(lib, Module)
            libs[on] = lib
        c_codegen.VERSION_GUARDS = True
        rng = np.random.default_rng(0)
        params = rec.workload.mod["main"].params
        inputs = [rng.standard_normal(b.static_shape()).astype(b.dtype) for b in params]
        outs = {}
        for on, lib in libs.items():
            packed = lib.pack_weights(*[x.copy() for x in inputs])
            lib(*packed)
            outs[on] = packed[-1]
        np.testing.assert_allclose(outs[True], outs[False], rtol=1e-4, atol=1e-4)
        best = {False: float("inf"), True: float("inf")}
        order = [True, False] if args.reverse else [False, True]
        for _ in range(args.rounds):
            for on in order:
                packed = libs[on].pack_weights(*[x.copy() for x in inputs])
                ev = libs[on].time_evaluator("main", number=10, repeat=20)
                with host_measurement_lock():
                    best[on] = min(best[on], min(ev(*packed).results))
        ratio = best[False] / best[True]
        if versioned:
            ratios.append(ratio)
        print(
            f"#{i}: off {best[False] * 1e6:8.1f} us, on {best[True] * 1e6:8.1f} us, "
            f"off/on {ratio:.2f}, versioned: {versioned}",
            flush=True,
        )
    if ratios:
        gm = float(np.exp(np.mean(np.log(ratios))))
        print(f"{len(ratios)} versioned record(s): geometric mean off/on {gm:.3f}")


if __name__ == "__main__":
    main()
