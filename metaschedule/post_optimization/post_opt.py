"""``PostOpt`` and ``post_optimize``: Droplet search on the best record of each workload."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

from ..builder import Builder
from ..database.base import Database
from ..database.json_database import JSONDatabase
from ..runner import Runner
from ..target import Target
from ..tir.function import IRModule
from .droplet import Droplet, DropletResult
from .measure import Measurer

__all__ = ["PostOpt", "PostOptResult", "post_optimize"]

_LOG = logging.getLogger(__name__)


@dataclass
class PostOptResult:
    """The outcome of post-optimizing one workload."""

    workload_index: int
    droplet: DropletResult | None
    committed: bool
    error: str | None = None


def post_optimize(
    database: Database,
    mods: Sequence[IRModule],
    target: Target,
    trials: int = 100,
    *,
    builder: Builder | None = None,
    runner: Runner | None = None,
    log_dir: str | None = None,
    pvalue: float = 0.05,
    logger: logging.Logger | None = None,
) -> list[PostOptResult]:
    """Run a Droplet search from the best record of each module in ``database``.

    A neighbour found faster by the statistical test is committed to the database as a
    new record with the samples it was measured with; nothing is committed otherwise,
    so the database's best never gets worse.

    Args:
        database: the tuned records; receives the improvements.
        mods: the workloads (each looked up with the database's module equality).
        target: the target.
        trials: neighbours to measure per workload at most.
        builder, runner: components to build and time with (default: local ones). The
            protocol is a few interleaved rounds per candidate, so one measurement of the
            runner's own ``repeat`` counts as one sample.
        log_dir: where each workload's measurements go as ``droplet_<i>.jsonl``.
        pvalue: the significance a move needs.
        logger: progress messages (default: this module's logger).
    """
    logger = logger or _LOG
    target = target if isinstance(target, Target) else Target(target)
    if trials <= 0:
        raise ValueError(f"post_optimize: trials must be positive, got {trials}")
    if builder is None or runner is None:
        measurer = Measurer.local(timeout=10, number=2, min_repeat_ms=0, cpu_cache=False)
    else:
        measurer = Measurer(builder, runner)
    if log_dir:
        os.makedirs(log_dir, exist_ok=True)
    results = []
    try:
        for index, mod in enumerate(mods):
            record = database.query_tuning_record(mod, target)
            if record is None:
                logger.info("post-optimization: workload %d has no valid record; skipped", index)
                results.append(PostOptResult(index, None, False, "no valid record"))
                continue
            log = os.path.join(log_dir, f"droplet_{index}.jsonl") if log_dir else None
            try:
                droplet = Droplet(record, None, target, log, pvalue, measurer=measurer)
                outcome = droplet.tune(trials)
            except (RuntimeError, ValueError) as err:
                logger.warning("post-optimization of workload %d failed: %s", index, err)
                results.append(PostOptResult(index, None, False, str(err)))
                continue
            better = droplet.best_record()
            if better is not None:
                database.commit_tuning_record(better)
            logger.info(
                "post-optimization of workload %d: %d neighbours measured (%d failed), "
                "%d moves, speedup %.3fx%s",
                index,
                outcome.measured,
                outcome.failed,
                outcome.moves,
                outcome.speedup,
                "" if better is not None else " (kept the tuned schedule)",
            )
            results.append(PostOptResult(index, outcome, better is not None))
    finally:
        measurer.close()
    return results


class PostOpt:
    """Post-optimization of a finished tuning run (TVM's ``post_optimization.PostOpt``).

    Args:
        work_dir: the run's folder, holding its JSON database.
        target: the target the records were tuned for.
        trials: neighbours to measure per workload at most.
    """

    def __init__(self, work_dir: str, target: Target | str, trials: int = 100):
        if not os.path.isdir(work_dir):
            raise FileNotFoundError(f"PostOpt: work_dir {work_dir!r} does not exist")
        self.work_dir = work_dir
        self.target = target if isinstance(target, Target) else Target(target)
        self.trials = int(trials)
        self.results: list[PostOptResult] = []

    def run(self) -> None:
        """Execute the post optimization on every workload of the database."""
        database = JSONDatabase(work_dir=self.work_dir, allow_missing=False)
        mods = _workload_mods(database)
        self.results = post_optimize(
            database, mods, self.target, self.trials, log_dir=os.path.join(self.work_dir, "logs")
        )


def _workload_mods(database: Database) -> list[IRModule]:
    seen: dict[int, IRModule] = {}
    for record in database.get_all_tuning_records():
        seen.setdefault(id(record.workload), record.workload.mod)
    return list(seen.values())
