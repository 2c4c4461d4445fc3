"""Fuzz campaign: the fuzzer's long mode over N random te programs, with figures.

Each program (``metaschedule.testing.fuzz.random_program``, seeded) runs through the
default ``llvm`` design space; schedules are sampled by replaying the design-space
traces with fresh decisions and post-processing them. Every schedule must either be
rejected by a postprocessor or verify and compute the numpy result (interpreted; the
first ``--builds`` of each program also compiled to C and run). A program that takes
longer than ``--timeout`` seconds counts as a hang.

    python benchmarks/fuzz_campaign.py --programs 500 --schedules 6 --builds 1

Prints programs and schedules tried, tuner deaths (an exception escaping), wrong
results, hangs and the distinct failures found (goal: 0 deaths, 0 wrong results), and
writes ``benchmarks/results/fuzz_campaign.json``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import warnings

from common import print_table, write_json

from metaschedule.testing.fuzz import Failure, FuzzStats, NumpyDraw, check_program, random_program


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=200, help="random programs to try")
    ap.add_argument("--schedules", type=int, default=6, help="schedules sampled per program")
    ap.add_argument("--builds", type=int, default=1, help="schedules compiled per program")
    ap.add_argument("--stages", type=int, default=4, help="at most this many stages")
    ap.add_argument("--seed", type=int, default=0, help="the first program's seed")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per program")
    ap.add_argument(
        "--debug-builds",
        action="store_true",
        help="also build each compiled schedule in the bounds-checked debug mode",
    )
    ap.add_argument("--out", default=None, help="JSON path (default benchmarks/results/)")
    args = ap.parse_args(argv)

    warnings.simplefilter("ignore")
    stats = FuzzStats()
    hangs = 0
    start = time.time()
    signal.signal(signal.SIGALRM, _alarm)
    for k in range(args.programs):
        seed = args.seed + k
        program = random_program(NumpyDraw(seed), max_stages=args.stages)
        before = len(stats.failures)
        signal.setitimer(signal.ITIMER_REAL, args.timeout)
        try:
            check_program(
                program,
                stats,
                num_schedules=args.schedules,
                num_builds=args.builds,
                seed=seed,
                debug_builds=args.debug_builds,
            )
        except _Hang:
            hangs += 1
            stats.failures.append(
                Failure("hang", "program", program.describe(), f"over {args.timeout} s")
            )
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for f in stats.failures[before:]:
            print(f"seed {seed}: {f.signature()}\n  {f.program}", file=sys.stderr)
        if (k + 1) % 50 == 0:
            print(
                f"... {k + 1} programs, {len(stats.failures)} failures, "
                f"{time.time() - start:.0f} s",
                file=sys.stderr,
            )
    wall = time.time() - start

    distinct = sorted({f.signature() for f in stats.failures})
    rejected = sum(stats.rejected.values())
    rows = [
        ["programs tried", stats.programs],
        ["design spaces", stats.design_spaces],
        ["schedules sampled", stats.schedules],
        ["mutants (evolutionary-search mutations)", stats.mutants],
        ["rejected by a postprocessor", rejected],
        ["schedules interpreted and checked", stats.interpreted],
        ["schedules compiled and checked", stats.built],
        ["tuner deaths (goal 0)", stats.deaths],
        ["wrong results (goal 0)", stats.wrong_results],
        ["hangs (goal 0)", hangs],
        ["distinct failures", len(distinct)],
        ["wall time (s)", round(wall, 1)],
    ]
    print_table(
        f"Fuzz campaign: seeds {args.seed}..{args.seed + args.programs - 1}",
        ["what", "count"],
        rows,
        notes=[f"rejections: {dict(stats.rejected)}" if rejected else "no rejections", *distinct],
        plain=True,
    )
    payload = {"args": vars(args), "hangs": hangs, "wall_s": wall, **stats.as_json()}
    path = write_json("fuzz_campaign", payload, args.out)
    print(f"wrote {path}")
    return 0 if not stats.failures else 1


if __name__ == "__main__":
    sys.exit(main())
