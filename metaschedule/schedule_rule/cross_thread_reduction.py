"""``CrossThreadReduction``: let the threads of a GPU block share one reduction.

A reduction whose outputs are few but long (a row sum, softmax's max and sum, layer
norm's mean) leaves most of a GPU idle when each thread folds a whole row. This rule
adds, next to the unchanged schedule, one where the block's reduction loops are fused,
split by a sampled thread count ``T`` and the inner part bound to ``threadIdx.x``: ``T``
threads fold a row together, and the GPU lowering turns the shared output into a tree in
shared memory (:mod:`metaschedule.tir.transform.cross_thread_reduction`)::

    for i, k in T.grid(64, 1024):            for i in range(64):            # AutoBind: blockIdx.x
        red[i] += X[i, k]           ->           for k_0 in range(1024 // T):
                                                     for k_1 in T.thread_binding(T, "threadIdx.x"):
                                                         red[i] += X[i, k_0 * T + k_1]

When the block has one consumer whose outer loops follow the block's output, it is
first fused into it (``compute_at`` under the consumer's outer loop, output moved to
``shared`` memory), and the consumer's inner loop is split by the same ``T`` and bound to
``threadIdx.x``: one kernel computes a row's reduction and then uses it
(softmax's normalisation, layer norm's scaling). The rule applies to the reductions
TVM's ``NeedsRFactorOrCrossThreadReduction`` picks, with the target's
``max_threads_per_block`` and warp size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..schedule import ScheduleError
from ..tir import ForKind, IterType
from .add_rfactor import AddRFactor, needs_rfactor_or_cross_thread_reduction
from .analysis import block_consumers, fork, loop_kinds, realize_of
from .auto_bind import target_gpu_limits
from .base import ScheduleRule

if TYPE_CHECKING:
    from ..schedule import BlockRV, ExprRV, Schedule

__all__ = ["CrossThreadReduction"]


class CrossThreadReduction(ScheduleRule):
    """Bind the reduction loops of long reductions to ``threadIdx.x`` (TVM's rule).

    Args:
        thread_extents: candidate threads per reduction, sampled uniformly.

    Without a cuda target in the TuneContext the rule does nothing (as TVM: it needs the
    target's ``max_threads_per_block`` and ``thread_warp_size``).
    """

    def __init__(self, thread_extents: list[int]) -> None:
        extents = [int(x) for x in thread_extents]
        if not extents or any(x < 1 for x in extents):
            raise ValueError(f"thread_extents must be positive ints, got {thread_extents!r}")
        self.thread_extents = extents
        self._limits: tuple[int, int] | None = None

    def _initialize_with_tune_context(self, context: Any) -> None:
        self._limits = target_gpu_limits(context)

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if self._limits is None:
            return [sch]
        max_threads, warp = self._limits
        if not needs_rfactor_or_cross_thread_reduction(sch, block, max_threads, warp):
            return [sch]
        extents = [x for x in self.thread_extents if x <= max_threads] or [1]
        new = fork(sch)
        n = len(extents)
        threads = new.sample_categorical(extents, [1.0 / n] * n)
        fused_into = _fuse_into_consumer(new, block, threads)
        if fused_into is None:
            new = fork(sch)  # compute_at failed part-way: start again without fusion
            threads = new.sample_categorical(extents, [1.0 / n] * n)
        try:
            fused, _ = AddRFactor._reorder_and_fuse(new, block)
            _, inner = new.split(fused, [None, threads])
            new.bind(inner, "threadIdx.x")
        except ScheduleError:
            return [sch]
        return [new, sch]

    def __repr__(self) -> str:
        return f"CrossThreadReduction(thread_extents={self.thread_extents})"


def _fuse_into_consumer(sch: Schedule, block: BlockRV, threads: ExprRV) -> bool | None:
    """Compute ``block`` under its only consumer's outer loop (see the module docstring).

    Returns True when fused, False when there is nothing to fuse into (the schedule is
    unchanged), None when a step failed after the schedule changed."""
    fname, realize = realize_of(sch, block)
    found = block_consumers(sch, fname, realize)
    if len(found) != 1:
        return False
    consumer = sch.get_block(found[0].block.name_hint, fname)
    loops = sch.get_loops(consumer)
    nodes = [sch.get(lp) for lp in loops]
    if any(n.kind is not ForKind.SERIAL for n in nodes):
        return False
    kinds = loop_kinds(sch, fname, nodes)
    depth = len(realize.block.writes[0].buffer.shape)
    if len(loops) <= depth or any(k != IterType.DATA_PAR for k in kinds):
        return False
    target, innermost = loops[depth - 1], loops[-1]
    try:
        _, tx = sch.split(innermost, [None, threads])
        sch.bind(tx, "threadIdx.x")
        sch.compute_at(block, target, True)
        sch.set_scope(block, 0, "shared")
    except ScheduleError:
        return None
    return True
