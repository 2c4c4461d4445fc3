"""The final choice of the best schedule: re-measure the top candidates, interleaved.

During tuning each candidate is timed once, at whatever moment its turn came; on a
shared machine a lucky (or unlucky) moment can decide which schedule a database calls
the best. :func:`select_best` takes the ``top_k`` records of a workload, builds them once
and times them again in ``rounds`` rounds, every candidate once per round, in an order
that rotates (and reverses every other round) so that no candidate always runs first or
right after the same neighbour. A candidate's score is the median of its rounds (a round
is the median of the repeats its runner returned); the lowest median wins, ties going to
the database's order. Failed re-measurements count as infinitely slow.

Example::

    db = ms.tune_tir(func, "llvm", work_dir, 64)
    selection = select_best(db, func, "llvm")
    sch = selection.schedule()                  # the winner, replayed
    ms.compile_tir(selection.database(db), func, "llvm")  # the same, through a database
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .builder import Builder, BuilderInput
from .database import MemoryDatabase, OrderedUnionDatabase, TuningRecord
from .runner import Runner, RunnerInput, RunnerResult
from .target import Target
from .tir.function import IRModule, as_module

if TYPE_CHECKING:
    from .database import Database
    from .schedule import Schedule
    from .tir.function import PrimFunc

__all__ = ["FinalSelection", "interleaved_order", "select_best"]


@dataclass(frozen=True)
class FinalSelection:
    """The outcome of :func:`select_best`.

    Attributes:
        records: the re-measured records, in the database's order (fastest first).
        round_secs: per record, its seconds in each round (``inf`` for a failure).
        medians: per record, the median of its rounds.
        best_index: the position of the winner in ``records``.
    """

    records: tuple[TuningRecord, ...]
    round_secs: tuple[tuple[float, ...], ...]
    medians: tuple[float, ...]
    best_index: int

    @property
    def best(self) -> TuningRecord:
        """The winner's record as the database holds it."""
        return self.records[self.best_index]

    @property
    def changed(self) -> bool:
        """Whether the re-measurement overturned the database's choice."""
        return self.best_index != 0

    def schedule(self) -> Schedule:
        """The winner's trace replayed on its workload."""
        return self.best.as_measure_candidate().sch

    def database(self, database: Database) -> Database:
        """``database`` with the winner answering first: queries (``compile_tir``) see the
        winner, re-measured; everything else comes from ``database``."""
        best = self.best
        secs = [s for s in self.round_secs[self.best_index] if s != float("inf")]
        front = MemoryDatabase()
        front.commit_tuning_record(
            TuningRecord(
                best.trace,
                front.commit_workload(best.workload.mod),
                secs or best.run_secs,
                best.target,
                best.args_info,
            )
        )
        return OrderedUnionDatabase(front, database)


def interleaved_order(num: int, round_index: int) -> list[int]:
    """The order in which ``num`` candidates are timed in round ``round_index``: rotated
    by one every two rounds, and reversed in every other round."""
    order = [(i + round_index // 2) % num for i in range(num)]
    return order[::-1] if round_index % 2 else order


def _round_value(result: RunnerResult) -> float:
    if result.error_msg is not None or not result.run_secs:
        return float("inf")
    return float(statistics.median(result.run_secs))


def select_best(
    database: Database,
    mod: IRModule | PrimFunc,
    target: Target | str,
    *,
    top_k: int = 5,
    rounds: int = 5,
    builder: Builder | Literal["local"] = "local",
    runner: Runner | Literal["local"] = "local",
) -> FinalSelection | None:
    """Re-measure the ``top_k`` best records of ``mod`` interleaved and pick the fastest.

    Args:
        database: the tuning records (what ``tune_tir`` returned).
        mod: the tuned function, or a module of that one function.
        target: the target it was tuned for.
        top_k: how many of the best records to re-measure.
        rounds: how many times each is timed (one run per round).
        builder, runner: objects or kinds; kinds are created here and closed after.

    Returns:
        The selection, or None when the database has no valid record of ``mod``. With one
        record there is nothing to compare: it is returned without re-measuring.
    """
    if top_k < 1 or rounds < 1:
        raise ValueError(f"select_best needs top_k >= 1 and rounds >= 1, got {top_k}, {rounds}")
    mod = as_module(mod)
    if len(mod) != 1:
        raise ValueError(f"select_best takes one function at a time; the module has {len(mod)}")
    workload_mod = IRModule({"main": mod[next(iter(mod))]})  # as tune_tir stores it
    if not database.has_workload(workload_mod):
        return None
    records = database.get_top_k(database.commit_workload(workload_mod), top_k)
    if not records:
        return None
    if len(records) == 1:
        secs = tuple(records[0].run_secs or ())
        return FinalSelection((records[0],), (secs,), (statistics.median(secs),), 0)
    target = target if isinstance(target, Target) else Target(target)
    created: list[Any] = []  # components made here are closed here
    if isinstance(builder, str):
        builder = Builder.create(builder)
        created.append(builder)
    if isinstance(runner, str):
        runner = Runner.create(runner)
        created.append(runner)
    try:
        round_secs = _remeasure(records, target, rounds, builder, runner)
    finally:
        for component in created:
            close = getattr(component, "close", None)
            if close is not None:
                close()
    medians = tuple(statistics.median(r) for r in round_secs)
    best = min(range(len(records)), key=lambda i: (medians[i], i))
    return FinalSelection(tuple(records), tuple(map(tuple, round_secs)), medians, best)


def _remeasure(
    records: list[TuningRecord], target: Target, rounds: int, builder: Builder, runner: Runner
) -> list[list[float]]:
    candidates = [r.as_measure_candidate() for r in records]
    built = builder.build([BuilderInput(c.sch.mod, target) for c in candidates])
    inputs: list[RunnerInput | None] = [
        RunnerInput(b.artifact_path, target.kind, c.args_info)
        if b.error_msg is None and b.artifact_path is not None
        else None
        for b, c in zip(built, candidates)
    ]
    secs: list[list[float]] = [[] for _ in records]
    try:
        for r in range(rounds):
            order = [i for i in interleaved_order(len(records), r) if inputs[i] is not None]
            futures = runner.run([inputs[i] for i in order])  # type: ignore[misc]
            for i, future in zip(order, futures):
                secs[i].append(_round_value(future.result()))
        for i, inp in enumerate(inputs):
            if inp is None:
                secs[i] = [float("inf")] * rounds
    finally:
        for b in built:
            path = b.artifact_path
            if path and os.path.isfile(path) and "://" not in path:
                try:
                    os.remove(path)
                except OSError:
                    pass
    return secs
