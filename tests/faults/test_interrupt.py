"""kill -9 and Ctrl-C of a real tuner at random moments, then the same call again:
nothing lost, nothing duplicated, nothing measured twice, every record replays."""

import os
import random
import signal
import subprocess
import sys
import time

import pytest
from check_database import check_work_dir

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TRIALS = 16  # two batches of 8: an interruption lands in the first, the resume runs the rest


def start(work_dir, tmp):
    env = dict(
        os.environ,
        TMPDIR=str(tmp),
        XDG_CACHE_HOME=str(tmp / "cache"),
        PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p),
    )
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "tuning_child.py"), str(work_dir), str(TRIALS)],
        env=env,
        # as from a shell: Ctrl-C raises KeyboardInterrupt in the child, whatever this
        # process's own SIGINT disposition is (a child starting with it ignored keeps it so)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def committed(work_dir):
    path = os.path.join(work_dir, "committed.log")
    return sum(1 for _ in open(path)) if os.path.exists(path) else 0


def signal_mid_tuning(proc, work_dir, sig, rng):
    """Send ``sig`` once a random number of records is committed (plus a random delay);
    False if the tuner finished first."""
    target = committed(work_dir) + rng.randint(1, 2)
    deadline = time.monotonic() + 300
    while proc.poll() is None and committed(work_dir) < target:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(rng.uniform(0.0, 0.2))  # the tiny trials measure in a few seconds
    if proc.poll() is not None:
        return False
    proc.send_signal(sig)
    return True


def leftovers(tmp):
    """Build folders in the private TMPDIR, half-written files in the kernel cache."""
    cache = tmp / "cache" / "metaschedule" / "kernels"
    dirs = [d for d in os.listdir(tmp) if d.startswith("metaschedule-build-")]
    temps = [f for f in os.listdir(cache) if f.startswith(".ms-build-")] if cache.exists() else []
    return dirs + temps


def workers_of(tmp):
    """Live worker processes with our private TMPDIR in their environment (a compiler
    they started may outlive them by a moment: it is not theirs to kill)."""
    pids = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if b"_worker_main" not in f.read():
                    continue
            with open(f"/proc/{name}/environ", "rb") as f:
                if str(tmp).encode() in f.read():
                    pids.append(int(name))
        except OSError:
            pass
    return pids


def workers_left(tmp, within=0.5):
    """The workers of ``workers_of(tmp)`` still alive ``within`` seconds from now (sooner
    when none is left)."""
    deadline = time.monotonic() + within
    while (pids := workers_of(tmp)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return pids


def finish_and_check(work_dir, tmp):
    proc = start(work_dir, tmp)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    stats = check_work_dir(str(work_dir))
    assert stats["trials"] == TRIALS  # the budget counts the earlier records
    assert stats["lost"] == 0 and stats["duplicates"] == 0 and stats["replay_failures"] == 0
    # once complete, the same call returns at once without measuring
    again = start(work_dir, tmp)
    _, err = again.communicate(timeout=600)
    assert again.returncode == 0 and check_work_dir(str(work_dir))["trials"] == TRIALS
    assert leftovers(tmp) == []


@pytest.mark.compiler
@pytest.mark.slow
def test_kill_9_at_random_moments_then_resume(tmp_path):
    rng = random.Random(7)
    work_dir, tmp = tmp_path / "work", tmp_path / "tmp"
    tmp.mkdir()
    for _ in range(2):
        proc = start(work_dir, tmp)
        if signal_mid_tuning(proc, work_dir, signal.SIGKILL, rng):
            proc.wait(timeout=60)
            assert proc.returncode == -signal.SIGKILL
        proc.communicate()
        assert workers_left(tmp) == []  # the workers die with the tuner, within 0.5 s
        stats = check_work_dir(str(work_dir))
        assert stats["lost"] == 0 and stats["duplicates"] == 0
        assert stats["replay_failures"] == 0
    finish_and_check(work_dir, tmp)


@pytest.mark.compiler
@pytest.mark.slow
def test_ctrl_c_stops_within_seconds_saves_and_says_how_to_resume(tmp_path):
    rng = random.Random(3)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    for attempt in range(3):  # again if the tuner finished before the signal reached it
        work_dir = tmp_path / f"work{attempt}"
        proc = start(work_dir, tmp)
        signalled = signal_mid_tuning(proc, work_dir, signal.SIGINT, rng)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=60)
        if signalled and "TUNING-DONE" not in out:
            break
    else:
        pytest.fail("the tuner finished before the signal, three times")
    assert time.monotonic() - sent < 5  # within a second or two; slack for a loaded CI
    assert proc.returncode != 0
    assert "run the same call again with the same work_dir" in err
    # the traceback is the user's call, not the tuner's internals
    internal = [
        ln
        for ln in err.splitlines()
        if ln.strip().startswith("File") and "metaschedule" + os.sep in ln and "tune.py" not in ln
    ]
    assert internal == [], err[-3000:]
    assert workers_left(tmp) == []
    assert leftovers(tmp) == []
    stats = check_work_dir(str(work_dir))
    assert stats["records"] >= 1 and stats["lost"] == 0
    finish_and_check(work_dir, tmp)
