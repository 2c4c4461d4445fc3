"""The console view of a tuning run (metaschedule.progress)."""

from __future__ import annotations

import io
import math
import os
import subprocess
import sys
import time

import pytest

from metaschedule.progress import TuningProgress, format_eta, lock_wait_message
from metaschedule.runner.local_runner import measurement_lock_holder


class _Task:
    def __init__(self, name, flop):
        self.name, self.flop = name, flop
        self.num_trials, self.best_latency, self.is_terminated = 0, math.inf, False


class _Scheduler:
    def __init__(self):
        self.tasks = [_Task("mm", 2e6), _Task("conv", 4e6)]
        self.max_trials_global = 8
        self.max_trials_per_task = 8


def _drive(progress: TuningProgress) -> None:
    sched = _Scheduler()
    progress.on_start(sched)
    progress.on_phase(sched, 0, "searching")
    progress.on_phase(sched, 0, "building")
    for lat in (2e-3, None, 1e-3):
        progress.on_result(sched, 0, lat)
    sched.tasks[0].num_trials, sched.tasks[0].best_latency = 3, 1e-3
    progress.on_batch(sched, 0)
    progress.on_finish(sched)


def test_format_eta():
    assert format_eta(None) == "-" and format_eta(math.inf) == "-"
    assert format_eta(65) == "1:05" and format_eta(3723) == "1:02:03"


def test_plain_lines_when_not_a_terminal():
    stream = io.StringIO()
    progress = TuningProgress(stream, interval=0.0)
    assert not progress.is_live
    _drive(progress)
    progress.close()
    out = stream.getvalue()
    assert "progress: task #0 mm: 3/8 trials, best 2.00 GFLOPS (1000.00 us)" in out
    assert "progress: task #1 conv: 0/8 trials" in out


def test_live_table_with_rich():
    pytest.importorskip("rich")
    stream = io.StringIO()
    progress = TuningProgress(stream, live=True)
    assert progress.is_live
    sched = _Scheduler()
    progress.on_start(sched)
    progress.on_result(sched, 0, 1e-3)
    from rich.console import Console

    console = Console(file=io.StringIO(), width=120)
    console.print(progress._render())
    table = console.file.getvalue()
    assert "1/8" in table and "2.00" in table and "measuring" in table
    progress.on_finish(sched)
    progress.close()


def test_log_records_are_printed():
    import logging

    stream = io.StringIO()
    progress = TuningProgress(stream, live=False)
    logger = logging.Logger("test_progress")  # noqa: LOG001 - not in the global table
    logger.addHandler(progress)
    logger.info("a batch of %d", 4)
    progress.close()
    assert "a batch of 4" in stream.getvalue()


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux /proc/locks")
def test_lock_held_by_another_process_is_reported():
    code = (
        "import time, sys\n"
        "from metaschedule.runner.local_runner import host_measurement_lock\n"
        "with host_measurement_lock():\n"
        "    print('held', flush=True)\n"
        "    time.sleep(30)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        deadline = time.monotonic() + 10
        while measurement_lock_holder() != child.pid and time.monotonic() < deadline:
            time.sleep(0.1)  # other tuners on the host may hold it for a moment
        assert measurement_lock_holder() == child.pid
        # our own child (as our runner's workers are) is not "another process"
        assert lock_wait_message() is None
        sibling = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:  # seen from an unrelated process, it is
            msg = lock_wait_message(own_pid=sibling.pid)
        finally:
            sibling.kill()
            sibling.wait()
        assert msg is not None and f"process {child.pid}" in msg and "-c import time" in msg
    finally:
        child.kill()
        child.wait()


def test_statistics_table_shows_the_database_best():
    from metaschedule.task_scheduler.task_record import statistics_table

    class _Ctx:
        mod = None
        task_name = "mm"

    from metaschedule.task_scheduler.task_record import TaskRecord

    task = TaskRecord(_Ctx(), 1.0)
    task.flop = 2e6
    task.latencies = [204e-6]
    table = statistics_table([task], [21e-6])
    row = next(line for line in table.splitlines() if line.strip().startswith("0 |"))
    assert "21.0000" in row and "95.2381" in row  # the database's best, 2e6 / 21 us
    assert "this run's own best (us): #0 204.0000" in table
    assert "own best" not in statistics_table([task])
