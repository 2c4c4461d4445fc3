"""``TaskRecord``: what the task scheduler knows about one task while tuning it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..flop_count import estimate_flops

if TYPE_CHECKING:
    from ..builder import BuilderResult
    from ..measure_candidate import MeasureCandidate
    from ..runner import RunnerFuture, RunnerResult
    from ..tune_context import TuneContext

__all__ = ["TaskRecord", "statistics_table"]


class TaskRecord:
    """A task under tuning: its context and weight, the batch in flight, its history.

    Attributes:
        ctx: the TuneContext.
        task_weight: how much the task's latency counts in the total.
        flop: operations per run (:func:`~metaschedule.flop_count.estimate_flops`, at
            least 1).
        latencies: seconds per measured candidate, in order; ``inf`` for a failure.
        best_history: the best latency after each measured batch (``inf`` while none
            succeeded), for schedulers that follow the tuning curve.
        trials_sent: candidates sent to measurement (in flight included).
        build_errors, run_errors: failed candidates by stage.
        failed_batches_in_a_row: measured batches in a row in which every candidate
            failed; the scheduler terminates the task when it reaches its limit.
        empty_batches_in_a_row: batches in a row in which the strategy gave no candidate.
        is_terminated: whether the task is done.
        pre_tuned: whether its search strategy is between ``pre_tuning`` and
            ``post_tuning``.
        num_resumed: trials found in the database when tuning started (counted in
            ``latencies`` and ``trials_sent``).
        measure_candidates, builder_results, runner_futures: the batch in flight, or None.
        runner_results: the results of the batch in flight that arrived (None: not yet).
        delivered: indices of the batch's results already given to the incremental
            measure callbacks.
    """

    def __init__(self, ctx: TuneContext, task_weight: float) -> None:
        self.ctx = ctx
        self.task_weight = float(task_weight)
        self.flop = max(1.0, estimate_flops(ctx.mod)) if ctx.mod is not None else 1.0
        self.latencies: list[float] = []
        self.best_history: list[float] = []
        self.trials_sent = 0
        self.build_errors = 0
        self.run_errors = 0
        self.failed_batches_in_a_row = 0
        self.empty_batches_in_a_row = 0
        self.is_terminated = False
        self.pre_tuned = False
        self.num_resumed = 0
        self.runner_results: list[RunnerResult | None] | None = None
        self.delivered: set[int] = set()
        self.measure_candidates: list[MeasureCandidate] | None = None
        self.builder_results: list[BuilderResult] | None = None
        self.runner_futures: list[RunnerFuture] | None = None

    @property
    def name(self) -> str:
        return self.ctx.task_name

    @property
    def is_running(self) -> bool:
        """Whether a batch is in flight."""
        return self.runner_futures is not None

    @property
    def num_trials(self) -> int:
        """Candidates measured so far (failures included)."""
        return len(self.latencies)

    @property
    def best_latency(self) -> float:
        """The fastest measured latency in seconds; ``inf`` before any success."""
        return min(self.latencies, default=math.inf)

    @property
    def gflops(self) -> float:
        """Operations per nanosecond of the best latency; 0 before any success."""
        best = self.best_latency
        return self.flop / best / 1e9 if math.isfinite(best) and best > 0 else 0.0

    def resume(self, latencies: list[float]) -> None:
        """Count trials measured before this run (mean seconds; >= 1e9 means failed)."""
        self.latencies = [x if x < 1e9 else math.inf for x in latencies]
        self.trials_sent = self.num_resumed = len(latencies)
        if self.latencies:
            self.best_history = [self.best_latency]

    def start_batch(
        self,
        candidates: list[MeasureCandidate],
        builder_results: list[BuilderResult],
        futures: list[RunnerFuture],
    ) -> None:
        """A batch is in flight."""
        self.measure_candidates = candidates
        self.builder_results = builder_results
        self.runner_futures = futures
        self.runner_results = [None] * len(futures)
        self.delivered = set()
        self.trials_sent += len(candidates)

    def collect_arrived(self) -> list[int]:
        """Fetch the results that are done and not fetched yet; their indices."""
        arrived: list[int] = []
        results = self.runner_results
        if results is None or self.runner_futures is None:
            return arrived
        for i, future in enumerate(self.runner_futures):
            if results[i] is None and future.done():
                results[i] = future.result()
                arrived.append(i)
        return arrived

    def wait_next(self) -> None:
        """Wait for the first result not fetched yet (``result()`` blocks)."""
        results = self.runner_results
        if results is None or self.runner_futures is None:
            return
        for i, future in enumerate(self.runner_futures):
            if results[i] is None:
                results[i] = future.result()
                return

    def undelivered(self) -> list[int]:
        """Indices of fetched results not yet given to the incremental callbacks."""
        return [
            i
            for i, r in enumerate(self.runner_results or ())
            if r is not None and i not in self.delivered
        ]

    @property
    def all_arrived(self) -> bool:
        return self.runner_results is not None and all(r is not None for r in self.runner_results)

    def end_batch(self) -> list[RunnerResult | None]:
        """Forget the batch in flight; its results."""
        results = self.runner_results or []
        self.measure_candidates = self.builder_results = self.runner_futures = None
        self.runner_results = None
        self.delivered = set()
        return results

    def record_results(
        self, builder_results: list[BuilderResult], runner_results: list[RunnerResult]
    ) -> None:
        """Account for a measured batch."""
        failures = 0
        for built, ran in zip(builder_results, runner_results):
            if built.error_msg is not None:
                self.build_errors += 1
            elif ran.error_msg is not None:
                self.run_errors += 1
            if built.error_msg is not None or ran.error_msg is not None or not ran.run_secs:
                failures += 1
                self.latencies.append(math.inf)
            else:
                self.latencies.append(sum(ran.run_secs) / len(ran.run_secs))
        if runner_results and failures == len(runner_results):
            self.failed_batches_in_a_row += 1
        else:
            self.failed_batches_in_a_row = 0
        self.best_history.append(self.best_latency)

    def __repr__(self) -> str:
        return (
            f"TaskRecord({self.name!r}, weight={self.task_weight}, trials={self.num_trials}, "
            f"best={self.best_latency:.3g}s, terminated={self.is_terminated})"
        )


def statistics_table(tasks: list[TaskRecord], best_latencies: list[float] | None = None) -> str:
    """The per-task table of :meth:`TaskScheduler.print_tuning_statistics`, and totals.

    ``best_latencies`` (one per task, e.g. the best over a database that earlier runs
    filled) replace the tasks' own best latencies; a note names the tasks whose own best
    of this run is slower."""
    if best_latencies is None:
        best_latencies = [t.best_latency for t in tasks]
    header = (
        "ID",
        "Name",
        "FLOP",
        "Weight",
        "Speed (GFLOPS)",
        "Latency (us)",
        "Weighted Latency (us)",
        "Trials",
        "Done",
    )
    rows = []
    total_latency = 0.0
    for i, (task, best) in enumerate(zip(tasks, best_latencies)):
        if math.isfinite(best):
            weighted = best * task.task_weight
            total_latency += weighted
            speed = _num(task.flop / best / 1e9) if best > 0 else "N/A"  # a 0 s timing
            lat, wlat = _num(best * 1e6), _num(weighted * 1e6)
        else:
            speed = lat = wlat = "N/A"
        rows.append(
            (
                str(i),
                task.name,
                str(int(task.flop)),
                f"{task.task_weight:g}",
                speed,
                lat,
                wlat,
                str(task.num_trials),
                "Y" if task.is_terminated else "",
            )
        )
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(len(header))]
    lines = [
        " | ".join(h.rjust(w) for h, w in zip(header, widths)),
        "-+-".join("-" * w for w in widths),
    ]
    lines += [" | ".join(v.rjust(w) for v, w in zip(row, widths)) for row in rows]
    lines.append("-" * len(lines[0]))
    total_trials = sum(t.num_trials for t in tasks)
    unmeasured = sum(1 for b in best_latencies if not math.isfinite(b))
    lines.append(f"Total trials: {total_trials}")
    lines.append(
        f"Total weighted latency (us): {total_latency * 1e6:.4f}"
        + (f" ({unmeasured} task(s) without a valid measurement not counted)" if unmeasured else "")
    )
    older = [
        f"#{i} {_num(t.best_latency * 1e6) if math.isfinite(t.best_latency) else 'N/A'}"
        for i, (t, b) in enumerate(zip(tasks, best_latencies))
        if b < t.best_latency
    ]
    if older:
        lines.append(
            "Latencies are the best over the database; this run's own best (us): "
            + ", ".join(older)
        )
    return "\n".join(lines)


def _num(value: float) -> str:
    """4 decimals, or 4 significant digits for small values."""
    return f"{value:.4f}" if value >= 0.1 else f"{value:.4g}"
