"""The search strategy interface: draw measure candidates from design spaces.

The tuning loop calls, per task: ``pre_tuning`` once, then ``generate_measure_candidates``
(None means the task is done) and ``notify_runner_results`` with what was measured, until
done, then ``post_tuning``. Shared pieces of the built-in strategies live here too: binding
to a TuneContext and replaying traces with the postprocessors.
"""

from __future__ import annotations

import contextlib
import json
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Union

import numpy as np

from .. import registry
from ..arg_info import ArgInfo
from ..measure_candidate import MeasureCandidate
from ..profiler import Profiler
from ..schedule import Schedule, ScheduleError, Trace

if TYPE_CHECKING:
    from ..cost_model.base import CostModel
    from ..database import Database
    from ..mutator import Mutator
    from ..postproc import Postproc
    from ..runner import RunnerResult
    from ..tir.function import IRModule

__all__ = ["PySearchStrategy", "SearchStrategy", "TraceReplayer", "create", "trace_key"]


class SearchStrategy(ABC):
    """Generates measure candidates from design spaces, learning from measurements."""

    SearchStrategyType = Union[
        "SearchStrategy", Literal["replay-func", "replay-trace", "evolutionary"]
    ]

    def _initialize_with_tune_context(self, context: Any) -> None:
        """Read what the strategy needs from its TuneContext. Default: nothing."""

    @abstractmethod
    def pre_tuning(
        self,
        max_trials: int,
        num_trials_per_iter: int,
        design_spaces: list[Schedule],
        database: Database | None = None,
        cost_model: CostModel | None = None,
    ) -> None:
        """Prepare to tune: at most ``max_trials`` candidates, ``num_trials_per_iter`` per
        batch, drawn from ``design_spaces``."""

    def post_tuning(self) -> None:
        """Clean up after tuning. Default: nothing."""

    @abstractmethod
    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        """The next batch of candidates to measure, or None when the search is over."""

    @abstractmethod
    def notify_runner_results(
        self, measure_candidates: list[MeasureCandidate], results: list[RunnerResult]
    ) -> None:
        """Learn that ``measure_candidates`` were measured with ``results`` (same order)."""

    @abstractmethod
    def clone(self) -> SearchStrategy:
        """A fresh strategy with the same settings and no tuning state."""

    @staticmethod
    def create(
        kind: Literal["evolutionary", "replay-trace", "replay-func"] | str = "evolutionary",
        *args: Any,
        **kwargs: Any,
    ) -> SearchStrategy:
        """Create a search strategy: "evolutionary", "replay-trace", "replay-func" (or
        another registered kind, see :mod:`metaschedule.registry`).

        Raises:
            ValueError: an unknown kind (the message lists the known ones).
        """
        return registry.create("search_strategy", kind, *args, **kwargs)

    def __str__(self) -> str:
        return type(self).__name__


class PySearchStrategy(SearchStrategy):
    """The base for search strategies written by users (TVM's name; no FFI here).

    Subclass it, decorate with ``@derived_object`` and implement ``pre_tuning``,
    ``generate_measure_candidates``, ``notify_runner_results`` and ``clone`` (optionally
    ``_initialize_with_tune_context`` and ``post_tuning``).
    """


create = SearchStrategy.create


# ----------------------------------------------------------------------------- shared parts


def trace_key(trace: Trace) -> str:
    """A string naming the schedule a trace builds: its simplified instructions and
    decisions without post-processing. Equal keys replay to equal modules."""
    return json.dumps(trace.simplified(remove_postproc=True).as_json(), separators=(",", ":"))


def _decision_key(decision: Any) -> Any:
    """A decision as a hashable value (a tile's factors are a list)."""
    return tuple(decision) if isinstance(decision, list) else decision


def timed(name: str) -> contextlib.AbstractContextManager:
    """Time a phase of the search as ``name`` in the entered Profilers."""
    return Profiler.timeit(name)


def random_seed(rng: np.random.Generator) -> int:
    """A seed for a Schedule, drawn from ``rng``."""
    return int(rng.integers(2**31 - 1))


class TraceReplayer:
    """Replays traces on the workload and runs the postprocessors, counting failures.

    A replay that raises ``ValueError`` (``ScheduleError`` included: a decision that does
    not fit) or a postprocessor that returns False or raises ``ScheduleError`` is a
    failure: the result is None and ``failures`` counts it by cause.

    The instructions of a trace before its first sampling instruction use no randomness
    and decide nothing, so every replay of the same design space repeats them on the
    same module: the schedule they make is kept (by the identity of those instructions,
    at most ``max_prefixes`` of them) and copied by later replays. A replay from a kept
    prefix is the same as a replay from scratch: same module, same trace.

    Likewise, while a replay has drawn no random number (its sampling instructions carry
    their decisions, as a mutant's do), the schedule before each sampling instruction is
    kept (by the identities of the instructions so far and the decisions among them, at
    most ``max_snapshots``, the oldest dropped first); a later replay of the same
    instructions with the same decisions (another mutant of the same parent) resumes
    from the latest one.
    """

    #: deterministic trace prefixes kept (a bound on memory; 0 replays every trace whole)
    max_prefixes: int = 64
    #: schedules kept before the sampling instructions of replays that drew no random
    #: number (a bound on memory; 0 keeps none)
    max_snapshots: int = 1024

    def __init__(self, mod: IRModule, postprocs: list[Postproc]):
        self.mod = mod
        self.postprocs = list(postprocs)
        self.failures: Counter[str] = Counter()
        # ids of a prefix's instructions -> (those instructions, the schedule after them,
        # the map of the prefix's random variables to the schedule's)
        self._prefixes: dict[tuple[int, ...], tuple[tuple, Schedule | None, dict[int, Any]]] = {}
        # (ids of instructions and decisions before a sampling instruction) -> (those
        # instructions, the schedule there, the map of the trace's random variables)
        self._snapshots: dict[Any, tuple[tuple, Schedule, dict[int, Any]]] = {}
        self.snapshot_hits = 0  # replays resumed from a snapshot

    def __call__(self, trace: Trace, seed: int) -> Schedule | None:
        """``trace`` replayed (post-processing removed; missing decisions sampled with
        ``seed``) on a fresh schedule of the workload, then post-processed."""
        try:
            with Profiler.timeit("Search/TraceReplay"):
                sch = self.replay(trace, seed)
        except ValueError as err:
            self.failures[f"replay: {type(err).__name__}"] += 1
            return None
        with Profiler.timeit("Search/Postproc"):
            ok = self.apply_postprocs(sch)
        return sch if ok else None

    def replay(self, trace: Trace, seed: int) -> Schedule:
        """``trace`` without post-processing replayed on a fresh schedule of the workload
        seeded with ``seed`` (``ValueError`` when it does not fit)."""
        insts = trace._kept(remove_postproc=True)
        cut = next((i for i, inst in enumerate(insts) if inst.kind.has_decision), len(insts))
        hit = self._prefix(trace, insts[:cut]) if cut and self.max_prefixes > 0 else None
        if hit is None:
            sch = Schedule(self.mod, seed=seed, error_render_level="none")
            trace.apply_insts_to_schedule(sch, insts, {})
            return sch
        sch, rv_map = hit
        sch.seed(seed)
        if self.max_snapshots <= 0:
            trace.apply_insts_to_schedule(sch, insts[cut:], rv_map)
            return sch
        return self._replay_decided(trace, insts, cut, sch, rv_map)

    def _replay_decided(
        self, trace: Trace, insts: tuple, cut: int, sch: Schedule, rv_map: dict[int, Any]
    ) -> Schedule:
        """Replay ``insts[cut:]`` on ``sch`` (the kept prefix's copy), resuming from the
        latest kept snapshot of the same instructions with the same decisions, and keeping
        snapshots before the sampling instructions of this replay while no random number
        was drawn (then the schedule there does not depend on the seed)."""
        # the positions a snapshot may be kept at, and their keys: the instructions (by
        # identity) and the decisions of the sampling ones before them
        keys: list[tuple[int, Any]] = []
        key: Any = tuple(map(id, insts[:cut]))
        for k in range(cut, len(insts)):
            inst = insts[k]
            if inst.kind.has_decision:
                keys.append((k, key))
                decision = trace.decisions.get(inst)
                if decision is None:
                    break  # drawn at random from here on: nothing to keep
                key = (key, id(inst), _decision_key(decision))
            else:
                key = (key, id(inst))
        start = cut
        for k, key in reversed(keys):
            kept = self._snapshots.get(key)
            if kept is not None and k > cut:
                seed = sch._rand_state
                sch, rv_map = kept[1].copy(), dict(kept[2])
                sch._rand_state = seed
                start = k
                self.snapshot_hits += 1
                break
        fresh = sch._rand_state
        for k, key in keys:
            if k <= start:
                continue
            trace.apply_insts_to_schedule(sch, insts[start:k], rv_map)
            start = k
            if sch._rand_state != fresh:
                break  # a draw without a decision: later schedules depend on the seed
            if key not in self._snapshots:
                if len(self._snapshots) >= self.max_snapshots:  # the oldest goes
                    del self._snapshots[next(iter(self._snapshots))]
                self._snapshots[key] = (insts[:k], sch.copy(), dict(rv_map))  # keeps ids alive
        trace.apply_insts_to_schedule(sch, insts[start:], rv_map)
        return sch

    def _prefix(self, trace: Trace, prefix: tuple) -> tuple[Schedule, dict[int, Any]] | None:
        """A copy of the schedule made by replaying ``prefix`` and the map of its random
        variables, or None for a prefix that draws random numbers (never kept)."""
        key = tuple(map(id, prefix))
        if key not in self._prefixes:
            fresh = Schedule(self.mod, seed=0, error_render_level="none")
            before = fresh._rand_state
            rv_map: dict[int, Any] = {}
            trace.apply_insts_to_schedule(fresh, prefix, rv_map)
            if len(self._prefixes) >= self.max_prefixes:
                self._prefixes.clear()
            # a user-defined kind may draw without a decision: such a prefix is not kept
            drew = fresh._rand_state != before
            self._prefixes[key] = (prefix, None if drew else fresh, rv_map)  # keeps ids alive
        _, kept, rv_map = self._prefixes[key]
        return None if kept is None else (kept.copy(), dict(rv_map))

    def apply_postprocs(self, sch: Schedule) -> bool:
        """Enter post-processing on ``sch`` and run every postprocessor; False on failure."""
        sch.enter_postproc()
        for postproc in self.postprocs:
            try:
                ok = postproc.apply(sch)
            except ScheduleError:
                ok = False
            if not ok:
                self.failures[str(postproc)] += 1
                return False
        return True

    def summary(self) -> str:
        if not self.failures:
            return "no failures"
        return ", ".join(f"{cause}: {n}" for cause, n in self.failures.most_common())


class ContextBound:
    """What the built-in strategies take from their TuneContext."""

    context: Any = None

    def _bind(self, context: Any) -> None:
        if getattr(context, "mod", None) is None:
            raise ValueError(
                f"{type(self).__name__} needs a TuneContext with a mod (the workload to tune)"
            )
        space = getattr(context, "space_generator", None)
        self.context = context
        self.mod: IRModule = context.mod
        self.postprocs: list[Postproc] = list(getattr(space, "postprocs", None) or [])
        self.mutator_probs: dict[Mutator, float] = dict(getattr(space, "mutator_probs", None) or {})
        self.rng = np.random.default_rng(context.fork_seed())

    def _check_bound(self) -> None:
        if self.context is None:
            raise ValueError(
                f"{type(self).__name__} is not initialised: create it through "
                "TuneContext(search_strategy=...), which initialises it"
            )

    def _check_pre_tuning(self, started: bool, design_spaces: list) -> None:
        """The checks at the start of ``pre_tuning``: bound to a context, not ``started``
        already, and at least one design space, all Schedules."""
        self._check_bound()
        if started:
            raise ValueError("pre_tuning was already called without a matching post_tuning")
        if not design_spaces:
            raise ValueError("pre_tuning needs at least one design space, got none")
        bad = [s for s in design_spaces if not isinstance(s, Schedule)]
        if bad:
            raise TypeError(f"design spaces must be Schedules, got {bad[0]!r}")

    def _candidates(self, schs: list[Schedule]) -> list[MeasureCandidate]:
        # From the scheduled module, as TVM: a postprocessor may change the parameters.
        return [MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod)) for sch in schs]

    def _log(self, level: int, msg: str, *args) -> None:
        logger = getattr(self.context, "logger", None)
        if logger is not None:
            logger.log(level, msg, *args)


@dataclass
class TrialWindow:
    """The trials of the next batch, ``[st, ed)``, within ``max_trials`` (TVM's counters)."""

    max_trials: int
    num_trials_per_iter: int
    st: int = 0
    ed: int = 0

    def __post_init__(self):
        if not isinstance(self.max_trials, int) or self.max_trials < 0:
            raise ValueError(f"max_trials must be a non-negative int, got {self.max_trials!r}")
        if not isinstance(self.num_trials_per_iter, int) or self.num_trials_per_iter < 1:
            raise ValueError(
                f"num_trials_per_iter must be a positive int, got {self.num_trials_per_iter!r}"
            )
        self.ed = self.st + self.num_trials_per_iter

    def next_batch(self) -> int:
        """How many candidates the next batch has; 0 once ``max_trials`` are done."""
        if self.st >= self.max_trials:
            return 0
        self.ed = min(self.ed, self.max_trials)
        return self.ed - self.st

    def advance(self, n: int) -> None:
        """``n`` candidates were measured."""
        self.st += n
        self.ed += n
