"""Tuning logs: files per task and for the scheduler, forwarding, console output."""

import logging
import os

import pytest

from metaschedule.logging import TuningLogs, get_logger, task_log_path


class ListHandler(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_files_per_task_and_for_the_scheduler(tmp_path):
    parent = logging.getLogger("test_logging.parent")
    spy = ListHandler()
    parent.addHandler(spy)
    try:
        with TuningLogs(
            str(tmp_path), ["matmul", "conv 2d/x"], [parent, parent], console=False
        ) as logs:
            logs.scheduler.info("scheduler says %d", 1)
            logs.tasks[0].info("task zero")
            logs.tasks[1].warning("task one")
            logs.tasks[1].debug("too detailed")
    finally:
        parent.removeHandler(spy)
    files = sorted(os.listdir(tmp_path / "logs"))
    assert files == ["task_0_matmul.log", "task_1_conv_2d_x.log", "task_scheduler.log"]
    assert task_log_path(str(tmp_path), 1, "conv 2d/x").endswith("task_1_conv_2d_x.log")
    assert "scheduler says 1" in (tmp_path / "logs" / "task_scheduler.log").read_text()
    one = (tmp_path / "logs" / "task_1_conv_2d_x.log").read_text()
    assert "[WARNING] task one" in one and "too detailed" not in one
    assert "task zero" not in one
    assert spy.messages == ["task zero", "task one"]  # forwarded to the task's own logger
    # closed: later records do not reach the files
    logs.tasks[0].info("after close")
    assert "after close" not in (tmp_path / "logs" / "task_0_matmul.log").read_text()


def test_loggers_are_not_registered_globally(tmp_path):
    before = set(logging.Logger.manager.loggerDict)
    TuningLogs(str(tmp_path), ["a"], console=False).close()
    added = set(logging.Logger.manager.loggerDict) - before
    assert not [name for name in added if "task_0" in name or "task_scheduler" in name]
    assert get_logger("x").name == "metaschedule.x"


def test_mismatched_parents(tmp_path):
    with pytest.raises(ValueError, match="2 task names but 1 parent"):
        TuningLogs(str(tmp_path), ["a", "b"], [logging.getLogger("p")])
