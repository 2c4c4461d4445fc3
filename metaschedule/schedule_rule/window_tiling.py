"""``WindowTiling``: a register tile of output rows for a sliding-window reduction (pooling).

A max or sum pool ``O[n, y, x, c] = reduce(I[n, y*s + ry, x*s + rx, c])`` has no operand
that misses a spatial iterator, so MultiLevelTiling (TVM's ``NeedsMultiLevelTiling``)
leaves it alone and TVM's space only parallelizes it and unrolls the window: every output
pixel reads its 3x3 window from memory, and the input row shared by two windows stacked
vertically (row ``2y + 2`` of window ``y`` is row ``0`` of window ``y + 1``) is fetched
again from cache for the next output row. Measured on 1x112x112x64, 3x3 stride 2, 2 cores:
TVM's schedule ran at 57 GFLOPS, two output rows per tile at 65, against 80 for a plain
sweep reading the input and writing the output once (the memory floor).

This rule offers, beside the unchanged block, a sketch that moves the window loops
outside a tile of output rows and a vector of channels::

    for y, x, c in T.grid(H, W, C):           for y0, x, c0 in T.grid(H / t, W, C / v):
        for ry, rx in T.grid(3, 3):       ->      for ry, rx in T.grid(3, 3):
            O[y, x, c] = max(O, I[..])                for y1 in range(t):   # t rows
                                                          for c1 in T.vectorized(v):
                                                              O[..] = max(O, I[..])

The tile stays in vector registers across the window and is stored once (the code
generator's register accumulators), and the rows of the tile read their shared input row
once (the window written out as straight-line code shares equal loads). The row tile
``t`` is a sampled decision (``sample_categorical`` over ``row_tiles``, 1 meaning only the
channel vector); ``v`` is the native vector length when it divides the channels. Not in
TVM's default space.

A single element-wise consumer (the ``sum / 9`` of an average pool) is also offered fused
into the tile, under the channel loop ``c0`` (as MultiLevelTiling fuses one at its write
levels), so the tile's outputs are finished while they are in cache and the operator is
one parallel loop instead of two: on a 1x56x56x64 average pool, 2 cores, 4.2 us fused
against 5.8 us as two sweeps (each a fork and join of the thread pool).

A block qualifies when it is a reduction with trivially bound loops, spatial loops then
reduction loops, a window of at most ``max_window`` points, channels last (the innermost
spatial iterator indexes only the last dimension of the output and of every input that
uses it, with stride 1), and some input index sliding (a spatial and a reduction iterator
in one index, as ``y*s + ry``); the outermost such spatial loop is the row loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..codegen.isa import isa_of
from ..schedule.error import ScheduleError
from ..tir import IntImm, IterType
from ..tir.functor import collect_vars
from ..tir.transform.affine import affine
from .analysis import (
    TILING_STRUCTURE_KEY,
    block_consumers,
    fork,
    is_reduction,
    is_trivial_binding,
    is_write_cache,
    loop_kinds,
    needs_multi_level_tiling,
    realize_of,
)
from .base import ScheduleRule

if TYPE_CHECKING:
    from ..schedule import BlockRV, ExprRV, LoopRV, Schedule
    from ..target import Target

__all__ = ["WindowPlan", "WindowTiling", "fuse_consumer", "plan_window", "tile_window"]

#: the block annotation left on a block this rule tiled
WINDOW_TILING_KEY = "meta_schedule.window_tiling"


@dataclass(frozen=True)
class WindowPlan:
    """Where a window reduction's loops are: indices into ``sch.get_loops(block)``."""

    row: int  # the sliding spatial loop to tile
    channel: int  # the innermost spatial loop (vectorized)
    reductions: tuple[int, ...]  # the window loops
    vector: int  # the channel vector length


def _const(e) -> int | None:
    return e.value if isinstance(e, IntImm) else None


def plan_window(sch: Schedule, block: BlockRV, lanes: int, max_window: int = 64):
    """The :class:`WindowPlan` of ``block`` if it is a sliding-window reduction with
    channels last (see the module doc), else None."""
    fname, realize = realize_of(sch, block)
    blk = realize.block
    if TILING_STRUCTURE_KEY in blk.annotations or WINDOW_TILING_KEY in blk.annotations:
        return None
    if len(blk.writes) != 1 or not blk.reads or blk.init is None:
        return None
    if not is_reduction(sch, fname, realize) or not is_trivial_binding(sch, fname, realize):
        return None
    if needs_multi_level_tiling(sch, fname, realize):
        return None
    loops = sch.state.loops_above(fname, realize)
    kinds = loop_kinds(sch, fname, loops)
    spatial = [i for i, k in enumerate(kinds) if k == IterType.DATA_PAR]
    reductions = [i for i, k in enumerate(kinds) if k == IterType.COMM_REDUCE]
    if len(spatial) + len(reductions) != len(kinds) or not spatial or not reductions:
        return None
    if spatial[-1] > reductions[0]:
        return None  # not spatial loops then reduction loops
    window = 1
    for i in reductions:
        ext = _const(loops[i].extent)
        if ext is None:
            return None
        window *= ext
    if window > max_window:
        return None
    channel = spatial[-1]
    c_ext = _const(loops[channel].extent)
    if c_ext is None or c_ext % lanes != 0:
        return None
    # trivial bindings: the block's iterators are its loops, in order
    ivars = [iv.var for iv in blk.iter_vars]
    c_var, reduce_vars = ivars[channel], {ivars[i] for i in reductions}
    row = None
    for region in [*blk.writes, *blk.reads]:
        used = [collect_vars(rng.min) for rng in region.region]
        for d, names in enumerate(used):
            if c_var in names and (d != len(used) - 1 or names != {c_var}):
                return None  # channels not last, or mixed with other iterators
        if c_var in used[-1] and affine(region.region[-1].min).coef(c_var) != 1:
            return None
        for names in used[:-1]:
            if names & reduce_vars:
                for i in spatial[:-1]:
                    if ivars[i] in names and (row is None or i < row):
                        row = i
    if row is None or (_const(loops[row].extent) or 0) < 2:
        return None
    return WindowPlan(row, channel, tuple(reductions), lanes)


def tile_window(
    sch: Schedule, block: BlockRV, plan: WindowPlan, row_tile: int | ExprRV
) -> tuple[LoopRV, LoopRV]:
    """Split the row loop by ``row_tile`` and the channels by the plan's vector, move the
    window loops outside both inner parts and vectorize the channels; returns the inner
    row loop and the vectorized loop."""
    loops = sch.get_loops(block)
    row0, row1 = sch.split(loops[plan.row], [None, row_tile])
    c0, c1 = sch.split(loops[plan.channel], [None, plan.vector])
    window = [loops[r] for r in plan.reductions]
    # spatial loops keep their order: the row's outer part where the row was
    spatial = []
    for i, lp in enumerate(loops):
        if i == plan.row:
            spatial.append(row0)
        elif i == plan.channel:
            spatial.append(c0)
        elif i not in plan.reductions:
            spatial.append(lp)
    sch.reorder(*spatial, *window, row1, c1)
    sch.vectorize(c1)
    sch.annotate(block, WINDOW_TILING_KEY, 1)
    return row1, c1


def fuse_consumer(sch: Schedule, block: BlockRV, plan: WindowPlan) -> bool:
    """Move the single element-wise consumer of a tiled ``block`` under the tile's channel
    loop and vectorize its channels; False (``sch`` unchanged) if there is none or it
    does not fit there."""
    fname, realize = realize_of(sch, block)
    found = block_consumers(sch, fname, realize)
    if len(found) != 1 or not is_write_cache(found[0].block):
        return False
    loops = sch.get_loops(block)
    c0 = loops[len(loops) - len(plan.reductions) - 3]  # [..., c0, *window, row1, c1]
    consumer = sch.get_block(found[0].block.name_hint, fname)
    try:
        sch.reverse_compute_at(consumer, c0, True)
    except ScheduleError:
        return False
    inner = sch.get_loops(consumer)[-1]
    if _const(sch.get(inner).extent) == plan.vector:
        sch.vectorize(inner)
    return True


class WindowTiling(ScheduleRule):
    """Offer a register tile of output rows for sliding-window reductions (see the module
    doc).

    Args:
        row_tiles: the candidate numbers of output rows per tile (sampled uniformly).
        max_window: the largest window (product of the reduction extents) tiled.
    """

    def __init__(self, row_tiles: list[int] | None = None, max_window: int = 64) -> None:
        tiles = [int(t) for t in (row_tiles if row_tiles is not None else [1, 2, 4])]
        if not tiles or any(t < 1 for t in tiles):
            raise ValueError(f"row_tiles must be positive ints, got {row_tiles!r}")
        if int(max_window) < 1:
            raise ValueError(f"max_window must be >= 1, got {max_window!r}")
        self.row_tiles = tiles
        self.max_window = int(max_window)
        self.lanes: int | None = None

    def _initialize_with_tune_context(self, context: Any) -> None:
        target: Target | None = getattr(context, "target", None)
        if target is not None and target.kind == "cpu":
            self.lanes = isa_of(target).lanes("float32")

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if self.lanes is None:
            return [sch]
        plan = plan_window(sch, block, self.lanes, self.max_window)
        if plan is None:
            return [sch]
        rows = _const(sch.get(sch.get_loops(block)[plan.row]).extent) or 1
        tiles = [t for t in self.row_tiles if t <= rows] or [1]
        tiled = fork(sch)
        n = len(tiles)
        tile = tiled.sample_categorical(tiles, [1.0 / n] * n) if n > 1 else tiles[0]
        tile_window(tiled, block, plan, tile)
        fused = fork(tiled)
        if fuse_consumer(fused, block, plan):
            return [fused, tiled, sch]
        return [tiled, sch]

    def __repr__(self) -> str:
        return f"WindowTiling(row_tiles={self.row_tiles}, max_window={self.max_window})"
