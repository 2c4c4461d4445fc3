"""``PackPanel``: copy a strided operand of a tiled CPU reduction into a contiguous panel.

In a matmul ``C[i, j] += A[i, k] * B[k, j]`` tiled by MultiLevelTiling, the register tile
reads ``B`` a few vectors at a time along ``j``, one row per step of ``k``: rows a whole
row of ``B`` apart. With 1024 floats per row, the rows are 4 KiB apart and all fall into
the same cache sets: the ``K x tile`` panel the tile sweeps does not stay in L1 or even
L2, however small it is. A weight the caller may re-lay out (``layout_free_buffers``) gets
a contiguous layout from the ``RewriteLayout`` postprocessor; any other operand is copied
here, once per outer tile, into a buffer of the panel's own width (the classic BLAS
packing), which the register tile then reads with a short, regular stride.

A transposed operand is worse off: in ``C[b, i, j] += Q[b, i, k] * K[b, j, k]`` the
vector loop ``j`` walks ``K`` down a column, so each vector is gathered lane by lane
(sixteen scalar loads and inserts for sixteen lanes). Its copy is laid out transposed
(``transform_layout``: ``[b, j, k] -> [b, k, j]``), so the tile reads the panel with
plain vector loads; the copy itself reads ``K`` along its rows. (Measured on a 2-core
Zen 5, ``Q[12,128,64] @ K[12,128,64]^T``, an 8-row by 2-vector tile: 72 us with the
transposed panel, 118 us gathering.)

This rule offers that copy as a choice (a design space with it and one without, as
``ReuseType("may")``) for each read of a block MultiLevelTiling tiled that:

* is a function parameter (not a weight ``RewriteLayout`` re-lays out, nor a buffer the
  function writes), with at least two dimensions;
* is indexed in its last dimension by a spatial iterator of the block (vector loads
  along the tile) and in another by a reduction iterator (a new row every step); or,
  transposed, in its last dimension by reduction iterators only and in another by the
  block's innermost spatial iterator (the vector loop) alone; and
* does not depend on every spatial iterator: the panel is reused across the others.

The copy (``cache_read`` to "global") is computed at the innermost loop of the first
spatial tile level (``compute_at``): one panel per parallel task, ``K`` rows by the
task's columns. Not in TVM's default space: TVM's LLVM back end leaves the strided reads
as they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..schedule.error import ScheduleError
from ..schedule.prepacked import layout_free_params, written_buffers
from ..tir import IterType, Var
from ..tir.functor import collect_vars
from .analysis import TILING_STRUCTURE_KEY, fork, realize_of
from .base import ScheduleRule

if TYPE_CHECKING:
    from ..schedule import BlockRV, Schedule
    from ..tir import Block, BufferRegion, PrimFunc

__all__ = ["PackPanel"]


class PackPanel(ScheduleRule):
    """Offer a packed copy of each strided, reused operand of a tiled reduction (see the
    module docstring): returns the schedule as it is and, when an operand qualifies, a
    second one with the copies."""

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        fname, realize = realize_of(sch, block)
        blk = realize.block
        structure = blk.annotations.get(TILING_STRUCTURE_KEY)
        if not isinstance(structure, str) or "S" not in structure:
            return [sch]
        moved = transposed_dims(sch.mod[fname], blk)
        reads = sorted(set(_row_panel_reads(sch.mod[fname], blk)) | set(moved))
        if not reads:
            return [sch]
        n_spatial = sum(1 for iv in blk.iter_vars if iv.iter_type == IterType.DATA_PAR)
        if n_spatial < 1 or len(sch.state.loops_above(fname, realize)) < n_spatial:
            return [sch]
        packed = fork(sch)
        try:
            level1 = packed.get_loops(block)[n_spatial - 1]  # the first tile level's end
            for index in reads:
                cache = packed.cache_read(block, index, "global")
                packed.compute_at(cache, level1, True)
                if index in moved:  # the vector loop's dimension goes last
                    packed.transform_layout(cache, ("write", 0), _to_last(moved[index]))
        except ScheduleError:
            return [sch]
        return [sch, packed]

    def __repr__(self) -> str:
        return "PackPanel()"


def panel_reads(func: PrimFunc, block: Block) -> list[int]:
    """The indices (into ``block.reads``) of the operands :class:`PackPanel` copies."""
    moved = transposed_dims(func, block)
    return sorted(set(_row_panel_reads(func, block)) | set(moved))


def transposed_dims(func: PrimFunc, block: Block) -> dict[int, int]:
    """The transposed operands :class:`PackPanel` copies: read index -> the dimension
    indexed by the block's innermost spatial iterator, which the copy puts last."""
    spatial_vars = [iv.var for iv in block.iter_vars if iv.iter_type == IterType.DATA_PAR]
    reduce = {iv.var for iv in block.iter_vars if iv.iter_type == IterType.COMM_REDUCE}
    if not spatial_vars or not reduce:
        return {}
    inner = spatial_vars[-1]
    out = {}
    for i in _candidate_reads(func, block):
        region = block.reads[i]
        dims = [_vars(region, d) for d in range(len(region.region))]
        if not dims[-1] or not dims[-1] <= reduce:
            continue  # the last dimension must move with the reduction only
        along = [d for d, used in enumerate(dims[:-1]) if inner in used]
        if len(along) != 1 or dims[along[0]] != {inner}:
            continue
        if set(spatial_vars) <= set().union(*dims):
            continue  # no reuse across a spatial iterator
        out[i] = along[0]
    return out


def _to_last(dim: int):
    """The index map that moves dimension ``dim`` to the end."""

    def move(*idx):
        return (*idx[:dim], *idx[dim + 1 :], idx[dim])

    return move


def _candidate_reads(func: PrimFunc, block: Block) -> list[int]:
    """Reads of parameters the caller cannot re-lay out and the function does not write,
    of two dimensions or more."""
    params = set(func.params)
    free_bufs = {func.params[j] for j in layout_free_params(func) if j < len(func.params)}
    written = written_buffers(func)
    out = []
    for i, region in enumerate(block.reads):
        buf = region.buffer
        if buf not in params or buf in free_bufs or buf in written or len(region.region) < 2:
            continue
        if any(w.buffer is buf for w in block.writes):
            continue
        out.append(i)
    return out


def _row_panel_reads(func: PrimFunc, block: Block) -> list[int]:
    """Operands read along their rows by the vector loop, a new row every reduction
    step (``B[k, j]`` of a matmul)."""
    spatial = {iv.var for iv in block.iter_vars if iv.iter_type == IterType.DATA_PAR}
    reduce = {iv.var for iv in block.iter_vars if iv.iter_type == IterType.COMM_REDUCE}
    out = []
    for i in _candidate_reads(func, block):
        region = block.reads[i]
        dims = [_vars(region, d) for d in range(len(region.region))]
        used = set().union(*dims)
        if not (dims[-1] & spatial) or not any(d & reduce for d in dims[:-1]):
            continue
        if spatial <= used:
            continue  # no reuse across a spatial iterator: nothing to gain from a copy
        out.append(i)
    return out


def _vars(region: BufferRegion, dim: int) -> set[Var]:
    rng = region.region[dim]
    return set(collect_vars(rng.min))
