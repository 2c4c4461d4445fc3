"""Lowering passes: block-form TensorIR to loops, stores and allocations.

Each pass is a function ``PrimFunc -> PrimFunc``; :func:`lower` runs them in order.
"""

from .alloc_buffers import lower_alloc_buffers
from .compact_allocations import compact_allocations
from .convert_blocks import convert_blocks
from .cross_thread_reduction import lower_cross_thread_reduction
from .lower import GPU_LOWER_PASSES, LOWER_PASSES, lower
from .lower_init import lower_init
from .plan_allocations import plan_allocations
from .simplify import simplify_indices
from .storage_sync import insert_storage_sync, is_storage_sync, storage_sync

__all__ = [
    "GPU_LOWER_PASSES",
    "LOWER_PASSES",
    "compact_allocations",
    "convert_blocks",
    "insert_storage_sync",
    "is_storage_sync",
    "lower",
    "lower_alloc_buffers",
    "lower_cross_thread_reduction",
    "lower_init",
    "plan_allocations",
    "simplify_indices",
    "storage_sync",
]
