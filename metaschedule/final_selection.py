"""The final choice of the best schedule: re-measure the top candidates, interleaved.

During tuning each candidate is timed once, at whatever moment its turn came; on a
shared machine a lucky (or unlucky) moment can decide which schedule a database calls
the best. :func:`select_best` takes the ``top_k`` records of a workload, builds them once
and times them again in ``rounds`` rounds, every candidate once per round, in an order
that rotates (and reverses every other round) so that no candidate always runs first or
right after the same neighbour. A candidate's score is the median of its rounds (a round
is the median of the repeats its runner returned). Failed re-measurements count as
infinitely slow.

The winner: the database's first record keeps its place unless another is clearly faster
(:func:`clearly_faster`: per round, the ratio of the two candidates' times, timed moments
apart; its median must be below ``1 - MIN_GAIN`` and the challenger faster in so many
rounds that chance explains it with probability at most ``SIGN_TEST_ALPHA``, or the median
below ``1 - CLEAR_GAIN``); among clearly faster ones the lowest median wins, and the
search goes on from it. Before the rule decides, the candidates measured at least
``MIN_GAIN`` ahead of the database's first record are timed for as many rounds again,
with that record, interleaved, so that a change of choice rests on more than the rounds
that suggested it. Without such a rule, schedules a few percent apart or tied (several at
the FMA peak are common) trade places from one selection to the next on noise alone.

A candidate measured faster than the winner without being clearly faster is judged the
same speed: the winner and such candidates are all given the median of their pooled
rounds (:attr:`FinalSelection.estimates`, an order-restricted estimate), so the database
ranks the winner first (equal times keep commit order, and the winner is committed first).

Tuning runs it at its end (:func:`finalize`, the ``final_selection_top_k`` argument of
``tune_tir``/``tune_tasks``/``tune_relax``): each re-measurement is committed as a record
of its schedule (``run_secs``: its estimate), and a database ranks a schedule by its
latest valid record (:mod:`metaschedule.database.base`), so ``compile_tir`` and
``query_schedule`` see the re-measured winner. Since re-measuring removes the luck that
put the top records on top, they tend to come out slower than they were first timed, and a
schedule that was not re-measured may now rank first: :func:`finalize` then re-measures
the records that rank above its choice now, interleaved with that choice (which keeps
its place unless one is clearly faster), up to ``max_passes`` times, until the best
record is one it re-measured. Each pass, and each finished selection, is a line of a journal
(``work_dir/logs/final_selection.jsonl`` in tuning); tuning again does not repeat a
selection the journal says is done, unless new schedules were measured since.

Example::

    db = ms.tune_tir(func, "llvm", work_dir, 64, final_selection_top_k=0)
    selection = select_best(db, func, "llvm")
    sch = selection.schedule(func)              # the winner, replayed on func
    ms.compile_tir(selection.database(db), func, "llvm")  # the same, through a database
"""

from __future__ import annotations

import json
import logging
import math
import os
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .builder import Builder, BuilderInput
from .builder.base import remove_artifact
from .database import MemoryDatabase, OrderedUnionDatabase, TuningRecord
from .database.base import latest_per_schedule, measurement_key
from .logging import get_logger
from .profiler import Profiler
from .runner import Runner, RunnerInput, RunnerResult
from .target import Target
from .tir.function import IRModule, as_module

if TYPE_CHECKING:
    from .arg_info import ArgInfo
    from .database import Database, Workload
    from .schedule import Schedule
    from .tir.function import PrimFunc

__all__ = [
    "FinalSelection",
    "finalize",
    "clearly_faster",
    "interleaved_order",
    "is_selected",
    "select_best",
    "time_interleaved",
]

#: rounds each candidate is timed in a final selection
DEFAULT_ROUNDS = 5
#: how often :func:`finalize` re-measures a new top before it stops
DEFAULT_MAX_PASSES = 3
#: a challenger must be faster than the current choice by at least this fraction
MIN_GAIN = 0.02
#: ... in so many rounds that a sign test's one-sided p-value is at most this
SIGN_TEST_ALPHA = 0.05
#: ... or faster by at least this fraction (median of the per-round ratios)
CLEAR_GAIN = 0.05
#: a pass whose every candidate runs at least this many times slower than tuning timed it
#: measured another machine state (a busier one): it is not committed
CONDITIONS_CHANGED = 1.5


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
    def estimates(self) -> tuple[float, ...]:
        """Per record, the seconds a final selection commits for it: its median, except
        that the winner and every record measured faster than it (not clearly faster, or
        it would have won) share the median of their pooled rounds."""
        best = self.best_index
        tied = [i for i, m in enumerate(self.medians) if m < self.medians[best]] + [best]
        if len(tied) == 1:
            return self.medians
        pooled = statistics.median(s for i in tied for s in self.round_secs[i])
        return tuple(pooled if i in tied else m for i, m in enumerate(self.medians))

    @property
    def best(self) -> TuningRecord:
        """The winner's record as the database holds it."""
        return self.records[self.best_index]

    @property
    def changed(self) -> bool:
        """Whether the re-measurement overturned the database's choice."""
        return self.best_index != 0

    def schedule(self, mod: IRModule | None = None) -> Schedule:
        """The winner's trace replayed on ``mod`` (the module selected for), or on its
        stored workload when None (see :meth:`TuningRecord.as_measure_candidate`)."""
        return self.best.as_measure_candidate(mod).sch

    def database(self, database: Database) -> Database:
        """``database`` with the winner answering first: queries (``compile_tir``) see the
        winner, re-measured; everything else comes from ``database``."""
        best = self.best
        secs = [self.estimates[self.best_index]]
        if not math.isfinite(secs[0]):
            secs = list(best.run_secs or ())
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


def clearly_faster(
    challenger: list[float] | tuple[float, ...], current: list[float] | tuple[float, ...]
) -> bool:
    """Whether ``challenger`` is clearly faster than ``current``, given both candidates'
    seconds in the same rounds (``inf``: failed): the median of the per-round ratios
    (rounds where both ran) is below ``1 - MIN_GAIN``, and either the challenger was
    faster in so many of those rounds that a one-sided sign test gives at most
    ``SIGN_TEST_ALPHA``, or that median is below ``1 - CLEAR_GAIN``. A candidate whose
    every round failed is never faster; one that ran beats one whose every round failed."""
    if all(math.isinf(s) for s in challenger):
        return False
    if all(math.isinf(s) for s in current):
        return True
    ratios = [a / b for a, b in zip(challenger, current) if math.isfinite(a) and math.isfinite(b)]
    if not ratios:
        return False
    median = statistics.median(ratios)
    if median >= 1 - MIN_GAIN:
        return False
    wins, n = sum(r < 1 for r in ratios), len(ratios)
    p_value = sum(math.comb(n, k) for k in range(wins, n + 1)) / 2**n
    return p_value <= SIGN_TEST_ALPHA or median < 1 - CLEAR_GAIN


def _winner(round_secs: list[list[float]], medians: tuple[float, ...]) -> int:
    """The index :func:`select_best` picks: start from the database's first record and
    move to the clearly faster challenger with the lowest median until none is left."""
    best, seen = 0, {0}
    while True:
        faster = [
            j
            for j in range(len(round_secs))
            if j != best and clearly_faster(round_secs[j], round_secs[best])
        ]
        if not faster:
            return best
        best = min(faster, key=lambda j: (medians[j], j))
        if best in seen:  # a cycle cannot happen with these rules; stop on it regardless
            return best
        seen.add(best)


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
    rounds: int = DEFAULT_ROUNDS,
    builder: Builder | Literal["local"] = "local",
    runner: Runner | Literal["local"] = "local",
) -> FinalSelection | None:
    """Re-measure the ``top_k`` best records of ``mod`` interleaved and pick the fastest.

    Nothing is committed: see :func:`finalize` for what tuning does.

    Args:
        database: the tuning records (what ``tune_tir`` returned).
        mod: the tuned function, or a module of that one function.
        target: the target it was tuned for.
        top_k: how many of the best records to re-measure.
        rounds: how many times each is timed (one run per round); the database's first
            record and the candidates measured ahead of it get as many rounds again.
        builder, runner: objects or kinds; kinds are created here and closed after.

    Returns:
        The selection, or None when the database has no valid record of ``mod``. With one
        record there is nothing to compare: it is returned without re-measuring.
    """
    _check_args(top_k, rounds)
    mod = as_module(mod)
    if len(mod) != 1:
        raise ValueError(f"select_best takes one function at a time; the module has {len(mod)}")
    workload_mod = IRModule({"main": mod[next(iter(mod))]})  # as tune_tir stores it
    workload = _workload(database, workload_mod)
    if workload is None:
        return None
    records = database.get_top_k(workload, top_k)
    if not records:
        return None
    if len(records) == 1:
        secs = tuple(records[0].run_secs or ())
        return FinalSelection((records[0],), (secs,), (statistics.median(secs),), 0)
    target = target if isinstance(target, Target) else Target(target)
    with _components(builder, runner) as (builder, runner):
        return _select(records, target, rounds, builder, runner, workload_mod)


def is_selected(database: Database, mod: IRModule, journal: str) -> bool:
    """Whether the final selection of the workload ``mod`` is done: ``journal`` (the file
    :func:`finalize` appends to) says a selection finished with the schedule that ranks
    first in ``database`` now, over as many schedules as the database holds now (a
    schedule measured since, by tuning with a larger budget, makes it stale)."""
    workload = _workload(database, mod)
    if workload is None:
        return False
    best = database.get_top_k(workload, 1)
    entries = [e for e in _read_journal(journal) if e.get("workload") == str(workload.shash)]
    if not best or not entries or not entries[-1].get("done"):
        return False
    last = entries[-1]
    return last.get("best") == measurement_key(best[0]) and last.get("schedules") == len(
        _schedules(database, workload)
    )


def _schedules(database: Database, workload: Workload) -> list[TuningRecord]:
    """One record per schedule of ``workload`` (the one that counts)."""
    mine = [
        r
        for r in database.get_all_tuning_records()
        if r.workload is workload or r.workload.shash == workload.shash
    ]
    return latest_per_schedule(mine)


def _read_journal(path: str | None) -> list[dict]:
    if not path or not os.path.exists(path):
        return []
    entries = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a torn last line (killed mid-write): that selection is not done
            if isinstance(entry, dict):
                entries.append(entry)
    return entries


def _append_journal(path: str | None, entry: dict) -> None:
    """One line, written whole and flushed to disk (append-only, like the database)."""
    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    data = (json.dumps(entry, separators=(",", ":")) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def finalize(
    database: Database,
    mod: IRModule,
    target: Target | str,
    *,
    top_k: int = 5,
    rounds: int = DEFAULT_ROUNDS,
    builder: Builder,
    runner: Runner,
    max_passes: int = DEFAULT_MAX_PASSES,
    logger: logging.Logger | None = None,
    journal: str | None = None,
) -> FinalSelection | None:
    """The final selection of a tuning run for the workload ``mod`` (a task's module):
    re-measure the ``top_k`` best records interleaved and commit each successful
    re-measurement to ``database`` (``run_secs``: :attr:`FinalSelection.estimates`), so that the
    database's best is the re-measured winner.

    When a record that was not re-measured ranks first afterwards (the re-measured ones
    came out slower than their single timing), the records not re-measured that now rank
    first (up to ``top_k - 1``) are re-measured with the choice so far, which stands
    unless one of them is clearly faster (the same rule, in the same rounds), up to
    ``max_passes`` passes in all. Failed re-measurements are not committed: a record
    keeps its tuning measurement. Nor is a pass whose every candidate ran at least
    ``CONDITIONS_CHANGED`` times slower than tuning timed it (the machine was busier than
    while tuning; a memory-bound kernel on both cores can run 10x slower when another
    process takes a core): tuning's ranking stands, and a later run selects again. Does
    nothing with fewer than two valid records, or when ``journal`` (a JSON-lines file,
    one line per pass: the schedules re-measured, their rounds and medians, the winner)
    says the selection is done already (:func:`is_selected`).

    Returns:
        The last pass's selection, or None when nothing was re-measured (the log says why).
    """
    _check_args(top_k, rounds)
    if max_passes < 1:
        raise ValueError(f"finalize needs max_passes >= 1, got {max_passes}")
    logger = logger or get_logger("final_selection")
    target = target if isinstance(target, Target) else Target(target)
    found = _workload(database, mod)
    top = [] if found is None else database.get_top_k(found, top_k)
    if found is None or len(top) < 2:
        logger.info(
            "Final selection: %s; nothing to choose between",
            "no valid record" if not top else "one valid record",
        )
        return None
    if journal and is_selected(database, mod, journal):
        logger.info(
            "Final selection: done already (%s; the best, %s, was re-measured)",
            journal,
            _us(top[0].mean_run_sec),
        )
        return None
    workload = found
    first_key = measurement_key(top[0])
    remeasured: set[str] = set()
    selection: FinalSelection | None = None
    for n in range(max_passes):
        if n > 0:
            top = database.get_top_k(workload, top_k)
            if measurement_key(top[0]) in remeasured:
                break
            assert selection is not None  # set by the pass before
            choice = measurement_key(selection.best)
            above = top[
                : next((i for i, r in enumerate(top) if measurement_key(r) == choice), None)
            ]
            newcomers = [r for r in above if measurement_key(r) not in remeasured]
            top = [selection.best, *newcomers[: top_k - 1]]
            logger.info(
                "Final selection: a record not re-measured ranks first now (%s, timed once); "
                "re-measuring the %d that rank above the choice so far, with it",
                _us(newcomers[0].mean_run_sec),
                len(top) - 1,
            )
        selection = _select(top, target, rounds, builder, runner, as_module(mod))
        slowdown = _slowdown(selection)
        if slowdown >= CONDITIONS_CHANGED:
            _append_journal(journal, _entry(workload, n, selection, set()))
            logger.warning(
                "Final selection pass %d: every candidate ran at least %.1fx slower than "
                "tuning timed it (is the machine busier now?); these timings are not "
                "comparable with the database's, so none is committed and tuning's ranking "
                "stands. Tuning again with the same work_dir selects again",
                n + 1,
                slowdown,
            )
            break
        committed = _commit(database, selection)
        remeasured.update(committed)
        _append_journal(journal, _entry(workload, n, selection, committed))
        failed = len(top) - len(committed)
        best = selection.best
        logger.info(
            "Final selection pass %d: re-measured the best %d record(s), %d round(s) "
            "interleaved%s; the fastest is #%d: %s median (it ranked at %s before)",
            n + 1,
            len(top),
            rounds,
            f", {failed} failed (their tuning times are kept)" if failed else "",
            selection.best_index + 1,
            _us(selection.medians[selection.best_index]),
            _us(best.mean_run_sec),
        )
        if not committed:
            logger.warning("Final selection: every re-measurement failed; kept the tuning result")
            break
    else:
        top = database.get_top_k(workload, 1)
        if top and measurement_key(top[0]) not in remeasured:
            logger.warning(
                "Final selection: after %d passes the best record (%s) is still one timed "
                "once; tuning again with the same work_dir re-measures it",
                max_passes,
                _us(top[0].mean_run_sec),
            )
    if selection is not None and len(remeasured) > len(selection.records):
        _rank_choice_first(database, workload, selection, remeasured)
    final = database.get_top_k(workload, 1)
    if final and measurement_key(final[0]) in remeasured:
        _append_journal(
            journal,
            {
                "workload": str(workload.shash),
                "done": True,
                "best": measurement_key(final[0]),
                "best_secs": final[0].mean_run_sec,
                "schedules": len(_schedules(database, workload)),
            },
        )
    if final:
        changed = measurement_key(final[0]) != first_key
        logger.info(
            "Final selection: the best is %s%s",
            _us(final[0].mean_run_sec),
            " (a different schedule than tuning's first choice)" if changed else "",
        )
    return selection


# --------------------------------------------------------------------------- helpers
def _entry(workload: Workload, n: int, selection: FinalSelection, committed: set[str]) -> dict:
    """The journal line of one pass."""
    return {
        "workload": str(workload.shash),
        "pass": n + 1,
        "schedules_remeasured": [measurement_key(r) for r in selection.records],
        "tuning_secs": [r.mean_run_sec for r in selection.records],
        "round_secs": [[s if math.isfinite(s) else None for s in r] for r in selection.round_secs],
        "medians": [m if math.isfinite(m) else None for m in selection.medians],
        "best_index": selection.best_index,
        "committed": len(committed),
    }


def _rank_choice_first(
    database: Database, workload: Workload, selection: FinalSelection, remeasured: set[str]
) -> None:
    """After several passes: a schedule re-measured in an earlier pass that ranks above
    the final choice was not clearly faster than the choice of its pass (which the final
    choice kept, or beat clearly); its time and the choice's differ by the noise between
    passes. It is committed again with the choice's time, after it, so the database
    ranks the choice first (equal times keep commit order)."""
    choice = measurement_key(selection.best)
    ranked = database.get_top_k(workload, len(remeasured) + len(selection.records))
    position = next((i for i, r in enumerate(ranked) if measurement_key(r) == choice), None)
    if position is None:
        return
    secs = ranked[position].mean_run_sec
    for record in ranked[:position]:
        if measurement_key(record) in remeasured:
            database.commit_tuning_record(
                TuningRecord(record.trace, record.workload, [secs], record.target, record.args_info)
            )


def _check_args(top_k: int, rounds: int) -> None:
    if top_k < 1 or rounds < 1:
        raise ValueError(f"select_best needs top_k >= 1 and rounds >= 1, got {top_k}, {rounds}")


def _us(secs: float) -> str:
    return f"{secs * 1e6:.2f} us" if math.isfinite(secs) else "failed"


def _workload(database: Database, mod: IRModule) -> Workload | None:
    if not database.has_workload(mod):
        return None
    return database.commit_workload(mod)


class _components:
    """Builder and runner objects from objects or kinds; kinds made here are closed."""

    def __init__(self, builder: Builder | str, runner: Runner | str):
        self.created: list[Any] = []
        self.builder = self._make(builder, Builder)
        self.runner = self._make(runner, Runner)

    def _make(self, value: Any, cls: type) -> Any:
        if isinstance(value, str):
            value = cls.create(value)
            self.created.append(value)
        return value

    def __enter__(self) -> tuple[Builder, Runner]:
        return self.builder, self.runner

    def __exit__(self, *exc: Any) -> None:
        for component in self.created:
            close = getattr(component, "close", None)
            if close is not None:
                close()


def _select(
    records: list[TuningRecord],
    target: Target,
    rounds: int,
    builder: Builder,
    runner: Runner,
    mod: IRModule,
) -> FinalSelection:
    round_secs = _remeasure(records, target, rounds, builder, runner, mod)
    ahead = [j for j in range(1, len(records)) if _ahead(round_secs[j], round_secs[0])]
    if ahead:  # a change of the database's choice is confirmed by rounds of its own
        again = [0, *ahead]
        more = _remeasure([records[i] for i in again], target, rounds, builder, runner, mod)
        for i, secs in zip(again, more):
            round_secs[i] = round_secs[i] + secs
    medians = tuple(statistics.median(r) for r in round_secs)
    best = _winner(round_secs, medians)
    return FinalSelection(tuple(records), tuple(map(tuple, round_secs)), medians, best)


def _slowdown(selection: FinalSelection) -> float:
    """How many times slower than their tuning times the re-measured candidates ran, at
    the least (0 when none has both)."""
    ratios = [
        m / r.mean_run_sec
        for r, m in zip(selection.records, selection.medians)
        if math.isfinite(m) and math.isfinite(r.mean_run_sec) and r.mean_run_sec > 0
    ]
    return min(ratios, default=0.0)


def _ahead(challenger: list[float], current: list[float]) -> bool:
    """Whether the median per-round ratio puts ``challenger`` at least ``MIN_GAIN`` ahead
    of ``current`` (whether or not :func:`clearly_faster` holds)."""
    ratios = [a / b for a, b in zip(challenger, current) if math.isfinite(a) and math.isfinite(b)]
    return bool(ratios) and statistics.median(ratios) < 1 - MIN_GAIN


def _commit(database: Database, selection: FinalSelection) -> set[str]:
    """Commit the successful re-measurements (:attr:`FinalSelection.estimates`, the winner
    first); the measurement keys committed."""
    committed = set()
    estimates = selection.estimates
    best = selection.best_index
    order = [best] + [i for i in range(len(selection.records)) if i != best]  # ties: winner
    for i in order:
        record, secs = selection.records[i], estimates[i]
        if not math.isfinite(secs):
            continue
        database.commit_tuning_record(
            TuningRecord(record.trace, record.workload, [secs], record.target, record.args_info)
        )
        committed.add(measurement_key(record))
    return committed


def _remeasure(
    records: list[TuningRecord],
    target: Target,
    rounds: int,
    builder: Builder,
    runner: Runner,
    mod: IRModule,
) -> list[list[float]]:
    """Per record, its seconds in each round (``inf``: failed); see :func:`time_interleaved`.
    Each trace is replayed on ``mod``, the module selected for, never on the workload the
    database stored."""
    candidates = [r.as_measure_candidate(mod) for r in records]
    return time_interleaved(
        [(c.sch.mod, c.args_info) for c in candidates], target, rounds, builder, runner
    )


def time_interleaved(
    candidates: list[tuple[IRModule, list[ArgInfo]]],
    target: Target,
    rounds: int,
    builder: Builder,
    runner: Runner,
) -> list[list[float]]:
    """Per scheduled module (with its arguments), its seconds in each round (``inf``:
    failed). Each module is built once; every round runs each once, in
    :func:`interleaved_order`, all rounds submitted together so that the runner loads the
    next while it times one."""
    with Profiler.timeit("FinalSelection/Builder"):
        built = builder.build([BuilderInput(mod, target) for mod, _ in candidates])
    inputs: list[RunnerInput | None] = [
        RunnerInput(b.artifact_path, target.kind, args)
        if b.error_msg is None and b.artifact_path is not None
        else None
        for b, (_, args) in zip(built, candidates)
    ]
    secs: list[list[float]] = [[] for _ in candidates]
    try:
        order = [
            i
            for r in range(rounds)
            for i in interleaved_order(len(candidates), r)
            if inputs[i] is not None
        ]
        with Profiler.timeit("FinalSelection/Runner"):
            futures = runner.run([inputs[i] for i in order])  # type: ignore[misc]
            if len(futures) != len(order):
                raise ValueError(
                    f"{type(runner).__name__}.run returned {len(futures)} futures for "
                    f"{len(order)} inputs; it must return one per input"
                )
            for i, future in zip(order, futures):
                secs[i].append(_round_value(future.result()))
        for i, inp in enumerate(inputs):
            if inp is None:
                secs[i] = [float("inf")] * rounds
    finally:
        for b in built:
            remove_artifact(b.artifact_path)
    return secs
