"""``AutoBind``: give every block that no rule put on GPU threads a block/thread binding.

On a GPU nothing runs outside a kernel, so a block whose loops are not bound to
``blockIdx``/``threadIdx`` (an element-wise stage, a reduction no other rule tiled) is
bound here: its outer data-parallel loops are fused into one loop and split into
``blockIdx.x`` and ``threadIdx.x`` parts::

    for i, j in T.grid(64, 100):                 for b in T.thread_binding(50, "blockIdx.x"):
        B[i, j] = A[i, j] * 2            ->          for t in T.thread_binding(128, "threadIdx.x"):
                                                          if b * 128 + t < 6400:
                                                              B[...] = ...

The threads per block are sampled (``sample_categorical``) from ``thread_extents``, so
MutateThreadBinding can change them. When the fused extent needs more than
``max_threadblocks`` blocks of threads, a serial loop outside takes the rest. A block
without a data-parallel outer loop gets a unit loop bound to both.

:func:`bind_block_thread_idx` is shared with the RewriteUnboundBlock postprocessor,
which binds with a fixed thread count what is still unbound after sampling.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..tir import For, ForKind, IntImm, IterType
from .analysis import loop_kinds, realize_of
from .base import ScheduleRule

if TYPE_CHECKING:
    from ..schedule import BlockRV, ExprRV, Schedule

__all__ = ["AutoBind", "bind_block_thread_idx", "is_thread_bound", "target_gpu_limits"]

GetFactor = Callable[["Schedule", int], "int | ExprRV"]


def is_thread_bound(sch: Schedule, block: BlockRV) -> bool:
    """Whether some loop above ``block`` is bound to a GPU thread axis."""
    return any(sch.get(lp).kind is ForKind.THREAD_BINDING for lp in sch.get_loops(block))


def target_gpu_limits(context: Any) -> tuple[int, int] | None:
    """``(max_threads_per_block, thread_warp_size)`` of a TuneContext's cuda target."""
    target = getattr(context, "target", None)
    if target is None or getattr(target, "kind", None) != "cuda":
        return None
    return int(target.attrs["max_threads_per_block"]), int(target.attrs["thread_warp_size"])


def bind_block_thread_idx(
    sch: Schedule,
    block: BlockRV,
    max_threadblocks: int,
    max_threads_per_block: int,
    get_factor: GetFactor,
) -> bool:
    """Bind the outer data-parallel loops of an unbound ``block`` to blockIdx.x/threadIdx.x
    (see the module docstring). A block with threads bound inside it (a cross-thread
    reduction) gets only its outer data-parallel loops fused into ``blockIdx.x``. Returns
    False when nothing was bound (already on blockIdx, or the root)."""
    fname, realize = realize_of(sch, block)
    if sch.state.scope_realize(fname, realize) is None:
        return False
    loops = sch.get_loops(block)
    nodes = [sch.get(lp) for lp in loops]
    tags = [n.thread_binding or "" for n in nodes if n.kind is ForKind.THREAD_BINDING]
    if any(t.startswith("blockIdx") for t in tags):
        return False
    if tags:  # threads bound inside (CrossThreadReduction): the loops outside are the grid
        first = next(i for i, n in enumerate(nodes) if n.kind is ForKind.THREAD_BINDING)
        return _bind_outer_to_blocks(sch, fname, loops[:first], nodes[:first])
    kinds = loop_kinds(sch, fname, nodes)
    n = 0
    for i, (node, kind) in enumerate(zip(nodes, kinds)):
        if kind != IterType.DATA_PAR or node.kind is not ForKind.SERIAL:
            break
        if not isinstance(node.extent, IntImm):
            break
        if i > 0 and nodes[i - 1].body is not node:
            break  # fuse takes directly nested loops only
        n = i + 1
    if n == 0:
        unit = sch.add_unit_loop(loops[0] if loops else block)
        bx, tx = sch.split(unit, [1, 1])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        return True
    fused = sch.fuse(*loops[:n]) if n > 1 else loops[0]
    extent = 1
    for node in nodes[:n]:
        extent *= node.extent.value
    factor = get_factor(sch, min(extent, max_threads_per_block))
    threads = sch.get(factor) if not isinstance(factor, int) else factor
    if -(-extent // threads) > max_threadblocks:
        _, bx, tx = sch.split(fused, [None, max_threadblocks, factor])
    else:
        bx, tx = sch.split(fused, [None, factor])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return True


def _bind_outer_to_blocks(sch: Schedule, fname: str, loops: list, nodes: list[For]) -> bool:
    """Fuse the leading data-parallel loops above a thread-bound loop into ``blockIdx.x``."""
    kinds = loop_kinds(sch, fname, nodes)
    n = 0
    for i, (node, kind) in enumerate(zip(nodes, kinds)):
        if kind != IterType.DATA_PAR or node.kind is not ForKind.SERIAL:
            break
        if not isinstance(node.extent, IntImm) or (i > 0 and nodes[i - 1].body is not node):
            break
        n = i + 1
    if n == 0:
        return False
    sch.bind(sch.fuse(*loops[:n]) if n > 1 else loops[0], "blockIdx.x")
    return True


class AutoBind(ScheduleRule):
    """Bind the outer loops of every block not yet on GPU threads (TVM's AutoBind).

    Args:
        max_threadblocks: the most thread blocks a binding launches (the rest loops).
        thread_extents: candidate threads per block, sampled uniformly among those
            that do not exceed the fused extent (or the smallest, if none does).
        max_threads_per_block: the largest thread count; -1 takes the TuneContext
            target's ``max_threads_per_block`` (1024 without one).
    """

    def __init__(
        self,
        max_threadblocks: int = 256,
        thread_extents: list[int] | None = None,
        max_threads_per_block: int = -1,
    ) -> None:
        if int(max_threadblocks) < 1:
            raise ValueError(f"max_threadblocks must be >= 1, got {max_threadblocks!r}")
        extents = [int(x) for x in (thread_extents or [32, 64, 128, 256, 512, 1024])]
        if not extents or any(x < 1 for x in extents):
            raise ValueError(f"thread_extents must be positive ints, got {thread_extents!r}")
        if int(max_threads_per_block) < 1 and int(max_threads_per_block) != -1:
            raise ValueError(
                f"max_threads_per_block must be positive or -1 (the target's), got "
                f"{max_threads_per_block!r}"
            )
        self.max_threadblocks = int(max_threadblocks)
        self.thread_extents = extents
        self.max_threads_per_block = int(max_threads_per_block)

    def _initialize_with_tune_context(self, context: Any) -> None:
        limits = target_gpu_limits(context)
        if limits is not None and self.max_threads_per_block == -1:
            self.max_threads_per_block = limits[0]

    def _limit(self) -> int:
        return self.max_threads_per_block if self.max_threads_per_block != -1 else 1024

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        bind_block_thread_idx(sch, block, self.max_threadblocks, self._limit(), self._sample)
        return [sch]

    def _sample(self, sch: Schedule, limit: int) -> int | ExprRV:
        fits = [x for x in self.thread_extents if x <= limit]
        if not fits:
            return limit
        if len(fits) == 1:
            return fits[0]
        return sch.sample_categorical(fits, [1.0 / len(fits)] * len(fits))

    def __repr__(self) -> str:
        return (
            f"AutoBind(max_threadblocks={self.max_threadblocks}, "
            f"thread_extents={self.thread_extents}, "
            f"max_threads_per_block={self.max_threads_per_block})"
        )
