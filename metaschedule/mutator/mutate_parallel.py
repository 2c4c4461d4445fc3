"""``MutateParallel``: change how many outer loops of each block are fused and parallelised."""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from ..schedule import Instruction, Schedule, Trace
from ..schedule.rv import BlockRV
from ..tir.expr import IntImm, Var
from ..tir.functor import Visitor
from ..tir.stmt import IterType
from .base import (
    Mutator,
    annotation_samples,
    pre_postproc_insts,
    resample_categorical,
)

__all__ = ["PARALLEL_KEY", "MutateParallel"]

PARALLEL_KEY = "meta_schedule.parallel"


class MutateParallel(Mutator):
    """Mutates the parallel extent of a ``"meta_schedule.parallel"`` annotation (as TVM's).

    The annotation (on a block, usually the root) asks a postprocessor to fuse and
    parallelise, in each child block, the fewest outer data-parallel loops whose extents
    multiply to at least the annotated value. This mutator replays the trace, lists for
    each child block the products of its outer spatial loop extents, and so the distinct
    *plans* (how many loops each block fuses) reachable with a value up to
    ``max_parallel_extent = num_cores * max_jobs_per_core``; it then rewrites the
    annotation with the value of a plan other than the current one.

    Where the annotated value is a ``SampleCategorical`` output instead of a constant,
    that decision is resampled, as MutateUnroll does. What a replay finds is remembered
    per trace (:class:`~.base.ReplayMemo`).

    Args:
        max_jobs_per_core: parallel jobs per core; with the target's ``num_cores`` (or the
            TuneContext's ``num_threads``) it bounds the parallel extent.
    """

    def __init__(self, max_jobs_per_core: int):
        if not isinstance(max_jobs_per_core, int) or max_jobs_per_core < 1:
            raise ValueError(f"max_jobs_per_core must be a positive int, got {max_jobs_per_core!r}")
        self.max_jobs_per_core = max_jobs_per_core
        self.max_parallel_extent: int | None = None

    def _initialize_with_tune_context(self, context: Any) -> None:
        super()._initialize_with_tune_context(context)
        target = getattr(context, "target", None)
        cores = target.attrs.get("num_cores") if target is not None else None
        if cores is None:
            cores = getattr(context, "num_threads", 1)
        self.max_parallel_extent = int(cores) * self.max_jobs_per_core

    def apply(
        self, trace: Trace, rand_state: np.random.Generator | int | None = None
    ) -> Trace | None:
        rng = self._generator(rand_state)
        sampled = annotation_samples(trace, (PARALLEL_KEY,))
        constant = _constant_annotations(trace)
        if not sampled and not constant:
            return None
        pick = int(rng.integers(len(sampled) + len(constant)))
        if pick < len(sampled):
            return resample_categorical(trace, sampled[pick], rng)
        ann, block_name, func_name = constant[pick - len(sampled)]
        if self.max_parallel_extent is None:
            raise ValueError(
                "MutateParallel needs the target's core count: initialise it "
                "with a TuneContext first"
            )
        seed = int(rng.integers(2**31 - 1))
        max_extent = self.max_parallel_extent
        prods = self._replay_memo().get(
            trace,
            self._workload(),
            (block_name, func_name, max_extent),
            lambda: self._products(trace, seed, block_name, func_name, max_extent),
        )
        plans: dict[tuple[int, ...], int] = {}
        for prod in prods:
            for limit in prod:
                if limit <= self.max_parallel_extent:
                    plans.setdefault(fused_loops(prods, limit), limit)
        plans.pop(fused_loops(prods, int(ann.inputs[1])), None)
        if not plans:
            return None
        options = sorted(plans.items())  # deterministic order, as TVM's ordered map
        limit = options[int(rng.integers(len(options)))][1]
        return _replace_value(trace, ann, limit)

    def _products(
        self, trace: Trace, seed: int, block_name: str, func_name: str, limit: int
    ) -> list[list[int]]:
        """:func:`analyze_parallel` of ``trace`` replayed on the workload."""
        sch = Schedule(self._workload(), seed=seed, error_render_level="none")
        trace.apply_to_schedule(sch, remove_postproc=True)
        return analyze_parallel(sch, block_name, func_name, limit)


def _constant_annotations(trace: Trace) -> list[tuple[Instruction, str, str]]:
    """``Annotate(block, parallel, <int>)`` instructions whose block comes from GetBlock,
    with that block's name and function."""
    get_block: dict[int, Instruction] = {}
    out = []
    for inst in pre_postproc_insts(trace):
        if inst.kind.name == "GetBlock":
            get_block[id(inst.outputs[0])] = inst
        elif inst.kind.name == "Annotate" and inst.attrs[0] == PARALLEL_KEY:
            block, value = inst.inputs
            source = get_block.get(id(block)) if isinstance(block, BlockRV) else None
            if source is not None and isinstance(value, int) and not isinstance(value, bool):
                out.append((inst, source.attrs[0], source.attrs[1]))
    return out


class _Vars(Visitor):
    def __init__(self, out: set):
        self.out = out

    def visit_Var(self, node: Var) -> None:
        self.out.add(node)


def analyze_parallel(sch: Schedule, block_name: str, func_name: str, limit: int) -> list[list[int]]:
    """For each child block of ``block_name``: the prefix products (outermost first) of the
    constant extents of its outermost run of spatial loops, stopping at ``limit``."""
    state = sch.state
    scope = state.block_realize(func_name, block_name)
    children = state.child_block_realizes(scope)
    non_spatial: set[Var] = set()
    for realize in children:
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if iv.iter_type != IterType.DATA_PAR:
                _Vars(non_spatial).visit(value)
    results = []
    for realize in children:
        extents: list[int] = []
        for loop in state.loops_above(func_name, realize):
            if not isinstance(loop.extent, IntImm) or loop.loop_var in non_spatial:
                break
            extents.append(loop.extent.value)
        if not extents:
            continue
        prods, prod = [], 1
        for e in extents:
            prod *= e
            prods.append(prod)
            if prod >= limit:
                break
        results.append(prods)
    return results


def fused_loops(prods: list[list[int]], limit: int) -> tuple[int, ...]:
    """Per block: the fewest outer loops whose product reaches ``limit`` (all if none)."""
    out = []
    for p in prods:
        i = bisect.bisect_left(p, limit)
        out.append(min(i + 1, len(p)))
    return tuple(out)


def _replace_value(trace: Trace, ann: Instruction, value: int) -> Trace:
    new = Instruction(ann.kind, (ann.inputs[0], value), ann.attrs, ann.outputs)
    insts = [new if inst is ann else inst for inst in pre_postproc_insts(trace)]
    decisions = {i: trace.decisions[i] for i in insts if i in trace.decisions}
    return Trace(tuple(insts), decisions)
