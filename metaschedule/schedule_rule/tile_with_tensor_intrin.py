"""``tile_with_tensor_intrin``: split and reorder a block's loops so that its innermost
loops compute what a tensor intrinsic describes (TVM's ``tile_with_tensor_intrin``).

A u8 x s8 dense ``C[i, j] += A[i, k] * B[j, k]`` and ``dot_16x4_vnni``
(``C[i] += A[k] * B[i, k]``, 16 x 4) map the intrinsic's ``i`` to the block's ``j`` and its
``k`` to ``k``; ``j`` and ``k`` are split by 16 and 4 and their inner parts go innermost::

    for i, j, k in T.grid(64, 64, 64):       for i, j_0, k_0, j_1, k_1 in T.grid(64, 4, 16, 16, 4):
        with T.block("C"):              ->       with T.block("C"):
            ...                                      vj = j_0 * 16 + j_1; vk = k_0 * 4 + k_1

The loops above ``j_1`` are the block's to tile; ``sch.tensorize(j_1, intrin)`` (after
``decompose_reduction``) then replaces the inner nest by the intrinsic's call.

The mapping is found by trying each assignment of the block's loops to the intrinsic's
(same kind, extents divisible, the loops that index the output's last axis first) on a copy
of the schedule and matching it as ``tensorize`` would (:mod:`..schedule.primitives.
tensorize_match`). When an operand is read crosswise (``B[k, j]`` where the intrinsic needs
the 4 values of ``k`` adjacent), it is copied into a re-indexed buffer first: ``cache_read``
and ``transform_layout`` to a packed layout whose innermost axes are the intrinsic's tile,
in its order (``B[j // 16, k // 4, j % 16, k % 4]``: each tile one vector load), as TVM
packs the weights of its VNNI dense.

Where we differ from TVM: no padding (TVM's ``pad_einsum``): a loop whose extent the
intrinsic's does not divide leaves the block as it is. The inner loops are not blockized
here: our ``blockize`` keeps a reduction's init in the inner block, so the rule keeps the
loops as they are and :class:`~metaschedule.postproc.RewriteTensorize` tensorizes them
after ``RewriteReductionBlock`` has split the init off.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..schedule.error import ScheduleError
from ..schedule.index_map import IndexMap
from ..schedule.primitives.tensorize_match import (
    BoundBuffer,
    _nest,
    compact_stride,
    description_body,
    match_description,
)
from ..tir import BufferStore, IntImm, IterType
from ..tir.arith import Analyzer
from ..tir.functor import collect_vars, post_order_visit
from ..tir.tensor_intrin import TensorIntrin
from ..tir.tensor_intrin.calls import is_buffer_stride, stride_axis
from .analysis import is_trivial_binding, loop_kinds, realize_of

if TYPE_CHECKING:
    from ..schedule import BlockRV, LoopRV, Schedule
    from ..tir import Block, For

__all__ = [
    "IntrinTiling",
    "apply_intrin_tiling",
    "find_intrin_tiling",
    "intrin_loops",
    "tile_with_tensor_intrin",
]

#: at most this many loop assignments are tried per block
MAX_TRIALS = 24


@dataclass(frozen=True)
class IntrinTiling:
    """How a block's loops map onto a tensor intrinsic's (a plan; nothing applied yet).

    Attributes:
        intrin: the intrinsic's name.
        loops: for each non-unit loop of the description, in order, the position (among
            the block's loops, outermost first) of the loop it maps to.
        extents: the description's loop extents, in the same order.
        relayouts: ``(read index, axes, tile)`` for each read to copy into a packed
            buffer: ``axes`` (those the intrinsic walks, in its order) are split by
            ``tile`` and the tile parts go innermost (:func:`packed_map`).
    """

    intrin: str
    loops: tuple[int, ...]
    extents: tuple[int, ...]
    relayouts: tuple[tuple[int, tuple[int, ...], tuple[int, ...]], ...] = ()


def tile_with_tensor_intrin(sch: Schedule, block: BlockRV, intrin_name: str) -> LoopRV | None:
    """Tile ``block`` so that its innermost loops match ``intrin_name`` (see the module
    docstring); the outermost of those loops, or None (``sch`` unchanged) when the block
    cannot be tiled for the intrinsic."""
    plan = find_intrin_tiling(sch, block, intrin_name)
    return None if plan is None else apply_intrin_tiling(sch, block, plan)[0]


def find_intrin_tiling(sch: Schedule, block: BlockRV, intrin_name: str) -> IntrinTiling | None:
    """The tiling that makes ``block`` tensorizable by ``intrin_name``, or None. Reads
    ``sch`` without changing it (the trials run on copies)."""
    intrin = TensorIntrin.get(intrin_name, allow_missing=True)
    if intrin is None:
        return None
    fname, realize = realize_of(sch, block)
    if sch.state.scope_realize(fname, realize) is None:
        return None
    if not is_trivial_binding(sch, fname, realize):
        return None
    if not _dtypes_fit(intrin, realize.block):  # cheap: floats never get to the trials
        return None
    desc = intrin_loops(intrin)
    if desc is None:
        return None
    loops = sch.state.loops_above(fname, realize)
    kinds = loop_kinds(sch, fname, loops)
    extents = [lp.extent.value if isinstance(lp.extent, IntImm) else None for lp in loops]
    inner = _output_inner_loops(realize.block, loops)
    options = []
    for d_extent, d_kind in desc:
        fits = [
            p
            for p, (e, k) in enumerate(zip(extents, kinds))
            if k == d_kind and e is not None and e % d_extent == 0
        ]
        fits.sort(key=lambda p: (p not in inner, -p))  # the output's last axis, inner first
        options.append(fits)
    d_extents = tuple(e for e, _ in desc)
    for choice in itertools.islice(
        (c for c in itertools.product(*options) if len(set(c)) == len(c)), MAX_TRIALS
    ):
        plan = IntrinTiling(intrin.name, tuple(choice), d_extents)
        bound = _trial(sch, block, plan)
        if bound is None:
            continue
        relayouts = _relayouts(intrin, realize.block, bound)
        if relayouts is None:
            continue
        plan = IntrinTiling(intrin.name, tuple(choice), d_extents, relayouts)
        if relayouts and _trial(sch, block, plan, check_strides=True) is None:
            continue
        return plan
    return None


def apply_intrin_tiling(sch: Schedule, block: BlockRV, plan: IntrinTiling) -> list[LoopRV]:
    """Apply ``plan`` to ``sch``: the re-indexed copies, the splits and the reorder. Returns
    the inner loops (in the description's order)."""
    for read_index, axes, tile in plan.relayouts:
        ndim = len(sch.get(block).reads[read_index].buffer.shape)
        sch.cache_read(block, read_index, "global")
        sch.transform_layout(block, ("read", read_index), packed_map(ndim, axes, tile))
    loops = sch.get_loops(block)
    inner: dict[int, LoopRV] = {}
    for pos, extent in zip(plan.loops, plan.extents):
        _, inner[pos] = sch.split(loops[pos], [None, extent])
    inner_nodes = {id(sch.get(lp)) for lp in inner.values()}
    rest = [lp for lp in sch.get_loops(block) if id(sch.get(lp)) not in inner_nodes]
    ordered = [inner[pos] for pos in plan.loops]
    sch.reorder(*rest, *ordered)
    return ordered


# ----------------------------------------------------------------------------- analysis


def intrin_loops(intrin: TensorIntrin) -> list[tuple[int, IterType]] | None:
    """The description's non-unit loops: (extent, kind of the iterator it feeds); None
    if the description is not a loop nest around one block."""
    try:
        d_loops, d_real = _nest(description_body(intrin.desc), intrin.name)
    except ScheduleError:
        return None
    out = []
    for lp in d_loops:
        if not isinstance(lp.extent, IntImm):
            return None
        if lp.extent.value == 1:
            continue
        fed = {
            iv.iter_type
            for iv, v in zip(d_real.block.iter_vars, d_real.iter_values)
            if lp.loop_var in collect_vars(v)
        }
        if len(fed) != 1:
            return None
        out.append((lp.extent.value, fed.pop()))
    return out


def _dtypes_fit(intrin: TensorIntrin, block: Block) -> bool:
    """Every dtype of the intrinsic's operands is among the block's buffers' dtypes."""
    have = {r.buffer.dtype for r in (*block.reads, *block.writes)}
    return all(p.dtype in have for p in intrin.desc.params)


def _output_inner_loops(block: Block, loops: list[For]) -> set[int]:
    """Positions of the loops that index the last axis of the block's store."""
    stores: list[BufferStore] = []
    post_order_visit(block.body, lambda n: stores.append(n) if isinstance(n, BufferStore) else None)
    if len(stores) != 1 or not stores[0].indices:
        return set()
    used = collect_vars(stores[0].indices[-1])
    # trivial bindings: iterator p is bound to loop p
    ivars = [iv.var for iv in block.iter_vars]
    return {p for p in range(len(loops)) if p < len(ivars) and ivars[p] in used}


def _trial(
    sch: Schedule, block: BlockRV, plan: IntrinTiling, check_strides: bool = False
) -> list[BoundBuffer] | None:
    """Apply ``plan`` to a copy of ``sch`` and match the inner nest with the intrinsic;
    the bound operands, or None. With ``check_strides``, also tensorize it."""
    trial = sch.copy()
    try:
        inner = apply_intrin_tiling(trial, block, plan)
        fname, realize = realize_of(trial, block)
        if realize.block.init is not None:
            loops = trial.get_loops(block)
            kinds = loop_kinds(trial, fname, [trial.get(lp) for lp in loops])
            first = kinds.index(IterType.COMM_REDUCE) if IterType.COMM_REDUCE in kinds else None
            if first is not None:
                trial.decompose_reduction(block, loops[first])
        outer = trial.blockize(inner[0])
        if check_strides:
            trial.tensorize(outer, plan.intrin)
            return []
        _, outer_realize = realize_of(trial, outer)
        ana = Analyzer()
        for iv in outer_realize.block.iter_vars:
            ana.bind(iv.var, iv.dom)
        intrin = TensorIntrin.get(plan.intrin)
        assert intrin is not None
        return match_description(intrin.name, intrin.desc, outer_realize.block, ana)
    except ScheduleError:
        return None


def _asked_strides(intrin: TensorIntrin) -> set[tuple[int, int]]:
    """(parameter position, axis) pairs whose stride the implementation takes."""
    asked = set()

    def visit(node):
        if is_buffer_stride(node):
            buf, axis = stride_axis(node)
            pos = next((k for k, p in enumerate(intrin.impl.params) if p is buf), None)
            if pos is not None:
                asked.add((pos, axis))

    post_order_visit(intrin.impl.body, visit)
    return asked


def _relayouts(
    intrin: TensorIntrin, block: Block, bound: list[BoundBuffer]
) -> tuple[tuple[int, tuple[int, ...], tuple[int, ...]], ...] | None:
    """The reads to copy into packed buffers so that every operand is compact where the
    implementation needs it; None if an operand needing it is not a plain read."""
    asked = _asked_strides(intrin)
    out = []
    for k, bb in enumerate(bound):
        if _compact(bb, k, asked):
            continue
        read = next((i for i, r in enumerate(block.reads) if r.buffer is bb.buffer), None)
        written = any(w.buffer is bb.buffer for w in block.writes)
        if read is None or written:
            return None
        pairs = [(a, e) for a, e in zip(bb.axes, bb.param.static_shape()) if a is not None]
        out.append((read, tuple(a for a, _ in pairs), tuple(e for _, e in pairs)))
    return tuple(out)


def _compact(bb: BoundBuffer, pos: int, asked: set[tuple[int, int]]) -> bool:
    shape = bb.param.static_shape()
    for axis, ext in enumerate(shape):
        if ext == 1 or (pos, axis) in asked:
            continue
        got = bb.stride(axis)
        if not (isinstance(got, IntImm) and got.value == compact_stride(bb.param, axis)):
            return False
    return True


def packed_map(ndim: int, axes: tuple[int, ...], tile: tuple[int, ...]) -> IndexMap:
    """The layout that keeps the other axes outermost, then ``axes // tile``, then the
    tile ``axes % tile``: ``B[k, j]`` with ``axes=(1, 0)``, ``tile=(16, 4)`` becomes
    ``B[j // 16, k // 4, j % 16, k % 4]``, each 16 x 4 tile one contiguous 64 bytes."""

    def index_map(*idx):
        rest = [idx[a] for a in range(ndim) if a not in axes]
        outer = [idx[a] // t for a, t in zip(axes, tile)]
        inner = [idx[a] % t for a, t in zip(axes, tile)]
        return (*rest, *outer, *inner)

    return IndexMap.from_func(index_map, ndim=ndim)
