"""Re-time the final choices of an earlier ``tune_ops.py --work-dir W`` run, quietly.

A tuning run on a shared machine times its results while other work competes (and
picks a passive OpenMP wait policy for ours when the machine is busy, while TVM's pool
spins), so its final table can say more about the load than about the kernels. This
script takes the choices of that run as they are, ours from its database (rebuilt with
``compile_tir``) and TVM's exported library (``W/<op>/tvm/tvm_best.so``), checks ours
against numpy, and times both in ``--rounds`` interleaved rounds, with one OpenMP policy
for ours chosen up front (``GOMP_SPINCOUNT=10000`` unless the environment sets a
policy) and ``TVM_NUM_THREADS`` = the cores for TVM. For the quietest figures run it at
real-time priority, which puts it ahead of every ordinary process::

    chrt -f 5 python benchmarks/retime.py --work-dir W --workloads bmm,lnorm,mmodd

Prints a table (GFLOPS and microseconds per call, the best over the rounds with the
median of the rounds' bests) and writes ``benchmarks/results/retime.json``. A benchmark,
not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # the benchmarks' shared helpers, beside this file
from tune_ops import (
    check_close,
    interleaved,
    module_timer,
    parse_workload,
    reduction_length,
    tvm_timer,
)

#: ours spins briefly between calls, as the runner's workers do on a quiet machine
QUIET_OPENMP = {"GOMP_SPINCOUNT": "10000"}


def our_timer(wl, work_dir: str, args, expected, target):
    """A timer of the best record of ``work_dir``'s database, rebuilt and checked."""
    import numpy as np

    import metaschedule as ms
    from metaschedule.codegen import build
    from metaschedule.runtime import aligned_copy, is_aligned

    func = wl.ms_func()
    db = ms.database.JSONDatabase(work_dir=work_dir)
    sch = ms.tir_integration.compile_tir(db, func, target)
    if sch is None:
        raise RuntimeError(f"no valid record in {work_dir}")
    lib = build(sch.mod, target)
    out = aligned_copy(np.zeros(expected.shape, np.float32))
    packed = [a if is_aligned(a) else aligned_copy(a) for a in lib.pack_weights(*args, out)[:-1]]
    lib(*packed, out)
    error = check_close("metaschedule", out, expected, reduction_length(wl))
    return module_timer(lib, packed, out), error


def retime(name: str, work_dir: str, rounds: int, target) -> dict[str, Any]:
    """Both contenders of one workload, interleaved; what ``tune_ops`` reports per op."""
    import metaschedule as ms

    wl = parse_workload(name)
    args = wl.inputs()
    expected = wl.reference(args)
    flops = ms.flop_count.estimate_flops(wl.ms_func())
    timers, result = {}, {"workload": name, "flops": flops}
    ours_dir = os.path.join(work_dir, name, "metaschedule")
    timers["metaschedule"], result["max_abs_error"] = our_timer(
        wl, ours_dir, args, expected, target
    )
    tvm_json = os.path.join(work_dir, name, "tvm", "tvm_result.json")
    if os.path.exists(tvm_json):
        with open(tvm_json) as f:
            tvm = json.load(f)
        if tvm.get("library") and os.path.exists(tvm["library"]):
            timers["tvm"] = tvm_timer(
                tvm["library"], args, tuple(expected.shape), tvm.get("arg_shapes")
            )
    result["timings"] = interleaved(timers, rounds)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work-dir", required=True, help="the --work-dir of a tune_ops.py run")
    p.add_argument("--workloads", required=True, help="comma-separated workloads of that run")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument("--plain", action="store_true", help="plain-text table (no rich)")
    p.add_argument("--json", default=None, help="output path (default benchmarks/results/)")
    p.add_argument(
        "--target",
        default="llvm",
        help='the run\'s --target ("llvm -mcpu=haswell": its AVX2 kernels rebuilt as AVX2)',
    )
    args = p.parse_args(argv)

    if not any(k in os.environ for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")):
        os.environ.update(QUIET_OPENMP)  # before libgomp loads with the first kernel
    cores = os.cpu_count() or 1
    os.environ.setdefault("TVM_NUM_THREADS", str(cores))  # before TVM's pool starts
    import metaschedule as ms

    target = ms.Target(args.target)
    results, rows = [], []
    for name in [w for w in args.workloads.split(",") if w]:
        print(f"== {name}", flush=True)
        try:
            res = retime(name, args.work_dir, args.rounds, target)
        except Exception as err:  # noqa: BLE001 - reported, the others go on
            print(f"   {name}: {type(err).__name__}: {err}")
            results.append({"workload": name, "error": f"{type(err).__name__}: {err}"})
            continue
        results.append(res)
        t = res["timings"]
        ours = min(t["metaschedule"]["secs"]) if t["metaschedule"]["secs"] else None
        theirs = min(t["tvm"]["secs"]) if "tvm" in t and t["tvm"]["secs"] else None

        def cell(secs, entry, flops=res["flops"]):
            if secs is None:
                return "-"
            med = entry.get("median_round_best", secs)
            return f"{flops / secs / 1e9:.1f} ({flops / med / 1e9:.1f})"

        loads = [x for e in t.values() for x in e.get("foreign_load", [])]
        rows.append(
            [
                name,
                cell(ours, t["metaschedule"]),
                f"{ours * 1e6:.1f}" if ours else "-",
                cell(theirs, t.get("tvm", {})),
                f"{theirs * 1e6:.1f}" if theirs else "-",
                f"{theirs / ours:.2f}x" if ours and theirs else "-",
                f"{100 * max(loads):.0f}%" if loads else "-",
            ]
        )
    common.print_table(
        "Final choices re-timed, GFLOPS best (median of the rounds' bests)",
        ["workload", "ours", "ours us", "TVM", "TVM us", "ours / TVM", "other load (max)"],
        rows,
        plain=args.plain,
    )
    fifo = os.sched_getscheduler(0) == os.SCHED_FIFO
    print(
        f"OpenMP of ours: {os.environ.get('OMP_WAIT_POLICY', 'default')} "
        f"(GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT', 'unset')}); "
        f"TVM_NUM_THREADS={os.environ['TVM_NUM_THREADS']}; "
        f"scheduling policy: {'SCHED_FIFO' if fifo else 'normal'}"
    )
    path = common.write_json(
        "retime",
        {
            "command": " ".join(sys.argv),
            "machine": common.machine_info(),
            "omp": {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")},
            "sched_fifo": fifo,
            "results": results,
        },
        args.json,
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
