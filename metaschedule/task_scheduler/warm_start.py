"""``WarmStart``: schedules a task measures before its search's own picks (not in TVM).

A search that starts from random samples spends its first rounds finding what a hand
schedule knows. A warm start puts two kinds of schedules first in a task's batches:

1. *initial schedules*: a function of the task's TuneContext gives schedules of its
   workload (``tune_relax`` gives the default schedule that ``compile_relax`` uses
   without a record); they go into the task's first batch;
2. *anchor traces*: once a sibling task (one whose anchor block has the same name and
   iteration kinds, :func:`~metaschedule.tir.analysis.find_anchor_block`) has a best
   record, its trace is applied to the task with
   :func:`~metaschedule.trace_apply.schedule_using_anchor_trace`, sampling decisions
   fitted to the task's shapes; each new best of a sibling is tried once. A trace that
   does not apply is dropped quietly (a debug log line).

Each such schedule is measured as a trace of the task's workload: its instructions
replayed on the workload with the space's postprocessors (as the search replays
database records), else exactly as given; a schedule that no trace of the workload
reproduces (e.g. its function was rewritten before scheduling) is skipped, with an info
log line saying so. Once measured, the records are in the database, where the
evolutionary search draws its initial population from (``init_measured_ratio``), as in
TVM. A schedule already measured (its trace, by :func:`~..search_strategy.base.trace_key`)
or queued (its module) is not measured again, and warm-start schedules take at most
``max_share`` of a batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..arg_info import ArgInfo
from ..measure_candidate import MeasureCandidate
from ..profiler import Profiler
from ..schedule import Schedule
from ..search_strategy.base import TraceReplayer, trace_key
from ..tir.analysis import find_anchor_block
from ..tir.function import IRModule
from ..tir.structural import structural_equal
from ..trace_apply import schedule_using_anchor_trace

if TYPE_CHECKING:
    from ..tune_context import TuneContext
    from .base import TaskScheduler

__all__ = ["InitialSchedules", "WarmStart"]

#: a task's initial schedules, from its TuneContext
InitialSchedules = Callable[["TuneContext"], Sequence[Schedule]]


@dataclass
class _TaskStart:
    """What the warm start knows of one task during a run."""

    kind: Any = None  # the anchor block's name and iteration kinds; None: no anchor
    tried: set[str] = field(default_factory=set)  # trace keys measured or queued
    mods: list[IRModule] = field(default_factory=list)  # the modules queued
    pending: list[MeasureCandidate] = field(default_factory=list)
    initial_done: bool = False
    siblings_seen: dict[int, str] = field(default_factory=dict)  # task id -> best's key
    replayer: TraceReplayer | None = None


class WarmStart:
    """Initial schedules and sibling anchor traces first in a task's batches (module doc).

    Args:
        initial_schedules: gives the schedules of a task's workload that its first batch
            measures (e.g. its default schedule); None: none.
        anchor_traces: try each sibling task's best trace on the task.
        max_share: the largest share of a batch that warm-start schedules take (at least
            one); the rest wait for the task's next batch.
    """

    def __init__(
        self,
        initial_schedules: InitialSchedules | None = None,
        *,
        anchor_traces: bool = True,
        max_share: float = 0.5,
    ) -> None:
        if initial_schedules is not None and not callable(initial_schedules):
            raise TypeError(
                f"WarmStart: initial_schedules must be a function of a TuneContext, "
                f"got {initial_schedules!r}"
            )
        if not 0.0 < float(max_share) <= 1.0:
            raise ValueError(f"WarmStart: max_share must be in (0, 1], got {max_share!r}")
        self.initial_schedules = initial_schedules
        self.anchor_traces = bool(anchor_traces)
        self.max_share = float(max_share)
        self._tasks: list[_TaskStart | None] = []
        self._kinds: list[Any] = []

    def start(self, scheduler: TaskScheduler) -> None:
        """Forget the last run: called when ``scheduler`` starts tuning."""
        self._tasks = [None] * len(scheduler.tasks)
        self._kinds = [_anchor_kind(t.ctx) if self.anchor_traces else None for t in scheduler.tasks]

    def batch(
        self, scheduler: TaskScheduler, task_id: int, candidates: list[MeasureCandidate]
    ) -> list[MeasureCandidate]:
        """The batch of ``task_id``: its waiting warm-start schedules first, then the
        search's ``candidates``, at most ``num_trials_per_iter`` in all."""
        if len(self._tasks) != len(scheduler.tasks):
            self.start(scheduler)
        state = self._state(scheduler, task_id)
        ctx = scheduler.tasks[task_id].ctx
        with Profiler.timeit("TaskScheduler/WarmStart"):
            if not state.initial_done:
                state.initial_done = True
                self._queue_initial(state, ctx)
            if self.anchor_traces and state.kind is not None:
                self._queue_anchors(scheduler, task_id, state)
        size = max(1, scheduler.num_trials_per_iter)
        take = min(len(state.pending), max(1, int(size * self.max_share)))
        first, state.pending = state.pending[:take], state.pending[take:]
        return first + candidates[: max(0, size - take)]

    # ------------------------------------------------------------------ the sources
    def _queue_initial(self, state: _TaskStart, ctx: TuneContext) -> None:
        if self.initial_schedules is None:
            return
        try:
            schedules = list(self.initial_schedules(ctx))
        except Exception as err:  # noqa: BLE001 - a warm start is best effort
            ctx.logger.info("Warm start: no initial schedule (%s: %s)", type(err).__name__, err)
            return
        queued = 0
        for sch in schedules:
            fresh = Schedule(ctx.mod)
            try:
                sch.trace.apply_to_schedule(fresh, remove_postproc=False)
                same = structural_equal(fresh.mod, sch.mod)
            except Exception as err:  # noqa: BLE001 - reported below as "not a trace"
                same, why = False, f"{type(err).__name__}: {err}"
            else:
                why = "its trace builds another module from the workload"
            if not same:
                ctx.logger.info(
                    "Warm start: an initial schedule is not a trace of the workload (%s): "
                    "its function was rewritten before scheduling (as the default schedule "
                    "packs a convolution's weight at compile time); skipped",
                    why,
                )
                continue
            queued += self._queue(state, ctx, fresh)
        ctx.logger.info("Warm start: %d initial schedule(s) queued", queued)

    def _queue_anchors(self, scheduler: TaskScheduler, task_id: int, state: _TaskStart) -> None:
        database = scheduler.database
        if database is None:
            return
        ctx = scheduler.tasks[task_id].ctx
        for j, sibling in enumerate(scheduler.tasks):
            if j == task_id or self._kinds[j] != state.kind:
                continue
            record = database.query_tuning_record(sibling.ctx.mod, sibling.ctx.target)
            if record is None:
                continue
            key = trace_key(record.trace)
            if state.siblings_seen.get(j) == key:
                continue
            state.siblings_seen[j] = key
            sch = Schedule(ctx.mod, error_render_level="none")
            try:
                schedule_using_anchor_trace(sch, record.trace, ctx.target, adapt_decisions=True)
            except Exception as err:  # noqa: BLE001 - an anchor that does not fit
                ctx.logger.debug(
                    "Warm start: the best trace of task #%d %r does not apply (%s: %s)",
                    j,
                    sibling.name,
                    type(err).__name__,
                    err,
                )
                continue
            if self._queue(state, ctx, sch):
                ctx.logger.info(
                    "Warm start: the best trace of sibling task #%d %r queued", j, sibling.name
                )

    def _queue(self, state: _TaskStart, ctx: TuneContext, sch: Schedule) -> int:
        """Queue ``sch`` replayed with the space's postprocessors (else as it is) unless
        its trace was tried; 1 if queued."""
        if state.replayer is None:
            postprocs = list(getattr(ctx.space_generator, "postprocs", None) or [])
            state.replayer = TraceReplayer(ctx.mod, postprocs)
        replayed = state.replayer(sch.trace, 0)
        chosen = replayed if replayed is not None else sch
        key = trace_key(chosen.trace)
        if key in state.tried or any(structural_equal(m, chosen.mod) for m in state.mods):
            return 0  # another trace of a module queued already counts too
        state.tried.add(key)
        state.mods.append(chosen.mod)
        state.pending.append(MeasureCandidate(chosen, ArgInfo.from_entry_func(chosen.mod)))
        return 1

    def _state(self, scheduler: TaskScheduler, task_id: int) -> _TaskStart:
        state = self._tasks[task_id]
        if state is None:
            ctx = scheduler.tasks[task_id].ctx
            state = self._tasks[task_id] = _TaskStart(kind=self._kinds[task_id])
            database = scheduler.database
            if database is not None and database.has_workload(ctx.mod):
                shash = database.commit_workload(ctx.mod).shash
                state.tried.update(
                    trace_key(r.trace)
                    for r in database.get_all_tuning_records()
                    if r.workload.shash == shash
                )
        return state

    def __repr__(self) -> str:
        return (
            f"WarmStart(initial_schedules={getattr(self.initial_schedules, '__name__', None)}, "
            f"anchor_traces={self.anchor_traces}, max_share={self.max_share})"
        )


def _anchor_kind(ctx: TuneContext) -> Any:
    """The anchor block's name and iteration kinds, or None."""
    block = find_anchor_block(ctx.mod) if ctx.mod is not None else None
    if block is None:
        return None
    return block.name_hint, tuple(iv.iter_type for iv in block.iter_vars)
