"""GPU details of MultiLevelTiling: the threads-per-block bounds of a tiled block.

TVM's MultiLevelTiling annotates each block it tiles for a GPU with the range its
threads per block must fall in; VerifyGPUCode rejects samples outside it. The lower
bound is one warp when the block has more than two warps of outputs (fewer threads would
leave most of each warp idle), else 1; the upper bound is the target's
``max_threads_per_block``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..tir import IntImm, IterType

if TYPE_CHECKING:
    from ..schedule import BlockRV, Schedule

__all__ = ["THREAD_EXTENT_HIGH_KEY", "THREAD_EXTENT_LOW_KEY", "annotate_thread_extent_bounds"]

THREAD_EXTENT_LOW_KEY = "meta_schedule.thread_extent_low_inclusive"
THREAD_EXTENT_HIGH_KEY = "meta_schedule.thread_extent_high_inclusive"


def annotate_thread_extent_bounds(
    sch: Schedule, block: BlockRV, limits: tuple[int, int] | None
) -> None:
    """Annotate ``block`` with its threads-per-block range; ``limits`` is the target's
    ``(max_threads_per_block, thread_warp_size)``, None (no cuda target) to skip."""
    if limits is None:
        return
    max_threads, warp = limits
    spatial = 1
    for iv in sch.get(block).iter_vars:
        if iv.iter_type == IterType.DATA_PAR and isinstance(iv.dom.extent, IntImm):
            spatial *= iv.dom.extent.value
    low = warp if spatial > 2 * warp else 1
    sch.annotate(block, THREAD_EXTENT_LOW_KEY, low)
    sch.annotate(block, THREAD_EXTENT_HIGH_KEY, max_threads)
