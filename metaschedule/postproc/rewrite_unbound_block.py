"""``RewriteUnboundBlock``: bind what is still off the GPU after sampling.

A sampled schedule may still hold blocks outside every kernel (a stage no rule bound,
e.g. after a design space that skipped AutoBind). The CUDA target runs nothing on the
host, so each such block's outer data-parallel loops are fused and split into
``blockIdx.x`` x ``threadIdx.x`` (with ``max_threads_per_block`` threads, fewer when the
fused extent is smaller; at most ``max_threadblocks`` blocks, a serial loop outside takes
the rest), as AutoBind does but without sampling.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..schedule import ScheduleError
from ..schedule.state import child_stmts
from ..schedule_rule.auto_bind import bind_block_thread_idx, target_gpu_limits
from ..tir import Block, BlockRealize, Stmt
from .base import Postproc

if TYPE_CHECKING:
    from ..schedule import Schedule

__all__ = ["RewriteUnboundBlock"]


class RewriteUnboundBlock(Postproc):
    """Bind the outer loops of every block not under a thread binding (TVM's postproc).

    Args:
        max_threadblocks: the most thread blocks one binding launches.

    The threads per block are the TuneContext target's ``max_threads_per_block`` (1024
    until initialised). Returns False when a block cannot be bound.
    """

    def __init__(self, max_threadblocks: int = 256) -> None:
        if int(max_threadblocks) < 1:
            raise ValueError(f"max_threadblocks must be >= 1, got {max_threadblocks!r}")
        self.max_threadblocks = int(max_threadblocks)
        self.max_threads_per_block = 1024

    def _initialize_with_tune_context(self, context: Any) -> None:
        limits = target_gpu_limits(context)
        if limits is not None:
            self.max_threads_per_block = limits[0]

    def apply(self, sch: Schedule) -> bool:
        for fname in list(sch.mod.functions):
            for name in _top_level_blocks(sch.mod[fname].body):
                block = sch.get_block(name, fname)
                try:
                    bind_block_thread_idx(
                        sch,
                        block,
                        self.max_threadblocks,
                        self.max_threads_per_block,
                        lambda _sch, limit: limit,
                    )
                except ScheduleError:
                    return False
        return True


def _top_level_blocks(body: Stmt) -> list[str]:
    """The blocks directly under the root block (through loops only), in program order."""
    names: list[str] = []
    root = body.block if isinstance(body, BlockRealize) else None
    stack: list[Stmt] = [root.body] if root is not None else [body]
    while stack:
        node = stack.pop()
        if isinstance(node, Block):
            names.append(node.name_hint)
            continue  # blocks nested in it are its own business
        stack.extend(reversed(child_stmts(node)))
    return names
