"""``metaschedule show``: the best record of each workload of a work folder."""

from __future__ import annotations

import argparse
import datetime
import math
import os

from ..codegen.c_codegen import codegen_c
from ..report.data import load_run
from ..target import Target
from ..tir.function import IRModule
from ..tir.transform import lower
from .common import SQLITE_SUFFIXES, CLIError, add_subcommand, non_negative_int

EXAMPLES = """\
  metaschedule show runs/gmm                 # one line per workload
  metaschedule show runs/gmm --trace         # the best schedule, as Python
  metaschedule show runs/gmm --script        # the scheduled TensorIR
  metaschedule show runs/gmm --c -w 0        # the generated C of workload 0
"""


def register(sub, parents) -> None:
    p = add_subcommand(
        sub,
        "show",
        help="the best record per workload of a work folder",
        description="Print, per workload of a work folder, the best record: "
        "latency, GFLOPS, trials and when it was measured.",
        examples=EXAMPLES,
        parents=parents,
    )
    p.add_argument(
        "work_dir",
        metavar="DIR",
        help="the --work-dir of a tuning run (or a .sqlite database file)",
    )
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--trace", action="store_true", help="also print the best schedule's trace (Python)"
    )
    what.add_argument(
        "--script",
        action="store_true",
        help="also print the best schedule's scheduled IR (TensorIR script)",
    )
    what.add_argument(
        "--c", action="store_true", help="also print the C code generated for the best schedule"
    )
    p.add_argument(
        "-w",
        "--workload",
        type=non_negative_int,
        default=None,
        metavar="I",
        help="only workload I (the # column); default: all",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not os.path.isdir(args.work_dir) and not (
        os.path.isfile(args.work_dir) and args.work_dir.lower().endswith(SQLITE_SUFFIXES)
    ):
        raise CLIError(
            f"{args.work_dir}: no such folder; give the --work-dir of a tuning run "
            "or a SQLite database file"
        )
    data = load_run(args.work_dir)
    if not data.workloads:
        raise CLIError(f"{args.work_dir}: no tuning records (is it the --work-dir of a run?)")
    selected = list(enumerate(data.workloads))
    if args.workload is not None:
        if args.workload >= len(selected):
            raise CLIError(
                f"--workload {args.workload}: {args.work_dir} has "
                f"{len(selected)} workload(s), numbered from 0",
                usage=True,
            )
        selected = [selected[args.workload]]
    print(table(data.workloads, args.work_dir))
    for i, wl in selected:
        if not (args.trace or args.script or args.c):
            break
        print(f"\n# workload {i}: {wl.name}")
        record = wl.best_record
        if record is None:
            print("# no valid measurement")
            continue
        if args.trace:
            print(str(record.trace))
        else:
            sch = record.as_measure_candidate().sch
            print(sch.mod.script() if args.script else _c_source(sch.mod, record.target))
    return 0


def table(workloads, work_dir: str) -> str:
    """The per-workload table."""
    rows = [("#", "workload", "trials", "valid", "best (us)", "GFLOPS", "measured at")]
    for i, wl in enumerate(workloads):
        valid = sum(1 for s in wl.latencies if math.isfinite(s))
        best = wl.best_latency
        when = wl.best_time()
        rows.append(
            (
                str(i),
                wl.name,
                str(wl.trials),
                str(valid),
                f"{best * 1e6:.2f}" if math.isfinite(best) else "-",
                f"{wl.best_gflops:.2f}" if math.isfinite(best) else "-",
                datetime.datetime.fromtimestamp(when).strftime("%Y-%m-%d %H:%M:%S")
                if when
                else "-",
            )
        )
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    again = sum(w.remeasurements for w in workloads)
    header = (
        f"{work_dir}: {len(workloads)} workload(s), {sum(w.trials for w in workloads)} trial(s)"
        + (f", {again} re-measurement(s) by final selections" if again else "")
    )
    lines = [header]
    for n, row in enumerate(rows):
        cells = [v.ljust(w) if c == 1 else v.rjust(w) for c, (v, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _c_source(mod, target) -> str:
    target = target if target is not None else Target("cpu")
    return codegen_c(IRModule({n: lower(f) for n, f in mod.items()}), target).code
