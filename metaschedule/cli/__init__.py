"""The ``metaschedule`` command (also ``python -m metaschedule``).

Subcommands (each has ``--help`` with examples):
    tune     tune a suite workload, a PrimFunc in a Python file, or an ONNX model
    show     the best record per workload of a work folder (trace, IR, C)
    report   an HTML page of plots of a (possibly running) tuning run
    compile  compile a whole model with a tuned database (needs ms.relax_integration)
    bench    time a tuned workload or model against numpy / onnxruntime
    db       merge, export, import and prune databases; add tuning runs to the corpus
    corpus   train the pre-trained cost model on a corpus of measured schedules
    demo     build, check and time a hand-scheduled matmul

Errors are one line on stderr (``--verbose`` adds the traceback); exit codes: 0 success,
1 failure, 2 a usage error, 130 interrupted. Environment variables are read here and
nowhere else in the package (besides ``CC`` and ``XDG_CACHE_HOME``, read by the compiler
and the caches).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from .. import __version__
from . import corpus, db, demo, model, report, show, tune
from .common import CLIError, Formatter, Parser

__all__ = ["CLIError", "build_parser", "main"]

EXAMPLES = """\
  metaschedule tune gmm:256 --trials 64 --work-dir runs/gmm
  metaschedule show runs/gmm --trace
  metaschedule report runs/gmm -o runs/gmm/report.html
  metaschedule bench gmm:256 --database runs/gmm
  metaschedule db export runs/gmm -o gmm.sqlite
"""


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print the traceback of an error",
    )
    parser = Parser(
        prog="metaschedule",
        description="Tune tensor programs and look at the results: a Python "
        "auto-tuner after TVM's MetaSchedule.",
        epilog="examples:\n" + EXAMPLES,
        formatter_class=Formatter,
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"metaschedule {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for module in (tune, show, report, model, db, corpus, demo):
        module.register(sub, [common])
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version, usage errors
        return int(exit_.code or 0) if not isinstance(exit_.code, str) else 2
    verbose = getattr(args, "verbose", False)
    prog = f"metaschedule {args.command}"
    try:
        return int(args.func(args) or 0)
    except CLIError as err:
        if verbose:
            traceback.print_exc()
        hint = f" (see '{prog} --help')" if err.usage else ""
        print(f"{prog}: error: {err}{hint}", file=sys.stderr)
        return 2 if err.usage else 1
    except BrokenPipeError:  # e.g. piped into `head`: not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - the one place that turns errors into a line
        if verbose:
            traceback.print_exc()
        first = (str(err).strip().splitlines() or [""])[0]
        print(
            f"{prog}: error: {type(err).__name__}: {first} (run again with --verbose for "
            "the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
