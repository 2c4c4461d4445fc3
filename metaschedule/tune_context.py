"""``TuneContext``: everything one tuning task needs, in one place.

A context holds the workload, the target, the space generator and the search strategy of
a task, its logger and its random state. Creating it initialises the space generator and
then the search strategy with it; the tuning methods delegate to them.

Randomness: ``rand_state`` is the task's seed (-1 draws one from the OS) and ``rng`` a
``numpy.random.Generator`` seeded with it. Components fork their own streams from it with
:meth:`fork_seed` when they are initialised, so a task with a fixed ``rand_state`` is
reproducible.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Literal

import numpy as np

from .cost_model.random_model import RandomModel
from .database import MemoryDatabase
from .measure_candidate import MeasureCandidate
from .search_strategy import EvolutionarySearch, SearchStrategy
from .space_generator import SpaceGenerator
from .target import Target, host_cpu_info
from .tir.function import IRModule, PrimFunc, as_module
from .utils import cpu_count, deferred_full_collections

if TYPE_CHECKING:
    from .cost_model.base import CostModel
    from .database import Database
    from .runner import RunnerResult
    from .schedule import Schedule

__all__ = ["TuneContext"]

_MAX_SEED = 2**31 - 1


class TuneContext:
    """The resources of one tuning task.

    Args:
        mod: the workload (a PrimFunc becomes the module's ``main``; a module with one
            function gets it renamed ``main``).
        target: the target, or a string for ``Target(...)``.
        space_generator: a SpaceGenerator, a schedule function, or a kind
            ("post-order-apply", "union").
        search_strategy: a SearchStrategy or a kind ("evolutionary", "replay-trace",
            "replay-func"); None leaves the task without one.
        task_name: the task's name (also the default logger's).
        rand_state: the seed, an int in [0, 2**31 - 1); -1 draws one from the OS.
        num_threads: threads for the search: a count, "physical" or "logical" cores.
        logger: the task's logger; default ``logging.getLogger("metaschedule.task.<name>")``.
    """

    def __init__(
        self,
        mod: IRModule | PrimFunc | None = None,
        *,
        target: Target | str | None = None,
        space_generator: SpaceGenerator.SpaceGeneratorType | None = None,
        search_strategy: SearchStrategy.SearchStrategyType | None = None,
        task_name: str = "main",
        rand_state: int = -1,
        num_threads: int | Literal["physical", "logical"] = "physical",
        logger: logging.Logger | None = None,
    ) -> None:
        self.mod = None if mod is None else _normalize_mod(mod)
        if target is not None and not isinstance(target, Target):
            target = Target(target)
        self.target: Target | None = target
        if space_generator is not None and not isinstance(space_generator, SpaceGenerator):
            space_generator = SpaceGenerator.create(space_generator)
        if search_strategy is not None and not isinstance(search_strategy, SearchStrategy):
            search_strategy = SearchStrategy.create(search_strategy)
        self.space_generator: SpaceGenerator | None = space_generator
        self.search_strategy: SearchStrategy | None = search_strategy
        self.task_name = task_name
        self.rand_state = _normalize_seed(rand_state)
        self.rng = np.random.default_rng(self.rand_state)
        self.num_threads = _normalize_threads(num_threads)
        if logger is not None and not isinstance(logger, logging.Logger):
            raise TypeError(f"logger must be a logging.Logger, got {logger!r}")
        self.logger = logger or logging.getLogger(f"metaschedule.task.{task_name}")
        self._initialize()

    def _initialize(self) -> None:
        # The space generator first: it fills in the postprocessors and mutators that the
        # search strategy reads.
        if self.space_generator is not None:
            self.space_generator._initialize_with_tune_context(self)
        if self.search_strategy is not None:
            self.search_strategy._initialize_with_tune_context(self)

    def fork_seed(self) -> int:
        """A seed for an independent random stream, drawn from this context's ``rng``."""
        return int(self.rng.integers(_MAX_SEED))

    # ------------------------------------------------------------------------ delegation
    def generate_design_space(self) -> list[Schedule]:
        """The design spaces of ``mod`` from the space generator."""
        if self.mod is None:
            raise ValueError("TuneContext has no mod: pass the workload as TuneContext(mod)")
        if self.space_generator is None:
            raise ValueError("TuneContext has no space_generator to generate design spaces")
        return self.space_generator.generate_design_space(self.mod)

    def pre_tuning(
        self,
        max_trials: int,
        num_trials_per_iter: int = 64,
        design_spaces: list[Schedule] | None = None,
        database: Database | None = None,
        cost_model: CostModel | None = None,
    ) -> None:
        """Prepare the search strategy to tune (delegated to it).

        Args:
            design_spaces: default: :meth:`generate_design_space`.
            database: default for EvolutionarySearch: a fresh memory database.
            cost_model: default for EvolutionarySearch: a RandomModel seeded from this
                context.
        """
        strategy = self._strategy()
        if design_spaces is None:
            design_spaces = self.generate_design_space()
        if isinstance(strategy, EvolutionarySearch):
            if database is None:
                database = MemoryDatabase()
            if cost_model is None:
                cost_model = RandomModel(seed=self.fork_seed())
        strategy.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, cost_model)

    def post_tuning(self) -> None:
        """Let the search strategy clean up (delegated to it)."""
        self._strategy().post_tuning()

    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        """The next batch of candidates, None when the search is over (delegated; no full
        garbage collection meanwhile: :func:`~metaschedule.utils.deferred_full_collections`)."""
        with deferred_full_collections():
            return self._strategy().generate_measure_candidates()

    def notify_runner_results(
        self, measure_candidates: list[MeasureCandidate], results: list[RunnerResult]
    ) -> None:
        """Tell the search strategy what was measured (delegated)."""
        if len(measure_candidates) != len(results):
            raise ValueError(
                f"notify_runner_results: {len(measure_candidates)} candidates but "
                f"{len(results)} results; pass one result per candidate"
            )
        self._strategy().notify_runner_results(measure_candidates, results)

    def clone(self) -> TuneContext:
        """An independent context: cloned space generator and search strategy, and a
        ``rand_state`` forked from this one."""
        return TuneContext(
            self.mod,
            target=self.target,
            space_generator=None if self.space_generator is None else self.space_generator.clone(),
            search_strategy=None if self.search_strategy is None else self.search_strategy.clone(),
            task_name=self.task_name,
            rand_state=self.fork_seed(),
            num_threads=self.num_threads,
            logger=self.logger,
        )

    def _strategy(self) -> SearchStrategy:
        if self.search_strategy is None:
            raise ValueError(f"TuneContext {self.task_name!r} has no search_strategy")
        return self.search_strategy

    def __repr__(self) -> str:
        return (
            f"TuneContext(task_name={self.task_name!r}, target={self.target}, "
            f"space_generator={self.space_generator}, "
            f"search_strategy={self.search_strategy}, rand_state={self.rand_state})"
        )


def _normalize_mod(mod: IRModule | PrimFunc) -> IRModule:
    if not isinstance(mod, (IRModule, PrimFunc)):
        raise TypeError(
            f"TuneContext mod must be an IRModule or a PrimFunc, got {type(mod).__name__}"
        )
    mod = as_module(mod)
    if len(mod) == 1 and "main" not in mod:  # as TVM: a single function is the entry
        mod = IRModule({"main": mod[next(iter(mod))]})
    return mod


def _normalize_seed(rand_state: int) -> int:
    if isinstance(rand_state, bool) or not isinstance(rand_state, (int, np.integer)):
        raise TypeError(f"rand_state must be an int, got {rand_state!r}")
    if rand_state == -1:
        return int.from_bytes(os.urandom(4), "little") % _MAX_SEED
    if not 0 <= rand_state < _MAX_SEED:
        raise ValueError(f"rand_state must be -1 or in [0, 2**31 - 1), got {rand_state}")
    return int(rand_state)


def _normalize_threads(num_threads: int | str) -> int:
    if num_threads == "physical":
        return max(1, min(host_cpu_info().physical_cores, cpu_count()))
    if num_threads == "logical":
        return cpu_count()
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(
            f"num_threads must be a positive int, 'physical' or 'logical', got {num_threads!r}"
        )
    return num_threads
