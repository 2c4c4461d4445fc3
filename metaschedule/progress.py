"""The console view of a tuning run: live progress per task, or periodic log lines.

:class:`TuningProgress` is a ``logging.Handler`` that ``TuningLogs`` attaches to the
scheduler's logger when nobody configured ``logging``. It prints the scheduler's INFO
lines, and the task scheduler tells it what happens (``on_start``, ``on_phase``,
``on_result`` as each measurement arrives, ``on_batch``, ``on_finish``) through the
logger's ``progress`` attribute.

- On a terminal, with `rich <https://github.com/Textualize/rich>`_: a live table, one
  line per task (trials measured, best GFLOPS and latency, what it is doing, ETA) under a
  total line, redrawn four times a second.
- Otherwise (output redirected, or no rich): the log lines, and a progress line per task
  every ``interval`` seconds while something changed.

In both, a line says when measurements wait for the host's measurement lock held by
another process (see :func:`metaschedule.runner.local_runner.measurement_lock_holder`).
"""

from __future__ import annotations

import logging
import math
import os
import re
import sys
import threading
import time
from typing import Any, TextIO

from .runner.local_runner import measurement_lock_holder, measurement_lock_path

__all__ = ["TuningProgress", "format_eta", "lock_wait_message"]

_FORMAT = "[%(asctime)s] %(message)s"


def format_eta(secs: float | None) -> str:
    """``1:02:03``, ``2:03``, or ``-`` when unknown."""
    if secs is None or not math.isfinite(secs) or secs < 0:
        return "-"
    secs = round(secs)
    h, rest = divmod(secs, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _ancestors_include(pid: int, ancestor: int) -> bool:
    for _ in range(64):
        if pid == ancestor:
            return True
        pid = _parent(pid)
        if pid <= 1:
            return False
    return False


def lock_wait_message(own_pid: int | None = None) -> str | None:
    """A line saying who holds the host's measurement lock, when it is a process other
    than ``own_pid`` (default: this one) and its workers; else None."""
    holder = measurement_lock_holder()
    own_pid = os.getpid() if own_pid is None else own_pid
    if holder is None or _ancestors_include(holder, own_pid):
        return None
    return (
        f"waiting for the host's measurement lock ({measurement_lock_path()}): process "
        f"{holder} of '{_owner_command(holder)[:70]}' is measuring"
    )


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return " ".join(f.read().replace(b"\0", b" ").decode(errors="replace").split())
    except OSError:
        return ""


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _owner_command(pid: int) -> str:
    """The command of the program a (worker) process serves: its first ancestor that is
    not a multiprocessing helper."""
    cmd = _cmdline(pid)
    for _ in range(8):
        if "multiprocessing" not in cmd:
            break
        parent = _parent(pid)
        if parent <= 1:
            break
        pid, cmd = parent, _cmdline(parent)
    return cmd or "?"


class _TaskView:
    """What the display knows of one task."""

    def __init__(self, name: str, flop: float) -> None:
        self.name = name
        self.flop = flop
        self.measured = 0  # this run, results arrived
        self.best = math.inf  # this run
        self.phase = "waiting"


class TuningProgress(logging.Handler):
    """Progress of a tuning run on stderr (see the module docstring).

    Args:
        stream: where to write (default ``sys.stderr``).
        live: the live table (default: when ``stream`` is a terminal and rich is there).
        interval: seconds between the progress lines when not live.
    """

    def __init__(
        self, stream: TextIO | None = None, *, live: bool | None = None, interval: float = 10.0
    ) -> None:
        super().__init__(logging.INFO)
        self.setFormatter(logging.Formatter(_FORMAT, "%H:%M:%S"))
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self._console: Any = None  # a rich Console when live
        if live is not False:
            try:
                from rich.console import Console
            except ImportError:
                pass
            else:
                console = Console(file=self.stream)
                if live or console.is_terminal:
                    self._console = console
        self._live: Any = None
        self._lock = threading.RLock()
        self._tasks: list[_TaskView] = []
        self._total = 0
        self._per_task = 0
        self._start = time.monotonic()
        self._first_result: float | None = None
        self._lock_msg: str | None = None
        self._changed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def is_live(self) -> bool:
        return self._console is not None

    # ------------------------------------------------------------------ log lines
    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = self.format(record)
            if self._console is not None:  # rich locks; never under ours (see _render)
                self._console.print(msg, markup=False, highlight=False, soft_wrap=True)
                return
            with self._lock:
                self.stream.write(msg + "\n")
                self.stream.flush()
        except Exception:  # noqa: BLE001 - logging must never break the tuner
            self.handleError(record)

    def _line(self, text: str) -> None:
        self.emit(
            logging.LogRecord("metaschedule.progress", logging.INFO, __file__, 0, text, None, None)
        )

    # ------------------------------------------------------------------ events
    def on_start(self, scheduler: Any) -> None:
        """Tuning starts: ``scheduler.tasks`` are set."""
        with self._lock:
            self._tasks = [_TaskView(t.name, t.flop) for t in scheduler.tasks]
            self._total = int(scheduler.max_trials_global)
            self._per_task = int(scheduler.max_trials_per_task)
            self._start = time.monotonic()
            self._first_result = None
            live = None
            if self._console is not None and self._live is None:
                from rich.live import Live

                live = self._live = Live(
                    get_renderable=self._render,
                    console=self._console,
                    refresh_per_second=4,
                    transient=False,
                    redirect_stdout=False,
                    redirect_stderr=False,
                )
        if live is not None:  # outside our lock: its refresh thread takes it in _render
            live.start()
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._watch, name="metaschedule-progress", daemon=True
        )
        self._thread.start()

    def on_phase(self, scheduler: Any, task_id: int, phase: str) -> None:
        """Task ``task_id`` is ``"searching"`` (generating candidates) or ``"building"``."""
        with self._lock:
            if 0 <= task_id < len(self._tasks):
                self._tasks[task_id].phase = phase
                self._changed = True

    def on_result(self, scheduler: Any, task_id: int, latency: float | None) -> None:
        """A measurement of ``task_id`` arrived (``latency`` None: it failed)."""
        with self._lock:
            if not 0 <= task_id < len(self._tasks):
                return
            view = self._tasks[task_id]
            view.measured += 1
            view.phase = "measuring"
            if latency is not None and latency > 0:
                view.best = min(view.best, latency)
            if self._first_result is None:
                self._first_result = time.monotonic()
            self._changed = True

    def on_batch(self, scheduler: Any, task_id: int) -> None:
        """A batch of ``task_id`` is recorded: take the scheduler's numbers."""
        with self._lock:
            if not 0 <= task_id < len(self._tasks):
                return
            task, view = scheduler.tasks[task_id], self._tasks[task_id]
            view.measured = task.num_trials
            view.best = min(view.best, task.best_latency)
            view.phase = "done" if task.is_terminated else "waiting"
            for t, v in zip(scheduler.tasks, self._tasks):
                if t.is_terminated:
                    v.phase = "done"
            self._changed = True

    def on_finish(self, scheduler: Any) -> None:
        """Tuning ended: stop the live table (the statistics follow as a log line)."""
        with self._lock:
            for v in self._tasks:
                v.phase = "done"
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
        if not self._stop_live() and self._console is None:
            with self._lock:
                if self._changed:
                    self._print_plain()

    def close(self) -> None:
        self._stop.set()
        self._stop_live()
        super().close()

    def _stop_live(self) -> bool:
        """Stop the live table, if any (outside our lock: Live's thread takes it in
        ``_render`` while holding its own); whether there was one."""
        with self._lock:
            live, self._live = self._live, None
        if live is None:
            return False
        live.stop()
        return True

    # ------------------------------------------------------------------ numbers
    def _measured(self) -> int:
        return sum(v.measured for v in self._tasks)

    def _rate(self) -> float | None:
        """Trials per second since tuning started (None before the first result)."""
        done = self._measured()
        elapsed = time.monotonic() - self._start
        return done / elapsed if done and elapsed > 0 else None

    def _remaining(self, view: _TaskView | None = None) -> int:
        left_global = max(0, self._total - self._measured())
        if view is not None:
            return 0 if view.phase == "done" else min(left_global, self._per_task - view.measured)
        per_task = sum(
            max(0, self._per_task - v.measured) for v in self._tasks if v.phase != "done"
        )
        return min(left_global, per_task)

    def _eta(self, view: _TaskView | None = None) -> str:
        rate = self._rate()
        left = self._remaining(view)
        if left == 0:
            return "0:00"
        return format_eta(left / rate if rate else None)

    @staticmethod
    def _best(view: _TaskView) -> tuple[str, str]:
        if not math.isfinite(view.best):
            return "-", "-"
        return f"{view.flop / view.best / 1e9:.2f}", f"{view.best * 1e6:.2f}"

    # ------------------------------------------------------------------ drawing
    def _render(self):
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        with self._lock:
            elapsed = format_eta(time.monotonic() - self._start)
            title = Text(
                f"Tuning {len(self._tasks)} task(s): {self._measured()}/"
                f"{self._total} trials, elapsed {elapsed}, ETA {self._eta()}",
                style="bold",
            )
            table = Table(box=None, pad_edge=False, show_edge=False)
            for col, justify in (
                ("#", "right"),
                ("task", "left"),
                ("trials", "right"),
                ("best GFLOPS", "right"),
                ("best us", "right"),
                ("now", "left"),
                ("ETA", "right"),
            ):
                table.add_column(col, justify=justify)
            for i, v in enumerate(self._tasks):
                gflops, us = self._best(v)
                table.add_row(
                    str(i),
                    v.name,
                    f"{v.measured}/{min(self._per_task, self._total)}",
                    gflops,
                    us,
                    v.phase,
                    self._eta(v),
                )
            lines = [title, table]
            if self._lock_msg:
                lines.append(Text(self._lock_msg, style="yellow"))
            return Group(*lines)

    def _print_plain(self) -> None:
        self._changed = False
        for i, v in enumerate(self._tasks):
            gflops, us = self._best(v)
            self._line(
                f"progress: task #{i} {v.name}: {v.measured}/"
                f"{min(self._per_task, self._total)} trials, best {gflops} GFLOPS "
                f"({us} us), {v.phase}, ETA {self._eta(v)}"
            )

    def _watch(self) -> None:
        """Checks the measurement lock; prints the periodic lines when not live."""
        last_line = time.monotonic()
        last_lock: list = [None, 0.0]
        while not self._stop.wait(1.0):
            with self._lock:
                measuring = any(v.phase in ("measuring", "building") for v in self._tasks)
            msg = lock_wait_message() if measuring else None
            with self._lock:
                self._lock_msg = msg
                key = None if msg is None else re.sub(r"process \d+ ", "", msg)
                if (
                    msg is not None
                    and self._console is None
                    and (key != last_lock[0] or time.monotonic() - last_lock[1] >= 60)
                ):
                    last_lock[:] = [key, time.monotonic()]  # once per holder, or a minute
                    self._line(msg)
                if (
                    self._console is None
                    and self._changed
                    and (time.monotonic() - last_line >= self.interval)
                ):
                    last_line = time.monotonic()
                    self._print_plain()
