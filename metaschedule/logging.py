"""Logs of a tuning run: one file per task and one for the task scheduler, in
``work_dir/logs``, and progress on the console.

``tune_tasks`` opens a :class:`TuningLogs` for the run. Its loggers are not registered in
``logging``'s global table (so runs do not leak loggers or open files); they hand their
records on to a parent, so a user who configures ``logging`` (a handler on the root or
``"metaschedule"`` logger) receives them too:

- the scheduler's logger (``task_scheduler.log``), parent ``metaschedule``;
- one logger per task (``task_<i>_<name>.log``), parent the task's own ``ctx.logger``.

Console progress: where nobody configured ``logging``, the scheduler's INFO lines (a line
per measured batch, and the statistics table) go to stderr through
:class:`metaschedule.progress.TuningProgress`, which also draws the live progress of each
task (the scheduler finds it as its logger's ``progress`` attribute).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .progress import TuningProgress

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["LOG_DIR", "TuningLogs", "get_logger", "task_log_path"]

ROOT = "metaschedule"
#: the folder of ``work_dir`` holding the log files
LOG_DIR = "logs"
SCHEDULER_LOG = "task_scheduler.log"
_FORMAT = "%(asctime)s [%(levelname)s] %(message)s"


def get_logger(name: str) -> logging.Logger:
    """The package logger ``metaschedule.<name>``."""
    return logging.getLogger(f"{ROOT}.{name}")


def task_log_path(work_dir: str, task_id: int, task_name: str) -> str:
    """The log file of task ``task_id``: ``work_dir/logs/task_<id>_<name>.log``."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", task_name) or "task"
    return os.path.join(work_dir, LOG_DIR, f"task_{task_id}_{safe}.log")


def _standalone_logger(name: str, parent: logging.Logger) -> logging.Logger:
    # Not logging.getLogger: the global table would keep every run's loggers forever.
    logger = logging.Logger(name, logging.INFO)  # noqa: LOG001
    logger.parent = parent
    logger.propagate = True
    return logger


def _logging_configured() -> bool:
    """Whether the user gave the root or the package logger a handler."""
    return bool(logging.getLogger().handlers or logging.getLogger(ROOT).handlers)


class TuningLogs:
    """The loggers of one tuning run (see the module docstring). Use as a context
    manager, or call :meth:`close` to close the files.

    Args:
        work_dir: the run's folder; the logs go to ``work_dir/logs``.
        task_names: one name per task.
        task_parents: one logger per task that its log also goes to (default: the
            package logger ``metaschedule.task.<name>``).
        console: show progress on stderr where ``logging`` is not configured.
    """

    def __init__(
        self,
        work_dir: str,
        task_names: Sequence[str],
        task_parents: Sequence[logging.Logger] | None = None,
        *,
        console: bool = True,
    ) -> None:
        if task_parents is not None and len(task_parents) != len(task_names):
            raise ValueError(
                f"TuningLogs: {len(task_names)} task names but {len(task_parents)} parent loggers"
            )
        self.log_dir = os.path.join(work_dir, LOG_DIR)
        os.makedirs(self.log_dir, exist_ok=True)
        self._handlers: list[tuple[logging.Logger, logging.Handler]] = []
        self.scheduler = _standalone_logger(f"{ROOT}.task_scheduler", logging.getLogger(ROOT))
        self._add(self.scheduler, _file_handler(os.path.join(self.log_dir, SCHEDULER_LOG)))
        #: the console view the task scheduler reports to (``scheduler.progress`` too)
        self.progress = None
        if console and not _logging_configured():
            self.progress = TuningProgress()
            self._add(self.scheduler, self.progress)
        self.scheduler.progress = self.progress  # type: ignore[attr-defined]
        self.tasks: list[logging.Logger] = []
        for i, name in enumerate(task_names):
            parent = task_parents[i] if task_parents is not None else get_logger(f"task.{name}")
            logger = _standalone_logger(f"{ROOT}.task_{i}_{name}", parent)
            self._add(logger, _file_handler(task_log_path(work_dir, i, name)))
            self.tasks.append(logger)

    def _add(self, logger: logging.Logger, handler: logging.Handler) -> None:
        logger.addHandler(handler)
        self._handlers.append((logger, handler))

    def close(self) -> None:
        """Flush and close every handler this run opened."""
        while self._handlers:
            logger, handler = self._handlers.pop()
            logger.removeHandler(handler)
            handler.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _file_handler(path: str) -> logging.Handler:
    handler = logging.FileHandler(path, mode="a", encoding="utf-8", delay=False)
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter(_FORMAT))
    return handler
