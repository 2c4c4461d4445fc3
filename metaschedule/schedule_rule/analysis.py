"""Block analyses the schedule rules share (TVM's ``meta_schedule/utils.h`` checks).

Everything here reads a schedule without changing it or its trace: which blocks need
multi-level tiling, how a block's reads map onto its write, whether a block branches or
calls a given intrinsic, how long its spatial and reduction loop nests are.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..schedule.analysis import consumers, loop_iter_type, not_reduction_reason, producers
from ..tir import Add, Block, BlockRealize, BufferRegion, Call, For, IntImm, IterType, Sub, Var
from ..tir.expr import Select
from ..tir.functor import collect_vars, post_order_visit
from ..tir.stmt import IfThenElse

if TYPE_CHECKING:
    from ..schedule import BlockRV, Schedule

__all__ = [
    "AUTO_TENSORIZE_KEY",
    "TILING_STRUCTURE_KEY",
    "ReadWritePattern",
    "block_consumers",
    "block_producers",
    "cumulative_lengths",
    "fork",
    "has_if_then_else",
    "has_op",
    "is_reduction",
    "is_root",
    "is_spatial",
    "is_spatial_prim_func",
    "is_trivial_binding",
    "is_write_cache",
    "loop_kinds",
    "needs_multi_level_tiling",
    "num_cores_of",
    "read_write_pattern",
    "realize_of",
]

#: the block annotation MultiLevelTiling leaves on the blocks it tiled
TILING_STRUCTURE_KEY = "meta_schedule.tiling_structure"
#: the block annotation naming the tensor intrinsic ``RewriteTensorize`` applies to the
#: block (MultiLevelTilingWithIntrin sets it); "" on a decomposed init block (TVM's key)
AUTO_TENSORIZE_KEY = "meta_schedule.auto_tensorize"


def realize_of(sch: Schedule, block: BlockRV) -> tuple[str, BlockRealize]:
    """The function name and the BlockRealize behind ``block``."""
    return sch._block(block)


def fork(sch: Schedule) -> Schedule:
    """A copy of ``sch`` with a random stream of its own (forked from ``sch``'s)."""
    new = sch.copy()
    new.seed(sch.fork_seed())
    return new


def num_cores_of(context: Any) -> int | None:
    """The target's ``num_cores``; else the context's ``num_threads``; else None."""
    target = getattr(context, "target", None)
    cores = target.attrs.get("num_cores") if target is not None else None
    if cores is None:
        cores = getattr(context, "num_threads", None)
    return int(cores) if cores is not None else None


# ----------------------------------------------------------------------------- block kinds


def is_root(sch: Schedule, block: BlockRV) -> bool:
    fname, realize = realize_of(sch, block)
    return sch.state.scope_realize(fname, realize) is None


def is_spatial(block: Block) -> bool:
    """Every iteration variable is data-parallel."""
    return all(iv.iter_type == IterType.DATA_PAR for iv in block.iter_vars)


def is_spatial_prim_func(sch: Schedule, fname: str) -> bool:
    """Every block of the function is spatial (TVM's IsSpatialPrimFunc)."""
    found: list[bool] = []
    post_order_visit(
        sch.mod[fname].body,
        lambda n: found.append(is_spatial(n.block)) if isinstance(n, BlockRealize) else None,
    )
    return all(found)


def is_trivial_binding(sch: Schedule, fname: str, realize: BlockRealize) -> bool:
    """The block's iteration variables are bound, in order, to exactly its loops' variables."""
    loops = sch.state.loops_above(fname, realize)
    if len(loops) != len(realize.iter_values):
        return False
    return all(v is lp.loop_var for v, lp in zip(realize.iter_values, loops))


def is_reduction(sch: Schedule, fname: str, realize: BlockRealize) -> bool:
    scope = sch.state.scope_realize(fname, realize)
    if scope is None:
        return False
    siblings = sch.state.child_block_realizes(scope)
    return not_reduction_reason(siblings, realize) is None


def _siblings(sch: Schedule, fname: str, realize: BlockRealize) -> list[BlockRealize]:
    scope = sch.state.scope_realize(fname, realize)
    return [] if scope is None else sch.state.child_block_realizes(scope)


def block_producers(sch: Schedule, fname: str, realize: BlockRealize) -> list[BlockRealize]:
    """The producers of the block in its scope (not traced, unlike ``get_producers``)."""
    siblings = _siblings(sch, fname, realize)
    return producers(siblings, realize) if siblings else []


def block_consumers(sch: Schedule, fname: str, realize: BlockRealize) -> list[BlockRealize]:
    """The consumers of the block in its scope (not traced, unlike ``get_consumers``)."""
    siblings = _siblings(sch, fname, realize)
    return consumers(siblings, realize) if siblings else []


# ----------------------------------------------------------------------------- expressions


def has_if_then_else(realize: BlockRealize) -> bool:
    """The block branches: a non-trivial predicate, an IfThenElse or a Select inside."""
    if not (isinstance(realize.predicate, IntImm) and realize.predicate.value == 1):
        return True
    found: list[Any] = []
    post_order_visit(
        realize.block, lambda n: found.append(n) if isinstance(n, (IfThenElse, Select)) else None
    )
    return bool(found)


def has_op(realize: BlockRealize, ops: list[str]) -> bool:
    """The block calls one of the intrinsics ``ops`` (``"exp"`` or TVM's ``"tir.exp"``)."""
    names = {op.removeprefix("tir.") for op in ops}
    found: list[Any] = []
    post_order_visit(
        realize.block,
        lambda n: found.append(n) if isinstance(n, Call) and n.op in names else None,
    )
    return bool(found)


# ----------------------------------------------------------------------------- access patterns


@dataclass(frozen=True)
class ReadWritePattern:
    """How a read region's indices relate to a write region's (TVM's
    AnalyzeReadWritePattern). ``exists``: every read index is a constant or a write
    variable plus a constant; the others are meaningful only then."""

    exists: bool
    surjective: bool = False
    injective: bool = False
    ordered: bool = False
    no_const_read: bool = False
    no_shift_read: bool = False


def _var_with_shift(e) -> tuple[Var | None, bool]:
    """``(v, shifted)`` when ``e`` is ``v``, ``v + c``, ``c + v`` or ``v - c``."""
    if isinstance(e, Var):
        return e, False
    if isinstance(e, Add):
        if isinstance(e.a, Var) and isinstance(e.b, IntImm):
            return e.a, True
        if isinstance(e.b, Var) and isinstance(e.a, IntImm):
            return e.b, True
    if isinstance(e, Sub) and isinstance(e.a, Var) and isinstance(e.b, IntImm):
        return e.a, True
    return None, False


def read_write_pattern(read: BufferRegion, write: BufferRegion) -> ReadWritePattern:
    """Map each index of ``read`` onto the write dimension indexed by the same variable."""
    var_dim: dict[Var, int] = {}
    for d, rng in enumerate(write.region):
        if not isinstance(rng.extent, IntImm) or not isinstance(rng.min, Var):
            return ReadWritePattern(False)
        var_dim[rng.min] = d
    no_const_read = no_shift_read = True
    mapped: list[int] = []
    for rng in read.region:
        if not isinstance(rng.extent, IntImm):
            return ReadWritePattern(False)
        if isinstance(rng.min, IntImm):
            no_const_read = False
            continue
        var, shifted = _var_with_shift(rng.min)
        if var is None or var not in var_dim:
            return ReadWritePattern(False)
        mapped.append(var_dim[var])
        no_shift_read = no_shift_read and not shifted
    counts = [mapped.count(d) for d in range(len(write.region))]
    return ReadWritePattern(
        exists=True,
        surjective=all(c > 0 for c in counts),
        injective=all(c < 2 for c in counts),
        ordered=all(a <= b for a, b in itertools.pairwise(mapped)),
        no_const_read=no_const_read,
        no_shift_read=no_shift_read,
    )


def is_write_cache(block: Block) -> bool:
    """A block that copies (element-wise) into its single write: every read maps onto the
    write injectively and in order (TVM's IsWriteCache)."""
    if len(block.writes) != 1:
        return False
    # a read of more than one element per iteration (a gather's whole dimension, a
    # window) is no copy: fusing it under a tile of its producer cannot be replayed
    if any(
        not (isinstance(rng.extent, IntImm) and rng.extent.value == 1)
        for r in block.reads
        for rng in r.region
    ):
        return False
    pats = [read_write_pattern(r, block.writes[0]) for r in block.reads]
    return all(p.injective and p.ordered for p in pats)


# ----------------------------------------------------------------------------- loop nests


def cumulative_lengths(sch: Schedule, fname: str, realize: BlockRealize) -> tuple[int, int]:
    """Products of the extents of the spatial and of the reduction loops above the block
    (-1 for a product with a non-constant extent)."""
    space = reduce = 1
    for loop in sch.state.loops_above(fname, realize):
        kind = loop_iter_type(sch.state, fname, loop)
        extent = loop.extent.value if isinstance(loop.extent, IntImm) else None
        if kind == IterType.DATA_PAR:
            space = -1 if extent is None or space == -1 else space * extent
        elif kind == IterType.COMM_REDUCE:
            reduce = -1 if extent is None or reduce == -1 else reduce * extent
        else:
            return -1, -1
    return space, reduce


def loop_kinds(sch: Schedule, fname: str, loops: list[For]) -> list[IterType]:
    return [loop_iter_type(sch.state, fname, lp) for lp in loops]


def needs_multi_level_tiling(sch: Schedule, fname: str, realize: BlockRealize) -> bool:
    """TVM's NeedsMultiLevelTiling: a not yet tiled leaf computation with one write, some
    reduction, trivially bound loops, and data reuse (some read that misses a spatial
    variable, so a tile of the output reuses it)."""
    block = realize.block
    if TILING_STRUCTURE_KEY in block.annotations:
        return False
    if len(block.writes) != 1 or not block.reads or is_spatial(block):
        return False
    if not is_trivial_binding(sch, fname, realize):
        return False
    write_buffer = block.writes[0].buffer
    spatial = [
        iv.var
        for iv in block.iter_vars
        if iv.iter_type == IterType.DATA_PAR
        and not (_const(iv.dom.min) == 0 and _const(iv.dom.extent) == 1)
    ]
    seen = set()
    unused = 0
    for read in block.reads:
        if read.buffer in seen:
            return False  # the same buffer read twice
        seen.add(read.buffer)
        if read.buffer is write_buffer:
            continue
        used: set[Var] = set()
        for rng in read.region:
            if not isinstance(rng.extent, IntImm):
                return False
            used |= collect_vars(rng.min)
        unused += sum(1 for v in spatial if v not in used)
    return unused >= 1


def _const(e) -> int | None:
    return e.value if isinstance(e, IntImm) else None
