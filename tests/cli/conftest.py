"""A tiny tuned work folder shared by the CLI tests: a 32x32 matmul from a workload file,
4 trials, tuned once per session through ``python -m metaschedule tune``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

WORKLOAD_FILE = """\
from metaschedule import te
from metaschedule.te import ops

A = te.placeholder((32, 32), "float32", "A")
B = te.placeholder((32, 32), "float32", "B")
matmul = te.create_prim_func([A, B, ops.matmul(A, B)])
"""


def run_cli(*args: str, cwd: str | None = None, timeout: float = 240):
    """``python -m metaschedule ARGS``: the completed process (text output)."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "metaschedule", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="session")
def cli():
    """:func:`run_cli`."""
    return run_cli


@pytest.fixture(scope="session")
def workload_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("cli_workload") / "mm.py"
    path.write_text(WORKLOAD_FILE)
    return str(path)


@pytest.fixture(scope="session")
def tuned(tmp_path_factory, workload_file):
    """(work_dir, the completed tune process)."""
    work_dir = str(tmp_path_factory.mktemp("cli_tuned") / "run")
    proc = run_cli(
        "tune",
        f"{workload_file}:matmul",
        "--trials",
        "4",
        "--trials-per-iter",
        "2",
        "--strategy",
        "replay-trace",
        "--seed",
        "0",
        "--final-selection-top-k",  # records are the trials (tested in test_tune.py)
        "0",
        "--work-dir",
        work_dir,
    )
    assert proc.returncode == 0, proc.stderr
    return work_dir, proc
