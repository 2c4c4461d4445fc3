"""``RewriteReductionBlock``: move each reduction block's init out of its reduction loops.

A reduction block keeps its ``init`` through scheduling (TensorIR runs it at the first
reduction step of each output). Code generation is simpler and faster with the init as
its own loop nest, run before the reduction loops::

    for i, j, k in T.grid(64, 64, 64):          for i, j in T.grid(64, 64):
        with T.block("C"):                          for j_init in range(1):  ...
            with T.init(): C[vi, vj] = 0               C_init: C[vi, vj] = 0
            C[vi, vj] += A[vi, vk] * B[vk, vj]      for k in range(64):
                                                     C: C[vi, vj] += A[vi, vk] * B[vk, vj]

(Exactly: ``decompose_reduction`` at ``k``, the outermost loop that feeds a reduction
iter var of the block.) The init of a block annotated ``meta_schedule.auto_tensorize`` is
annotated with the same key and "", for ``RewriteTensorize`` (as TVM).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..schedule import ScheduleError
from ..schedule.analysis import iter_kinds_by_var
from ..schedule.state import child_stmts
from ..schedule_rule.analysis import AUTO_TENSORIZE_KEY
from ..tir import Block, BlockRealize, ForKind, IterType, Stmt
from .base import Postproc

if TYPE_CHECKING:
    from ..schedule import Schedule
    from ..schedule.state import ScheduleState

__all__ = ["RewriteReductionBlock"]


class RewriteReductionBlock(Postproc):
    """Decompose every reduction block that still has an ``init``.

    The init goes right before the outermost loop above the block that feeds one of
    its reduction iter vars. Blocks are left alone when no loop feeds a reduction iter
    var (the init then stays, and lowering runs it under a condition), and when a
    reduction loop is bound to ``threadIdx`` (a cross-thread reduction, lowered as a
    whole). Returns False when ``decompose_reduction`` rejects the block (e.g. a loop
    that feeds both data-parallel and reduction iter vars): such a schedule is to be
    discarded.
    """

    def apply(self, sch: Schedule) -> bool:
        for fname in list(sch.mod.functions):
            for name in _blocks_with_init(sch.mod[fname].body):
                realize = sch.state.block_realize(fname, name)
                point = decompose_point(sch.state, fname, realize)
                if point is None:
                    continue
                block = sch.get_block(name, fname)
                loops = sch.get_loops(block)
                try:
                    init = sch.decompose_reduction(block, loops[point])
                except ScheduleError:
                    return False
                if AUTO_TENSORIZE_KEY in sch.get(block).annotations:
                    # as TVM: mark the init for RewriteTensorize (to vectorize it)
                    sch.annotate(init, AUTO_TENSORIZE_KEY, "")
        return True


def _blocks_with_init(body: Stmt) -> list[str]:
    """Names of the blocks (the root excluded) that have an init, in program order."""
    names: list[str] = []
    stack = [body.block.body] if isinstance(body, BlockRealize) else []
    while stack:
        node = stack.pop()
        if isinstance(node, Block) and node.init is not None:
            names.append(node.name_hint)
        stack.extend(reversed(child_stmts(node)))
    return names


def decompose_point(state: ScheduleState, fname: str, realize: BlockRealize) -> int | None:
    """Index (in the block's loops, outermost first) of the outermost loop feeding a
    reduction iter var; None if there is none or the reduction is cross-thread."""
    kinds = iter_kinds_by_var(realize)
    loops = state.loops_above(fname, realize)
    point = None
    for i, lp in enumerate(loops):
        feeds = kinds.get(lp.loop_var, set())
        if not feeds - {IterType.DATA_PAR}:
            continue
        if lp.kind is ForKind.THREAD_BINDING and lp.thread_binding.startswith("threadIdx"):
            return None
        if point is None:
            point = i
    return point
