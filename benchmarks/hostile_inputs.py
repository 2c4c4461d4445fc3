"""Security campaign: every trust-boundary probe of issue 33, each in a process of its own.

    python benchmarks/hostile_inputs.py            # every probe, the package's bounds at 20 s
    python benchmarks/hostile_inputs.py --short    # 4 s bounds, the slow probes left out (CI)
    python benchmarks/hostile_inputs.py --probe "hung compiler" --probe "nesting bomb"
    python benchmarks/hostile_inputs.py --short --jobs 2   # two probes at a time (the test)

The probes (:mod:`metaschedule.testing.hostile`): a database whose names carry C code, a
database replayed on the caller's module, modules planted in the current folder of the
workers, a library planted in the kernel cache, the measurement lock held by another
process, ``db prune`` under a live tuner, compression and nesting bombs, a full disk
(``RLIMIT_FSIZE``), a hung C compiler (``$CC``), a frozen Dask fleet worker (when
``distributed`` is installed), a plain-TCP fleet address, malformed and 3000-node ONNX
models. Each runs in a fresh ``python -P`` with a private folder, kernel cache,
``XDG_RUNTIME_DIR`` and ``TMPDIR``, and a wall-clock limit. A probe passes when it ends in
the clear error or warning it expects within that limit, its marker file (what an exploit
would create) does not exist, no record was lost, and no process it started outlives it
(processes are found by a token in their environment).

Prints a table (probe, outcome, seconds, verdict) and writes
``benchmarks/results/hostile_inputs.json`` (``--out``). Exits 1 when a probe failed.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from common import print_table, write_json

from metaschedule.testing.hostile import PROBES, SLOW_PROBES

#: seconds a probe's process may take beyond 3 x the package's bound it is given
WALL_SLACK_SEC = 60.0
#: seconds the processes a probe started get to exit after it
LINGER_SEC = 5.0


def _with_token(token: str) -> list[int]:
    """Live processes whose environment holds ``token`` (a probe and what it started)."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if token.encode() not in f.read():
                    continue
            with open(f"/proc/{name}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue  # exited, its parent has not reaped it yet
        except OSError:
            continue
        pids.append(int(name))
    return pids


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _environment(folder: str, token: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MS_RPC_TLS_")}
    for sub in ("xdg", "run", "tmp"):
        os.makedirs(os.path.join(folder, sub), mode=0o700)
    env.update(
        XDG_CACHE_HOME=os.path.join(folder, "xdg"),
        XDG_RUNTIME_DIR=os.path.join(folder, "run"),
        TMPDIR=os.path.join(folder, "tmp"),
        MS_HOSTILE_PROBE=token,
    )
    return env


def run_one(name: str, deadline: float) -> dict:
    """Run probe ``name`` in a child process; its row of the table."""
    folder = tempfile.mkdtemp(prefix="ms-hostile-")
    marker = os.path.join(folder, "EXPLOITED")
    token = f"ms-hostile-{secrets.token_hex(8)}"
    work = os.path.join(folder, "probe")
    os.makedirs(work)
    cmd = [sys.executable, "-P", "-m", "metaschedule.testing.hostile", name, work, marker]
    limit = 3 * deadline + WALL_SLACK_SEC
    start = time.monotonic()
    child = subprocess.Popen(
        [*cmd, str(deadline)],
        cwd=work,
        env=_environment(folder, token),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = child.communicate(timeout=limit)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
        hung = True
    seconds = time.monotonic() - start
    left = _with_token(token)
    waited = time.monotonic() + LINGER_SEC
    while left and time.monotonic() < waited:
        time.sleep(0.1)
        left = _with_token(token)
    _kill(left)
    result = next(
        (line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("PROBE-RESULT ")),
        None,
    )
    row = json.loads(result) if result else {"outcome": None, "passed": False}
    if row["outcome"] is None:
        tail = (err.strip().splitlines() or [f"exit code {child.returncode}"])[-1]
        row["outcome"] = f"no result: {tail[:100]}"
    problems = []
    if hung:
        problems.append(f"still running after {limit:g} s (killed)")
    if os.path.exists(marker):
        problems.append("EXPLOITED: the marker file exists")
    if left:
        problems.append(f"{len(left)} process(es) left behind (killed)")
    if child.returncode not in (0, None) and not hung:
        problems.append(f"exit code {child.returncode}")
    passed = bool(row["passed"]) and not problems
    shutil.rmtree(folder, ignore_errors=True)
    return {
        "probe": name,
        "outcome": "; ".join([row["outcome"], *problems]),
        "seconds": round(seconds, 2),
        "passed": passed,
        "skipped": row["outcome"].startswith("skipped"),
        "marker_created": "EXPLOITED: the marker file exists" in problems,
        "processes_left": len(left),
        "hung": hung,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--short", action="store_true", help="small bounds, without the slow probes (CI)"
    )
    ap.add_argument(
        "--deadline",
        type=float,
        default=None,
        help="seconds for the package's own bounds in a probe (default 20, --short 4)",
    )
    ap.add_argument(
        "--probe", action="append", choices=sorted(PROBES), help="run only this probe (repeat)"
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="probes run at a time (default 1); each keeps its own process, folder and token, "
        "so only the wall time changes",
    )
    ap.add_argument("--out", default=None, help="JSON path (default benchmarks/results/)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    deadline = args.deadline or (4.0 if args.short else 20.0)
    names = args.probe or [n for n in PROBES if not (args.short and n in SLOW_PROBES)]

    def one(name: str) -> dict:
        row = run_one(name, deadline)
        print(f"{name}: {'pass' if row['passed'] else 'FAIL'}", file=sys.stderr, flush=True)
        return row

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        rows = list(pool.map(one, names))  # in the order of the names
    verdict = {True: "pass", False: "FAIL"}
    print_table(
        f"Hostile inputs ({'short' if args.short else 'full'}, bounds {deadline:g} s)",
        ["probe", "outcome", "seconds", "verdict"],
        [
            [
                r["probe"],
                r["outcome"],
                r["seconds"],
                "skip" if r["skipped"] else verdict[r["passed"]],
            ]
            for r in rows
        ],
        [f"{sum(r['passed'] for r in rows)} of {len(rows)} probes passed"],
        plain=True,
    )
    path = write_json(
        "hostile_inputs",
        {"short": args.short, "deadline_sec": deadline, "probes": rows},
        args.out,
    )
    print(f"wrote {path}")
    return 0 if all(r["passed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
