"""The lowering pipeline: a block-form PrimFunc to loops, stores and allocations."""

from __future__ import annotations

from collections.abc import Callable

from ..function import PrimFunc
from .alloc_buffers import lower_alloc_buffers
from .compact_allocations import compact_allocations
from .convert_blocks import convert_blocks
from .cross_thread_reduction import lower_cross_thread_reduction
from .lower_init import lower_init
from .plan_allocations import plan_allocations
from .simplify import simplify_indices
from .storage_sync import insert_storage_sync

Pass = Callable[[PrimFunc], PrimFunc]

#: The passes of :func:`lower`, in order.
LOWER_PASSES: tuple[Pass, ...] = (
    lower_init,
    lower_alloc_buffers,
    convert_blocks,
    plan_allocations,
    compact_allocations,
    simplify_indices,
)


#: The passes for GPU targets: cross-thread reductions to shared-memory trees, those of
#: :func:`lower`, then shared-memory barriers.
GPU_LOWER_PASSES: tuple[Pass, ...] = (
    lower_cross_thread_reduction,
    *LOWER_PASSES,
    insert_storage_sync,
)


def lower(func: PrimFunc, passes: tuple[Pass, ...] = LOWER_PASSES) -> PrimFunc:
    """Lower ``func`` (blocks, inits, alloc_buffers) to plain loops ready for codegen.

    Already-lowered functions pass through unchanged in meaning. The result carries
    the attribute ``"lowered": True``.
    """
    if not isinstance(func, PrimFunc):
        raise TypeError(f"lower expects a PrimFunc, got {type(func).__name__}")
    for p in passes:
        func = p(func)
    return func.with_attr("lowered", True)
