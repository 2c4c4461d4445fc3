"""Lowering passes: block-form TensorIR to loops, stores and allocations.

Each pass is a function ``PrimFunc -> PrimFunc``; :func:`lower` runs them in order.
"""

from .alloc_buffers import lower_alloc_buffers
from .compact_allocations import compact_allocations
from .convert_blocks import convert_blocks
from .lower import LOWER_PASSES, lower
from .lower_init import lower_init
from .plan_allocations import plan_allocations
from .simplify import simplify_indices

__all__ = [
    "LOWER_PASSES", "compact_allocations", "convert_blocks", "lower", "lower_alloc_buffers",
    "lower_init", "plan_allocations", "simplify_indices",
]
