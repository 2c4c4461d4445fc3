"""The default schedule of the integer kernels of :mod:`metaschedule.te.ops.quantized` and
:mod:`~metaschedule.te.ops.quantized_conv`: a quantized conv2d (NHWC, NCHW with one group,
NHWC grouped and depthwise), dense and matmul.

As :mod:`.schedule_conv` does for float convolutions, the output channels are the vector
dimension, a register tile of ``rows`` output columns (matmul: rows) by ``vectors``
channel vectors accumulates in s32 in a local buffer, and the epilogue (zero-point
terms, bias, requantize) is applied as the tile is written back. The weight is packed
once, at compile time (:mod:`.weight_layout`), in the order the tile walks it.

Where the target has an *exact* u8/s8 dot product matching the operands' dtypes (see
:func:`exact_dot_product`: ``dot_16x4_vnni``, ``dot_8x4_avxvnni``, else
``dot_16x4_avx512_exact`` / ``dot_8x4_avx2_exact`` (two ``vpmaddwd`` of int16 halves),
``dot_4x4_*_sdot/udot/neon``), the reduction over input channels (matmul: ``k``) is split
by 4 and the ``lanes x 4`` inner product is tensorized; the weight is packed to the
intrinsic's layout, ``[F // (v * lanes), KH, KW, C // 4, v, lanes, 4]`` for a tile of ``v``
vectors (dense/matmul: ``[N // (v * lanes), K // 4, v, lanes, 4]``)::

    parallel for n, f0, y:                          # NHWC conv, VNNI: lanes = 16
        for x0:
            acc[t, vectors * 16] = 0
            for ry, rx, c0:
                for x1 in unroll(t):
                    for f1 in unroll(vectors):      # one vpdpbusd: 16 lanes x 4 products
                        dot_16x4_vnni(&acc[x1, f1 * 16], &in[n, y + ry, x0*t + x1 + rx, c0*4],
                                      &w[f0, ry, rx, c0, f1, 0, 0])
            out[...] = epilogue(acc[x1, f])

TVM's saturating AVX2 / AVX512-BW sequences (``vpmaddubsw``) are never chosen: they differ
from the integer result once a pair of u8 x s8 products leaves int16. Without an exact
intrinsic (s8 activations on x86), or when the input channels are not a multiple of 4 or
the groups differ, the tile is plain vector code: ``u8 -> s32`` broadcasts times
sign-extended weight vectors, the weight packed ``[F // (v * lanes), KH, KW, C, v * lanes]``.
An NCHW convolution's padding stage (or a copy of its input) writes channels last for the
dot product; an NCHW depthwise or grouped convolution keeps the generic reduction schedule
(its input channels are not contiguous along the output channels).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from ..codegen.c_intrin import usable_tensor_intrins
from ..codegen.isa import isa_of
from ..schedule import Schedule, ScheduleError
from ..schedule.index_map import IndexMap
from ..schedule.prepacked import prepacked_args
from ..target import Target
from ..tir import Block, IterType
from ..tir.expr import IntImm, Var
from ..tir.function import PrimFunc
from ..tir.functor import collect_vars
from ..tir.tensor_intrin import DOT_PRODUCTS
from .schedule_conv import _blocks, _divisor_at_most, channel_block
from .weight_layout import rewrite_param_layout

__all__ = [
    "QUANTIZED_TAGS",
    "QuantizedPlan",
    "exact_dot_product",
    "pack_quantized_weights",
    "schedule_quantized",
]


@dataclass(frozen=True)
class _Roles:
    """Which loops (positions in create_prim_func's order) play which part."""

    outer: tuple[int, ...]  # batch and output rows: parallel, outside the tile
    row: int  # the register tile's rows (conv: output columns)
    chan: int  # output channels: the vector dimension


#: the te tags of the integer kernels, and their loop roles; the reductions follow the
#: spatial loops, the reduced channel (``rc``, ``k``) last when there is one
QUANTIZED_TAGS: dict[str, _Roles] = {
    "quantized_conv2d_nhwc": _Roles((0, 1), 2, 3),
    "quantized_depthwise_conv2d_nhwc": _Roles((0, 1), 2, 3),
    "quantized_conv2d_nchw": _Roles((0, 2), 3, 1),
    "quantized_dense": _Roles((), 0, 1),
    "quantized_matmul": _Roles((), 0, 1),
}
#: the exact dot products, widest first (TVM's names)
_EXACT = [dp for dp in DOT_PRODUCTS.values() if not dp.saturating_pairs]
_EXACT.sort(key=lambda dp: -dp.lanes)


@dataclass(frozen=True)
class QuantizedPlan:
    """How :func:`schedule_quantized` tiles one integer kernel (decided with the weight
    packing, before the schedule exists).

    Attributes:
        tag: the block's te tag (a key of :data:`QUANTIZED_TAGS`).
        lanes: output channels per vector (the intrinsic's lanes, or int32 lanes).
        vectors: channel vectors per register tile.
        rows: the register tile's rows (conv: output columns).
        intrin: the tensor intrinsic of the inner ``lanes x 4`` product, or None.
    """

    tag: str
    lanes: int
    vectors: int
    rows: int
    intrin: str | None


def exact_dot_product(target: Target, a_dtype: str, b_dtype: str) -> tuple[str, int] | None:
    """The widest dot-product intrinsic ``target`` runs that computes ``a x b -> s32``
    exactly, with its lanes; None when there is none."""
    usable = set(usable_tensor_intrins(target))
    for dp in _EXACT:
        if dp.name in usable and (dp.a_dtype, dp.b_dtype) == (a_dtype, b_dtype):
            return dp.name, dp.lanes
    return None


def _weight_read(block: Block, params) -> tuple[int, list[int | None]] | None:
    """The weight's parameter index and, per weight axis, the block iter var (position)
    it is read at (None: a constant index, a depthwise kernel's unit axis); None unless
    some parameter is read at plain iter vars, the output channel among them."""
    ivars = [iv.var for iv in block.iter_vars]
    roles = QUANTIZED_TAGS[block.annotations["tag"]]
    for r in block.reads:
        mins = [rng.min for rng in r.region]
        if not all((isinstance(m, Var) and m in ivars) or isinstance(m, IntImm) for m in mins):
            continue
        axes = [ivars.index(m) if isinstance(m, Var) else None for m in mins]
        used = [a for a in axes if a is not None]
        if roles.chan not in used or len(set(used)) != len(used):
            continue
        for j, p in enumerate(params):
            if p is r.buffer:
                return j, axes
    return None


def _vector_fits(block: Block, weight) -> bool:
    """The output channel indexes the innermost axis of every input it indexes (the
    output's accumulator tile is laid out ``[column, channel]`` in any case)."""
    chan = block.iter_vars[QUANTIZED_TAGS[block.annotations["tag"]].chan].var
    for r in block.reads:
        if r.buffer is weight:
            continue
        for d, rng in enumerate(r.region):
            if chan in collect_vars(rng.min) and d != len(r.region) - 1:
                return False
    return True


def _dot_fits(block: Block, weight) -> bool:
    """The data read is the same for every output channel (one group) and indexed by the
    reduced channel exactly, along its innermost axis (NCHW: along axis 1, the axis
    :func:`schedule_quantized` moves innermost)."""
    roles = QUANTIZED_TAGS[block.annotations["tag"]]
    chan, red = block.iter_vars[roles.chan].var, block.iter_vars[-1].var
    axis = 1 if block.annotations["tag"] == "quantized_conv2d_nchw" else -1
    for r in block.reads:
        if r.buffer is weight or r.buffer in [w.buffer for w in block.writes]:
            continue
        if chan in {v for rng in r.region for v in collect_vars(rng.min)}:
            return False
        if r.region[axis].min is not red:
            return False
    return True


def _tile(row_extent: int, channel_vectors: int, budget: int) -> tuple[int, int]:
    """(rows, vectors): the register tile with the most accumulators within ``budget``,
    of at most two vectors of channels, rows dividing ``row_extent``."""
    best = (1, 1)
    for vectors in (2, 1):
        if channel_vectors % vectors:
            continue
        rows = _divisor_at_most(row_extent, budget // vectors)
        if rows * vectors > best[0] * best[1]:
            best = (rows, vectors)
    return best


def _plan(block: Block, func: PrimFunc, target: Target) -> tuple[QuantizedPlan, int, list] | None:
    """The plan of one integer kernel block, its weight's index and read axes."""
    tag = block.annotations.get("tag")
    if tag not in QUANTIZED_TAGS:
        return None
    roles = QUANTIZED_TAGS[tag]
    kinds = [iv.iter_type for iv in block.iter_vars]
    n_spatial = 4 if tag.startswith("quantized_conv") or "depthwise" in tag else 2
    if kinds != [IterType.DATA_PAR] * n_spatial + [IterType.COMM_REDUCE] * (len(kinds) - n_spatial):
        return None
    read = _weight_read(block, func.params)
    if read is None:
        return None
    j, axes = read
    weight = func.params[j]
    if not _vector_fits(block, weight):
        return None
    extent = [int(iv.dom.extent.value) for iv in block.iter_vars]
    has_channel_reduction = len(kinds) - n_spatial in (1, 3)  # dense k; conv ry, rx, rc
    isa = isa_of(target)
    budget = 16 if isa.vector_registers >= 32 else 12  # accumulators, leaving operands
    data = next((r.buffer for r in block.reads if r.buffer is not weight), None)
    dot = None
    if has_channel_reduction and data is not None and extent[-1] % 4 == 0:
        dot = exact_dot_product(target, data.dtype, weight.dtype)
        if dot is not None and (extent[roles.chan] % dot[1] or not _dot_fits(block, weight)):
            dot = None
    if dot is not None:
        name, lanes = dot
        if name == "dot_16x4_vnni":
            # one vpdpbusd that reads its data as an embedded broadcast ({1to16}): the
            # register file less the (at most two) weight vectors and a spare holds
            # accumulators (28: ResNet-18's 56-column conv ran 1.08x faster at 14x2 than 8x2)
            budget = isa.vector_registers - 4
        rows, vectors = _tile(extent[roles.row], extent[roles.chan] // lanes, budget)
        return QuantizedPlan(tag, lanes, vectors, rows, name), j, axes
    lanes = isa.lanes("int32")
    v = channel_block(extent[roles.chan], lanes)
    if not v:
        return None
    rows, vectors = _tile(extent[roles.row], v // lanes, budget - 2)
    return QuantizedPlan(tag, lanes, vectors, rows, None), j, axes


def _packing(plan: QuantizedPlan, axes: list, n_iters: int) -> IndexMap:
    """Weight indices -> the packed ones: the tile's channels ``chan // (lanes * vectors)``,
    the reductions in loop order, then the tile's channels (vector path); tensorized, the
    reduced channel ``// 4`` among the reductions and the tile ``[vectors, lanes, 4]``
    innermost, each intrinsic's ``lanes x 4`` operand one contiguous block."""
    roles = QUANTIZED_TAGS[plan.tag]
    red, lanes, tile = n_iters - 1, plan.lanes, plan.lanes * plan.vectors

    def index_map(*idx):
        at = dict(zip(axes, idx))
        f = at[roles.chan]
        if plan.intrin is None:
            reductions = [at[p] for p in sorted(at) if p != roles.chan]
            return (f // tile, *reductions, f % tile)
        outer = [at[p] // 4 if p == red else at[p] for p in sorted(at) if p != roles.chan]
        return (f // tile, *outer, f % tile // lanes, f % lanes, at[red] % 4)

    return IndexMap.from_func(index_map, len(axes))


def pack_quantized_weights(
    func: PrimFunc, target: Target, layout_free: Collection[int] | None = None
) -> tuple[PrimFunc, dict[str, QuantizedPlan]]:
    """``func`` with the weight of each integer kernel packed for :func:`schedule_quantized`,
    and the plans by block name. Only the parameters in ``layout_free`` (constants the caller
    re-lays out; None: any) are packed; a depthwise weight (read contiguously along the
    channels already) is not."""
    plans: dict[str, QuantizedPlan] = {}
    for block in _blocks(func):
        found = _plan(block, func, target)
        if found is None:
            continue
        plan, j, axes = found
        if j in prepacked_args(func):
            continue
        if None in axes:
            if len(block.iter_vars) != 6:
                continue  # a constant index but not depthwise: leave it alone
        else:
            if layout_free is not None and j not in layout_free:
                continue
            func = rewrite_param_layout(func, j, _packing(plan, axes, len(block.iter_vars)))
        plans[block.name_hint] = plan
    return func, plans


def schedule_quantized(sch: Schedule, block, plan: QuantizedPlan) -> None:
    """Tile, tensorize or vectorize, and parallelise one integer kernel (see the module
    doc); its weight already packed by :func:`pack_quantized_weights`."""
    roles = QUANTIZED_TAGS[plan.tag]
    if plan.intrin is not None and plan.tag == "quantized_conv2d_nchw":
        _channels_last_input(sch, block)
    loops = sch.get_loops(block)
    n_spatial = 2 if plan.tag in ("quantized_dense", "quantized_matmul") else 4
    if len(loops) <= n_spatial:
        raise ScheduleError(f"schedule_quantized: {len(loops)} loops, expected a reduction")
    reductions = list(loops[n_spatial:])
    outer = [loops[p] for p in roles.outer]
    chan_o, chan_m, chan_i = sch.split(loops[roles.chan], [None, plan.vectors, plan.lanes])
    row_o, row_i = sch.split(loops[roles.row], [None, plan.rows])
    inner = [row_i, chan_m, chan_i]
    if plan.intrin is not None:
        red_o, red_i = sch.split(reductions[-1], [None, 4])
        reductions[-1] = red_o
        inner.append(red_i)
    tasks = [*outer[:1], chan_o, *outer[1:]]  # conv: n, f0, y
    sch.reorder(*tasks, row_o, *reductions, *inner)
    local = sch.cache_write(block, 0, "local")
    if plan.tag == "quantized_conv2d_nchw":  # the tile [column, channel], as in NHWC
        sch.transform_layout(block, ("write", 0), lambda a, b, c, d: (a, c, d, b))
    for consumer in sch.get_consumers(local):  # the epilogue, applied at write-back
        try:
            sch.reverse_compute_inline(consumer)
        except ScheduleError:
            pass
    for wb in sch.get_consumers(block):
        sch.reverse_compute_at(wb, row_o)
    init = sch.decompose_reduction(block, reductions[0])
    # a matmul's tasks: the column blocks by the row blocks
    sch.parallel(sch.fuse(*tasks) if outer else sch.fuse(chan_o, row_o))
    sch.unroll(row_i)
    sch.unroll(chan_m)
    if plan.intrin is not None:
        sch.tensorize(chan_i, plan.intrin)
    else:
        sch.vectorize(chan_i)
    init_loops = sch.get_loops(init)
    sch.unroll(init_loops[-3])
    sch.unroll(init_loops[-2])
    sch.vectorize(init_loops[-1])


def _channels_last_input(sch: Schedule, block) -> None:
    """Give an NCHW convolution its input channels last, where the dot product reads
    them as 4 contiguous bytes: the padding stage (or, without padding, a copy of the
    input) writes ``[n, h, w, c]``; one pass over the input, before the convolution."""
    blk = sch.get(block)
    rc = blk.iter_vars[-1].var  # (the weight is packed by now: not 4-D)
    data = [i for i, r in enumerate(blk.reads) if len(r.region) == 4 and r.region[1].min is rc]
    if len(data) != 1:
        raise ScheduleError(f"schedule_quantized: no NCHW input read in {blk.name_hint}")
    buf = blk.reads[data[0]].buffer
    producer = next(
        (p for p in sch.get_producers(block) if any(w.buffer is buf for w in sch.get(p).writes)),
        None,
    )
    if producer is None:  # the function's input: copy it
        producer = sch.cache_read(block, data[0], "global")
    sch.transform_layout(producer, ("write", 0), lambda n, c, h, w: (n, h, w, c))
