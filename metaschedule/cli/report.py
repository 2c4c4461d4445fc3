"""``metaschedule report``: an HTML page of plots of a tuning run."""

from __future__ import annotations

import argparse
import os

from ..report.html import write_report
from .common import CLIError, add_subcommand

EXAMPLES = """\
  metaschedule report runs/gmm -o runs/gmm/report.html
  metaschedule report runs/model -o /tmp/model.html     # also while it is still tuning

The page is self-contained (plots embedded); the PNG files are written beside it.
Per workload: the tuning curve (best GFLOPS by trials and by wall time), the spread of
the measured candidates, the cost model's predictions against the measurements; for the
run: where the time went (Profiler) and how the task scheduler shared the trials.
"""


def register(sub, parents) -> None:
    p = add_subcommand(
        sub,
        "report",
        help="an HTML report with plots of a tuning run",
        description="Write one self-contained HTML page of plots of a work "
        "folder (a finished run, or one still in progress).",
        examples=EXAMPLES,
        parents=parents,
    )
    p.add_argument("work_dir", metavar="DIR", help="the --work-dir of a tuning run")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        default=None,
        help="the HTML file to write (default: DIR/report.html)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not os.path.isdir(args.work_dir):
        raise CLIError(f"{args.work_dir}: no such folder; give the --work-dir of a tuning run")
    output = args.output or os.path.join(args.work_dir, "report.html")
    if not output.lower().endswith((".html", ".htm")):
        raise CLIError(
            f"-o {output}: the report is an HTML file; give a name ending in .html", usage=True
        )
    try:
        pngs = write_report(
            args.work_dir, output, command=f"metaschedule report {args.work_dir} -o {output}"
        )
    except ImportError as err:
        raise CLIError(str(err)) from None
    print(f"Wrote {output} ({len(pngs)} plot(s); PNG files beside it)")
    return 0
