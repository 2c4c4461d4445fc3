"""Applying an *anchor trace*: a schedule tuned on one fused subgraph, reused on another.

Two fused operators that share their main computation (a conv2d followed by ``relu`` in
one, by ``add`` then ``relu`` in the other) have the same *anchor block*
(:func:`~metaschedule.tir.analysis.find_anchor_block`). A trace tuned on one
of them schedules the anchor of the other too; only the element-wise blocks around it
differ. :func:`schedule_using_anchor_trace` transfers the trace:

1. blocks of ``sch`` that the trace never fetches are inlined into their consumer (or,
   failing that, into their producer) so that the fused graph looks like the one the
   trace was tuned on;
2. the trace is replayed with its decisions; an instruction that refers to a block
   ``sch`` does not have (or that depends on one) is skipped, and so is a failing
   instruction that does not touch the anchor block; a failure on the anchor block means
   the trace does not fit and raises;
3. blocks that could be neither inlined nor scheduled by the trace get a default CPU
   schedule: their outer spatial loops fused and parallelized, the innermost vectorized.

With ``adapt_decisions=True`` the trace may also come from an anchor of *other shapes*
(a sibling task: the same convolution at another size): a sampling decision that does not
fit this module is adapted instead of failing, a tile to the nearest perfect tiling of
the loop here (:func:`fit_tile`), any other decision sampled afresh. The structure of the
schedule (what is tiled, cached, fused, where) carries over; its sizes are fitted.

The approach follows TVM's ``schedule_using_anchor_trace``; the code is our own.
"""

from __future__ import annotations

from typing import Any

from .schedule import Schedule, Trace
from .schedule.error import ScheduleError
from .schedule.rv import RV, BlockRV
from .target import Target
from .tir.analysis import find_anchor_block
from .tir.functor import Visitor
from .tir.stmt import Block, For, IterType

__all__ = ["fit_tile", "schedule_using_anchor_trace"]

#: Most iterations a vectorized innermost loop of an uncovered block may have.
_MAX_VECTOR_EXTENT = 64


def schedule_using_anchor_trace(
    sch: Schedule, anchor_trace: Trace, target: Target, *, adapt_decisions: bool = False
) -> None:
    """Schedule ``sch`` with a trace tuned on another module that has the same anchor block.

    Args:
        sch: the schedule to transform (in place).
        anchor_trace: the trace tuned on the other module (post-processing included).
        target: the compilation target; its core count bounds the parallel loops of
            blocks that the trace does not cover.
        adapt_decisions: fit sampling decisions that do not fit this module (an anchor of
            other shapes) instead of failing (module docstring); an addition to TVM's.

    Raises:
        ValueError: ``sch`` has no anchor block, or the trace fails on the anchor block
            (the two modules do not share an anchor).
    """
    target = target if isinstance(target, Target) else Target(target)
    func_name = sch.func_working_on or "main"
    anchor = find_anchor_block(sch.mod[func_name])
    if anchor is None:
        raise ValueError("schedule_using_anchor_trace: the module has no anchor block")
    fetched = _fetched_block_names(anchor_trace)
    if anchor.name_hint not in fetched:
        raise ValueError(
            f"schedule_using_anchor_trace: the trace never fetches the anchor block "
            f"{anchor.name_hint!r} of this module; it fetches {sorted(fetched)}"
        )
    uncovered = _inline_unfetched(sch, func_name, fetched, anchor.name_hint)
    _replay_tolerantly(sch, anchor_trace, anchor.name_hint, adapt_decisions)
    for name in uncovered:
        _parallelize_vectorize(sch, name, func_name, target)


# ------------------------------------------------------------------------------ steps
def _fetched_block_names(trace: Trace) -> set[str]:
    return {
        str(inst.attrs[0]) for inst in trace.insts if inst.kind.name == "GetBlock" and inst.attrs
    }


def _inline_unfetched(sch: Schedule, func_name: str, fetched: set[str], anchor: str) -> list[str]:
    """Inline the blocks the trace does not know; return those that could not be."""
    uncovered: list[str] = []
    for name in _block_names(sch, func_name):
        if name in fetched or name == anchor:
            continue
        block = sch.get_block(name, func_name)
        for inline in (sch.compute_inline, sch.reverse_compute_inline):
            try:
                inline(block)
                break
            except ScheduleError:
                continue
        else:
            uncovered.append(name)
    return uncovered


def _replay_tolerantly(sch: Schedule, trace: Trace, anchor: str, adapt: bool = False) -> None:
    """Replay ``trace`` on ``sch``, skipping what does not apply to this module (and,
    with ``adapt``, fitting sampling decisions that do not fit it)."""
    present = set(_block_names(sch, sch.func_working_on or "main"))
    rv_map: dict[int, Any] = {}
    missing: set[int] = set()  # ids of the trace's RVs that have no counterpart here
    on_anchor: set[int] = set()  # ids of RVs derived from the anchor block
    for inst in trace.insts:
        rv_inputs = [x for x in inst.inputs if isinstance(x, RV)]
        if any(id(x) in missing for x in rv_inputs) or (
            inst.kind.name == "GetBlock" and str(inst.attrs[0]) not in present
        ):
            missing.update(id(o) for o in inst.outputs)
            continue
        touches_anchor = any(id(x) in on_anchor for x in rv_inputs) or (
            inst.kind.name == "GetBlock" and str(inst.attrs[0]) == anchor
        )
        inputs = [rv_map[id(x)] if isinstance(x, RV) else x for x in inst.inputs]
        decision = trace.decisions.get(inst)
        try:
            try:
                outputs = inst.kind.apply_to_schedule(sch, inputs, list(inst.attrs), decision)
            except ScheduleError:
                if not (adapt and inst.kind.has_decision and decision is not None):
                    raise
                outputs = _apply_adapted(sch, inst, inputs, decision)
        except ScheduleError as err:
            if touches_anchor:
                raise ValueError(
                    f"schedule_using_anchor_trace: {inst.kind.name} on the anchor block "
                    f"{anchor!r} failed: {err}"
                ) from err
            missing.update(id(o) for o in inst.outputs)
            continue
        for old, new in zip(inst.outputs, outputs):
            rv_map[id(old)] = new
            if touches_anchor:
                on_anchor.add(id(old))


def _apply_adapted(sch: Schedule, inst: Any, inputs: list, decision: Any) -> list:
    """Apply a sampling instruction whose decision does not fit: a tile fitted to the
    loop (:func:`fit_tile`), else a fresh sample (ScheduleError when neither applies)."""
    attrs = list(inst.attrs)
    if inst.kind.name == "SamplePerfectTile" and isinstance(decision, (list, tuple)):
        extent = _extent(sch, inputs[0])
        if extent is not None:
            limit = int(attrs[1]) if len(attrs) > 1 and int(attrs[1]) > 0 else extent
            fitted = fit_tile([int(x) for x in decision], extent, limit)
            try:
                return inst.kind.apply_to_schedule(sch, inputs, attrs, fitted)
            except ScheduleError:
                pass
    return inst.kind.apply_to_schedule(sch, inputs, attrs, None)


def fit_tile(factors: list[int], extent: int, max_innermost: int | None = None) -> list[int]:
    """The perfect tiling of ``extent`` into ``len(factors)`` factors nearest to
    ``factors``: from the innermost out, each factor becomes the divisor of what is left
    that is nearest to it (the smaller on a tie; the innermost at most ``max_innermost``),
    and the outermost takes the rest. ``fit_tile([2, 1, 1, 8], 32) == [4, 1, 1, 8]``."""
    left = extent
    out: list[int] = []
    for i, want in enumerate(reversed(factors[1:])):
        cap = left if i or max_innermost is None else min(left, max_innermost)
        divisors = [d for d in range(1, cap + 1) if left % d == 0]
        best = min(divisors, key=lambda d: (abs(d - want), d))
        out.append(best)
        left //= best
    return [left, *reversed(out)] if factors else []


def _parallelize_vectorize(sch: Schedule, name: str, func_name: str, target: Target) -> None:
    """A default CPU schedule for a block the trace does not cover (best effort)."""
    try:
        block = sch.get_block(name, func_name)
        loops = sch.get_loops(block)
    except ScheduleError:
        return  # the trace inlined or removed it after all
    spatial = _leading_spatial_loops(sch, block, loops)
    if not spatial:
        return
    inner = spatial[-1]
    inner_extent = _extent(sch, inner)
    if len(spatial) > 1 and inner_extent is not None and 1 < inner_extent <= _MAX_VECTOR_EXTENT:
        _try(sch.vectorize, inner)
        spatial = spatial[:-1]
    # Fuse outer loops until there is work for every core, then run them in parallel.
    outer: list = []
    work = 1
    for loop in spatial:
        outer.append(loop)
        work *= _extent(sch, loop) or 1
        if work >= target.num_cores:
            break
    fused = outer[0] if len(outer) == 1 else _try(sch.fuse, *outer)
    if fused is not None:
        _try(sch.parallel, fused)


# ------------------------------------------------------------------------------ helpers
class _BlockCollector(Visitor):
    def __init__(self) -> None:
        self.names: list[str] = []

    def visit_Block(self, block: Block) -> None:
        if block.iter_vars:
            self.names.append(block.name_hint)
        self.generic_visit(block)


def _block_names(sch: Schedule, func_name: str) -> list[str]:
    """Names of the non-root blocks of a function, in program order."""
    collector = _BlockCollector()
    collector.visit(sch.mod[func_name].body)
    return collector.names


def _leading_spatial_loops(sch: Schedule, block: BlockRV, loops: list) -> list:
    """The outermost loops that only data-parallel iterators of ``block`` use, in order."""
    stmt = sch.get(block)
    if any(iv.iter_type != IterType.DATA_PAR for iv in stmt.iter_vars):
        return []  # keep reductions serial: safe and rare among uncovered blocks
    out = []
    for loop in loops:
        node = sch.get(loop)
        if not isinstance(node, For):
            break
        out.append(loop)
    return out


def _extent(sch: Schedule, loop) -> int | None:
    extent = sch.get(loop).extent
    return int(extent.value) if hasattr(extent, "value") else None


def _try(fn, *args):
    try:
        return fn(*args)
    except ScheduleError:
        return None
