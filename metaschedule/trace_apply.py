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

__all__ = ["schedule_using_anchor_trace"]

#: Most iterations a vectorized innermost loop of an uncovered block may have.
_MAX_VECTOR_EXTENT = 64


def schedule_using_anchor_trace(sch: Schedule, anchor_trace: Trace, target: Target) -> None:
    """Schedule ``sch`` with a trace tuned on another module that has the same anchor block.

    Args:
        sch: the schedule to transform (in place).
        anchor_trace: the trace tuned on the other module (post-processing included).
        target: the compilation target; its core count bounds the parallel loops of
            blocks that the trace does not cover.

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
    _replay_tolerantly(sch, anchor_trace, anchor.name_hint)
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


def _replay_tolerantly(sch: Schedule, trace: Trace, anchor: str) -> None:
    """Replay ``trace`` on ``sch``, skipping what does not apply to this module."""
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
        try:
            outputs = inst.kind.apply_to_schedule(
                sch, inputs, list(inst.attrs), trace.decisions.get(inst)
            )
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
