"""Kill the tuner at random moments, resume, and count what was lost.

    python benchmarks/kill_campaign.py --kills 12 --signal KILL --trials 128
    python benchmarks/kill_campaign.py --kills 8 --signal INT --trials 128

Each round starts ``tests/faults/tuning_child.py`` on the same work_dir, sends the
signal at a random moment (after 0-4 new records, plus a random 0-0.5 s: mid-build, mid-
measurement, mid-commit or mid-search), then checks the JSON database: records the tuner
had committed but that are missing (lost), schedules stored twice (duplicates), records
whose trace does not replay onto their workload, lines the database had to skip (torn by
the kill), build folders left in the child's private TMPDIR, and worker processes that
outlived it. After the kills, one more run must finish the budget. Prints a table and
writes JSON (``--out``). The goal is 0 in every column but "torn lines" (a kill in the
middle of an append leaves a torn line, which the database skips and repairs).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "faults"))

from check_database import check_work_dir  # noqa: E402 (found through sys.path above)

CHILD = os.path.join(ROOT, "tests", "faults", "tuning_child.py")


def orphan_workers(marker: str) -> list[int]:
    """Live worker processes whose environment holds ``marker`` (the child's TMPDIR)."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if b"_worker_main" not in f.read():
                    continue
            with open(f"/proc/{name}/environ", "rb") as f:
                if marker.encode() in f.read():
                    pids.append(int(name))
        except OSError:
            continue
    return pids


def build_dirs(tmp: str) -> list[str]:
    return [d for d in os.listdir(tmp) if d.startswith("metaschedule-build-")]


def start_child(work_dir: str, tmp: str, trials: int) -> subprocess.Popen:
    env = dict(
        os.environ,
        TMPDIR=tmp,
        PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p),
    )
    return subprocess.Popen(
        [sys.executable, CHILD, work_dir, str(trials)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def committed(work_dir: str) -> int:
    try:
        with open(os.path.join(work_dir, "committed.log")) as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def one_round(
    work_dir: str, tmp: str, trials: int, sig: int, rng: random.Random, max_delay: float
) -> dict:
    """Start the tuner; once it has committed a random number (0-4) of new records,
    wait a random 0-``max_delay`` s more and send ``sig``."""
    proc = start_child(work_dir, tmp, trials)
    target = committed(work_dir) + rng.randint(0, 4)
    delay = rng.uniform(0.0, max_delay)
    deadline = time.monotonic() + 600
    while proc.poll() is None and committed(work_dir) < target and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        proc.wait(timeout=delay)
        finished_first = True
        exit_sec = 0.0
    except subprocess.TimeoutExpired:
        finished_first = False
        proc.send_signal(sig)
        sent = time.monotonic()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        exit_sec = time.monotonic() - sent
    out, err = proc.communicate()
    for _ in range(40):  # let the workers' death signal land, compilers finish
        if not orphan_workers(tmp):
            break
        time.sleep(0.05)
    row = check_work_dir(work_dir)
    row.update(
        records_before_signal=target,
        delay=round(delay, 2),
        finished_before_signal=finished_first,
        exit_sec=round(exit_sec, 2),
        returncode=proc.returncode,
        build_dirs=len(build_dirs(tmp)),
        orphan_workers=len(orphan_workers(tmp)),
        tuning_started="TUNING-START" in out,  # else the signal hit Python's start-up
        resume_hint="same work_dir" in err,
        stderr_tail=err[-400:] if "same work_dir" not in err else "",
        raw_traceback_lines=sum(
            "metaschedule/" in line and line.strip().startswith("File") for line in err.splitlines()
        ),
    )
    return row


def summarize(rounds: list[dict], final: dict, signal_name: str, budget: int) -> dict:
    """The campaign's table: every count is the worst over the rounds."""
    signalled = [r for r in rounds if not r["finished_before_signal"]]
    in_tuner = [r for r in signalled if r.get("tuning_started", True)]
    return {
        "signal": signal_name,
        "signals sent": len(signalled),
        "... of which during Python's start-up (before tune_tir)": len(signalled) - len(in_tuner),
        "records lost": max((r["lost"] for r in rounds), default=0) + final["lost"],
        "duplicates": max((r["duplicates"] for r in rounds), default=0) + final["duplicates"],
        "records that fail to replay": max((r["replay_failures"] for r in rounds), default=0)
        + final["replay_failures"],
        "torn lines skipped": max((r["warnings"] for r in rounds), default=0),
        # a kill -9 leaves the folders of the candidates in flight; the next run removes them
        "build folders after a signal (max)": max((r["build_dirs"] for r in rounds), default=0),
        "build folders after the final run": final["build_dirs"],
        "workers outliving the tuner": max((r["orphan_workers"] for r in rounds), default=0),
        "seconds from signal to exit (max)": max((r["exit_sec"] for r in in_tuner), default=0),
        "resume line printed": f"{sum(r['resume_hint'] for r in in_tuner)}/{len(in_tuner)}"
        if signal_name == "SIGINT"
        else "n/a",
        "records at the end / budget": f"{final.get('trials', final['records'])}/{budget}",
        "final run finished": final["done"],
    }


def print_table(summary: dict) -> None:
    width = max(len(k) for k in summary)
    print("\n".join(f"{k.ljust(width)} | {v}" for k, v in summary.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--signal", choices=["KILL", "INT"], default="KILL")
    parser.add_argument("--trials", type=int, default=128)
    parser.add_argument(
        "--max-delay",
        type=float,
        default=0.5,
        help="seconds after the random record count before the signal",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="JSON file for the results")
    parser.add_argument("--report", default=None, help="print the table of a saved JSON")
    args = parser.parse_args()
    if args.report:
        with open(args.report) as f:
            saved = json.load(f)
        print_table(
            summarize(
                saved["rounds"],
                saved["final"],
                f"SIG{saved['args']['signal']}",
                saved["args"]["trials"],
            )
        )
        return
    rng = random.Random(args.seed)
    sig = getattr(signal, f"SIG{args.signal}")
    work_dir = tempfile.mkdtemp(prefix="ms-kill-campaign-")
    tmp = tempfile.mkdtemp(prefix="ms-kill-tmp-")
    rounds = []
    try:
        while sum(not r["finished_before_signal"] for r in rounds) < args.kills:
            row = one_round(work_dir, tmp, args.trials, sig, rng, args.max_delay)
            rounds.append(row)
            print(f"round {len(rounds)}: {row}", flush=True)
            if row["finished_before_signal"]:
                break  # the budget is spent: no more moments to interrupt
        final_proc = start_child(work_dir, tmp, args.trials)
        out, _ = final_proc.communicate(timeout=900)
        final = check_work_dir(work_dir)
        final.update(
            returncode=final_proc.returncode,
            done="TUNING-DONE" in out,
            build_dirs=len(build_dirs(tmp)),
        )
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    summary = summarize(rounds, final, f"SIG{args.signal}", args.trials)
    print_table(summary)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(
                {"summary": summary, "rounds": rounds, "final": final, "args": vars(args)},
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
