"""``AnalyticPrior``: the analytic estimate as a cost model, and the register tiles it
assumes (:func:`register_tiles`).

A scheduled module is lowered as the C code generator lowers it and planned by its own
passes and plan stage (:mod:`metaschedule.codegen.plan`): the loops it
writes are walked store by store (:func:`~.stores.store_cycles`), each with the register
tile and vectorized row the plan gives it; a reduction's init folded into its register
tile costs nothing.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np

from ...codegen.c_versioning import adds_tests
from ...codegen.plan import FunctionPlan, emitted_loops, plan_body
from ...feature_extractor.features.loop_nest import LoopNestWalker
from ...registry import register
from ...tir.function import IRModule, PrimFunc
from ...tir.stmt import Stmt
from ...tir.transform import lower
from ..base import CostModel
from .access import IndexMemo, is_init
from .machine import Machine
from .stores import store_cycles

if TYPE_CHECKING:
    from ...measure_candidate import MeasureCandidate
    from ...runner import RunnerResult

__all__ = ["AnalyticPrior", "register_tiles"]

#: the warm-up settings the prior took before they moved to the search strategy
_MOVED = frozenset(("oversample", "random_share", "refine_rounds"))


@register("cost_model", "analytic-prior")
class AnalyticPrior(CostModel):
    """Ranks CPU schedules by an analytic estimate of their run time (the package
    docstring): a :class:`CostModel` that learns nothing (``update`` is a no-op);
    ``predict`` gives ``1 / estimated seconds`` per candidate.

    It only scores. How a warming-up search uses it (how many random schedules it
    samples, refines and picks from) is the search's policy:
    :class:`~metaschedule.search_strategy.warm_up.WarmUpPolicy`.

    Args:
        machine: the CPU assumed; by default from the tuning context's target
            (:meth:`Machine.of_target`).

    Raises:
        TypeError: ``oversample``, ``random_share`` or ``refine_rounds`` given: they
            are ``EvolutionarySearch(warm_up=WarmUpPolicy(...))``'s now.
    """

    def __init__(self, *, machine: Machine | None = None, **moved: Any) -> None:
        if moved:
            known = sorted(set(moved) & _MOVED)
            if known:
                raise TypeError(
                    f"AnalyticPrior only scores: {', '.join(known)} moved to the search, "
                    f"EvolutionarySearch(warm_up=WarmUpPolicy({known[0]}=...)) "
                    "(metaschedule.search_strategy.WarmUpPolicy)"
                )
            raise TypeError(
                f"AnalyticPrior got an unexpected keyword argument {sorted(moved)[0]!r} "
                "(it takes machine= only)"
            )
        self.machine = machine
        self._cache: dict[int, tuple[Any, Machine, float]] = {}  # id(mod) -> (mod, m, score)
        self._indices: IndexMemo = {}  # simplified indices of the stores' accesses

    def clone(self) -> AnalyticPrior:
        """A copy with the same settings (of the same class) and empty caches."""
        twin = copy.copy(self)
        twin._cache = {}
        twin._indices = {}
        return twin

    def __str__(self) -> str:
        return "AnalyticPrior()" if self.machine is None else f"AnalyticPrior({self.machine})"

    # ---------------------------------------------------------------- CostModel interface
    def load(self, path: str) -> None:
        """Nothing to load: the prior has no parameters learned from data."""

    def save(self, path: str) -> None:
        """Nothing to save: the prior has no parameters learned from data."""

    def update(
        self, context: Any, candidates: list[MeasureCandidate], results: list[RunnerResult]
    ) -> None:
        """The prior does not learn."""

    def predict(self, context: Any, candidates: list[MeasureCandidate]) -> np.ndarray:
        """``1 / estimated seconds`` of each candidate (higher is better)."""
        machine = self.machine or Machine.of_target(getattr(context, "target", None))
        return np.array([self.score_mod(c.sch.mod, machine) for c in candidates], dtype=float)

    # ---------------------------------------------------------------- the estimate
    def score_mod(self, mod: IRModule | PrimFunc, machine: Machine | None = None) -> float:
        """``1 / estimated seconds`` of a scheduled (not lowered) module."""
        machine = machine or self.machine or Machine()
        hit = self._cache.get(id(mod))
        if hit is not None and hit[0] is mod and hit[1] == machine:
            return hit[2]
        cycles = self.estimate_cycles(mod, machine)
        score = machine.hz / cycles if cycles > 0 else 0.0
        if len(self._cache) > 8192:
            self._cache.clear()
        self._cache[id(mod)] = (mod, machine, score)
        return score

    def estimate_cycles(self, mod: IRModule | PrimFunc, machine: Machine) -> float:
        """Estimated cycles of one call of ``mod`` (the sum over its stores)."""
        funcs = [mod] if isinstance(mod, PrimFunc) else list(mod.functions.values())
        total = 0.0
        for func in funcs:
            plan, body = _planned(func, machine)
            walker = LoopNestWalker()
            walker.walk(body)
            versioned = adds_tests(body)
            tiled: set[Any] = set()  # buffers an update keeps in a register tile
            cycles: list[float | None] = [None] * len(walker.stores)
            for i, st in enumerate(walker.stores):
                if is_init(st):
                    continue  # (an init has no register tile) estimated below if it counts
                tiles: list[float] = []
                cycles[i] = store_cycles(st, machine, tiles, versioned, self._indices, plan)
                if tiles:
                    tiled.add(st.store.buffer)
            # a reduction's init is folded into its register tile (c_accumulate's
            # plan_init_fusion): the tile starts from the value in registers
            for i, st in enumerate(walker.stores):
                if cycles[i] is None and st.store.buffer not in tiled:
                    cycles[i] = store_cycles(st, machine, None, versioned, self._indices, plan)
            total += sum(c for c in cycles if c is not None)
        return total


def _planned(func: PrimFunc, machine: Machine) -> tuple[FunctionPlan, Stmt]:
    """The code generator's plan of ``func`` (lowered as the code generator lowers it) for
    ``machine``, and the loops it writes: the same passes and plan functions
    (:mod:`metaschedule.codegen.plan`), but versioning and init fusion, which the estimate
    prices itself (:func:`~metaschedule.codegen.c_versioning.adds_tests`, an init skipped
    where its reduction has a register tile)."""
    plan = plan_body(lower(func).body, machine.plan_context(), version_guards=False, inits=False)
    return plan, emitted_loops(plan)


def register_tiles(mod: IRModule | PrimFunc, machine: Machine | None = None) -> list[int]:
    """The register tiles the estimate assumes, in vectors (or scalars) of accumulators,
    one per store kept in registers: those the C code generator emits
    (:mod:`metaschedule.codegen.c_accumulate`) for a target of ``machine.lanes``."""
    funcs = [mod] if isinstance(mod, PrimFunc) else list(mod.functions.values())
    tiles: list[float] = []
    machine = machine or Machine()
    for func in funcs:
        plan, body = _planned(func, machine)
        walker = LoopNestWalker()
        walker.walk(body)
        versioned = adds_tests(body)
        for st in walker.stores:
            store_cycles(st, machine, tiles, versioned, None, plan)
    return [int(round(t)) for t in tiles]
