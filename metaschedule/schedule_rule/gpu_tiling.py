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

__all__ = [
    "MAX_VTHREAD",
    "THREAD_EXTENT_HIGH_KEY",
    "THREAD_EXTENT_LOW_KEY",
    "annotate_thread_extent_bounds",
    "joint_tile_bounds",
    "thread_extent_bounds",
]

THREAD_EXTENT_LOW_KEY = "meta_schedule.thread_extent_low_inclusive"
THREAD_EXTENT_HIGH_KEY = "meta_schedule.thread_extent_high_inclusive"
#: the most virtual threads VerifyGPUCode accepts per kernel (TVM's default)
MAX_VTHREAD = 8


def thread_extent_bounds(sch: Schedule, block: BlockRV, limits: tuple[int, int]) -> tuple[int, int]:
    """The threads-per-block range of ``block``; ``limits`` is the target's
    ``(max_threads_per_block, thread_warp_size)``."""
    max_threads, warp = limits
    spatial = 1
    for iv in sch.get(block).iter_vars:
        if iv.iter_type == IterType.DATA_PAR and isinstance(iv.dom.extent, IntImm):
            spatial *= iv.dom.extent.value
    low = warp if spatial > 2 * warp else 1
    return low, max_threads


def annotate_thread_extent_bounds(
    sch: Schedule, block: BlockRV, limits: tuple[int, int] | None
) -> None:
    """Annotate ``block`` with its threads-per-block range; ``limits`` is the target's
    ``(max_threads_per_block, thread_warp_size)``, None (no cuda target) to skip."""
    if limits is None:
        return
    low, high = thread_extent_bounds(sch, block, limits)
    sch.annotate(block, THREAD_EXTENT_LOW_KEY, low)
    sch.annotate(block, THREAD_EXTENT_HIGH_KEY, high)


def joint_tile_bounds(
    tile_binds: list[str], s_indices: list[int], thread_range: tuple[int, int]
) -> list[list[int]]:
    """The ``(level, low, high)`` bounds of ``Schedule.sample_joint_tile`` for the spatial
    loops of a GPU tiling: the tile level bound to ``threadIdx`` within ``thread_range``,
    the one bound to ``vthread`` at most :data:`MAX_VTHREAD`. Empty when the threads are
    spread over several tile levels (their product is then not one level's)."""
    thread_levels = [
        s_indices.index(i)
        for i, axis in enumerate(tile_binds)
        if axis.startswith("threadIdx") and i in s_indices
    ]
    vthread_levels = [
        s_indices.index(i)
        for i, axis in enumerate(tile_binds)
        if axis.startswith("vthread") and i in s_indices
    ]
    out: list[list[int]] = []
    if len(thread_levels) == 1:
        out.append([thread_levels[0], thread_range[0], thread_range[1]])
    if len(vthread_levels) == 1:
        out.append([vthread_levels[0], 1, MAX_VTHREAD])
    return out
