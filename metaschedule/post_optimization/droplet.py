"""``Droplet``: a local search around the best schedule, with a statistical test.

Droplet search (Canesche et al., "Droplet Search: a Hill-Climbing Approach to Tuning
Tensor Programs") starts at the best point found by the main search, measures the
points that differ from it by one step in one knob, and moves to the best neighbour when
it is faster. Here a move needs a one-sided Welch t-test on repeated measurements to say
the neighbour is faster at significance ``pvalue``, so noise does not walk the search
away from a good schedule. When no neighbour wins, the step grows (two steps, three, ...)
until the budget is spent or the whole grid has been looked at.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..arg_info import ArgInfo
from ..database.base import TuningRecord, latest_per_schedule
from ..database.json_database import JSONDatabase
from ..target import Target
from .measure import Measurer
from .space import Space

__all__ = ["Droplet", "DropletResult", "significantly_faster"]


def significantly_faster(new: Sequence[float], best: Sequence[float], pvalue: float) -> bool:
    """Whether samples ``new`` are faster than ``best`` by a one-sided Welch t-test."""
    new_arr, best_arr = np.asarray(new, float), np.asarray(best, float)
    if len(new_arr) == 0 or len(best_arr) == 0 or new_arr.mean() >= best_arr.mean():
        return False
    if len(new_arr) < 2 or len(best_arr) < 2:
        return False  # one sample says nothing about the spread
    if new_arr.std() == 0 and best_arr.std() == 0:  # no spread: the t statistic is undefined
        return bool(new_arr.max() < best_arr.min())
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # near-identical samples
        test = stats.ttest_ind(new_arr, best_arr, equal_var=False, alternative="less")
    p = float(test.pvalue)
    return not math.isnan(p) and p < pvalue


@dataclass
class DropletResult:
    """What a Droplet search did: the point it started and ended at, and its samples."""

    start: list[int]
    best: list[int]
    start_samples: list[float]
    best_samples: list[float]
    measured: int = 0
    failed: int = 0
    moves: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)

    @property
    def improved(self) -> bool:
        return self.best != self.start

    @property
    def speedup(self) -> float:
        return float(np.mean(self.start_samples) / np.mean(self.best_samples))


class Droplet:
    """Tuner with the droplet algorithm (TVM's ``post_optimization.Droplet``).

    Args:
        json_file: the records: a records file of a JSON database (its best valid
            record of the workload is the start), or a :class:`TuningRecord`.
        workload_file: the database's workload file (None when ``json_file`` is a record).
        target: the target.
        log: a JSON-lines file that receives every measurement (or None).
        pvalue: the significance a move needs.
        measurer: builds and times candidates (default: local, created on first use).
    """

    def __init__(
        self,
        json_file: str | TuningRecord,
        workload_file: str | None,
        target: Target | str,
        log: str | None,
        pvalue: float = 0.05,
        *,
        measurer: Measurer | None = None,
    ):
        if not 0 < pvalue < 1:
            raise ValueError(f"Droplet: pvalue must be in (0, 1), got {pvalue}")
        self.target = target if isinstance(target, Target) else Target(target)
        record = _best_record(json_file, workload_file)
        self.space = Space(record, record.workload, self.target, measurer=measurer)
        self.log = log
        self.pvalue = float(pvalue)
        self.dims = self.space.dims
        self.best_choice: list[int] = list(self.space.start)
        self.best_samples: list[float] = []
        self.visited: set[int] = {self.space.knob2point(self.best_choice)}
        self.step = 1
        self.result: DropletResult | None = None

    # the algorithm's steps (TVM's names) -------------------------------------------------
    def search_space(self, factor: int = 1) -> list[list[int]]:
        """The points ``factor`` steps from the best along one knob, in both directions."""
        out = []
        for axis, dim in enumerate(self.dims):
            for delta in (-factor, factor):
                index = self.best_choice[axis] + delta
                if 0 <= index < dim:
                    knob = list(self.best_choice)
                    knob[axis] = index
                    out.append(knob)
        return out

    def next_pos(self, new_positions: list[list[int]]) -> list[list[int]]:
        """The positions not measured yet (they are marked as measured)."""
        fresh = []
        for knob in new_positions:
            point = self.space.knob2point(knob)
            if point not in self.visited:
                self.visited.add(point)
                fresh.append(knob)
        return fresh

    def update(self, results: list[tuple[list[int], list[float] | None]]) -> bool:
        """Move to the fastest neighbour if the test says it beats the best; whether moved."""
        valid = [(k, s) for k, s in results if s]
        if not valid:
            return False
        knob, samples = min(valid, key=lambda ks: float(np.mean(ks[1])))
        if significantly_faster(samples, self.best_samples, self.pvalue):
            self.best_choice, self.best_samples = list(knob), list(samples)
            return True
        return False

    # driving ---------------------------------------------------------------------------
    def tune(
        self,
        n_trial: int = 100,
        timeout: float = 10,
        number: int = 2,
        repeat: int = 3,
        min_repeat_ms: int = 0,
        cpu_cache: bool = False,
    ) -> DropletResult:
        """Search until ``n_trial`` neighbours are measured or no neighbour is left.

        The start is measured first with the same protocol, so that it and its
        neighbours are compared on samples taken together.
        """
        protocol = {
            "timeout": timeout,
            "number": number,
            "repeat": repeat,
            "min_repeat_ms": min_repeat_ms,
            "cpu_cache": cpu_cache,
        }
        start = list(self.best_choice)
        (self.best_samples,) = self.space.run([start], self.log, **protocol)
        if not self.best_samples:
            raise RuntimeError(
                "Droplet: the starting schedule failed to build or run; "
                f"see {self.log or 'the log'}"
            )
        result = DropletResult(start, start, list(self.best_samples), list(self.best_samples))
        max_step = max(self.dims, default=0)
        self.step = 1
        while result.measured < n_trial and self.step < max_step:
            positions = self.next_pos(self.search_space(self.step))
            if not positions:
                self.step += 1
                continue
            positions = positions[: n_trial - result.measured]
            samples = self.space.run(positions, self.log, **protocol)
            result.measured += len(positions)
            result.failed += sum(s is None for s in samples)
            moved = self.update(list(zip(positions, samples)))
            result.history.append(
                {
                    "step": self.step,
                    "measured": len(positions),
                    "moved": moved,
                    "best_mean": float(np.mean(self.best_samples)),
                }
            )
            if moved:
                result.moves += 1
                self.step = 1
            else:
                self.step += 1
        result.best, result.best_samples = list(self.best_choice), list(self.best_samples)
        self.result = result
        return result

    def best_record(self) -> TuningRecord | None:
        """A record of the improved schedule, or None when the search kept the start."""
        if self.result is None or not self.result.improved:
            return None
        sch = self.space.template(self.result.best)
        if sch is None:
            return None
        old = self.space.record
        return TuningRecord(
            sch.trace,
            old.workload,
            list(self.result.best_samples),
            self.target,
            ArgInfo.from_entry_func(sch.mod),  # a re-laid-out weight's shape follows the tiles
        )


def _best_record(json_file: str | TuningRecord, workload_file: str | None) -> TuningRecord:
    if isinstance(json_file, TuningRecord):
        return json_file
    if workload_file is None:
        raise ValueError("Droplet: workload_file is needed with a records file")
    database = JSONDatabase(workload_file, json_file, allow_missing=False)
    best: TuningRecord | None = None
    # a schedule measured again (a final selection) counts by its latest valid record
    for record in latest_per_schedule(database.get_all_tuning_records()):
        if record.is_valid and (best is None or record.mean_run_sec < best.mean_run_sec):
            best = record
    if best is None:
        raise ValueError(f"Droplet: {json_file} holds no valid tuning record to start from")
    return best
