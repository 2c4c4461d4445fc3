"""The default schedule of a dense 2-D convolution (one group; NCHW data with an OIHW
weight, or NHWC data with an HWIO weight).

The output channels are the vector dimension: the weight is packed once, at compile
time, to ``[F // v, C, KH, KW, v]`` (:mod:`.weight_layout`), and a register tile of
``v`` channels by ``t`` output columns accumulates in a local buffer laid out
``[column, channel]``::

    parallel for n, f0, y:                      # N * F / v * OH tasks
        for x0:
            acc[t, v] = 0
            for c, ry, rx:                      # the whole reduction
                for x1 in unroll(t):
                    for f1 in vectorized(v):    # one weight vector, a broadcast input
                        acc[x1, f1] += in[n, c, y*s + ry, (x0*t + x1)*s + rx] * w[f0, c, ry, rx, f1]
            out[n, f0*v + f1, y, x0*t + x1] = epilogue(acc[x1, f1])

In NHWC the weight is packed to ``[F // v, KH, KW, C, v]``, the reduction runs
``ry, rx, c`` (the input channels contiguous) and the tile is already laid out
``[column, channel]`` in the output.

``v`` is one or two vectors and ``t`` the largest divisor of the output width that
keeps the tile within the vector registers. Padding stays a separate stage (one pass
over the input); bias, residual additions and activations are applied as the tile is
written back.
"""

from __future__ import annotations

from collections.abc import Collection

from ..schedule import Schedule, ScheduleError
from ..schedule.prepacked import prepacked_args
from ..tir import Block, IterType
from ..tir.expr import Var
from ..tir.function import PrimFunc
from ..tir.functor import Visitor
from .weight_layout import hwio_to_blocked, oihw_to_blocked, rewrite_param_layout

CONV_TAG = "conv2d_nchw"
NHWC_CONV_TAG = "conv2d_nhwc"
#: per layout tag: the block iter vars (n, spatial..., f, reductions...) the weight is
#: read at, in the weight's order
_WEIGHT_INDEX = {CONV_TAG: (1, 4, 5, 6), NHWC_CONV_TAG: (4, 5, 6, 3)}


def _divisor_at_most(n: int, limit: int) -> int:
    for d in range(min(n, max(limit, 1)), 0, -1):
        if n % d == 0:
            return d
    return 1


def _blocks(func: PrimFunc) -> list[Block]:
    found: list[Block] = []

    class _Find(Visitor):
        def visit_Block(self, node):
            found.append(node)
            self.generic_visit(node)

    _Find().visit(func.body)
    return found


def _dense_conv_weight(block: Block, params) -> int | None:
    """The parameter index of the weight of a one-group NCHW or NHWC conv block, else None."""
    tag = block.annotations.get("tag")
    if tag not in _WEIGHT_INDEX or len(block.iter_vars) != 7:
        return None
    kinds = "".join("S" if iv.iter_type == IterType.DATA_PAR else "R" for iv in block.iter_vars)
    if kinds != "SSSSRRR":
        return None
    # NCHW: w[ff, rc, ry, rx]; NHWC: w[ry, rx, rc, ff]
    want = [block.iter_vars[i].var for i in _WEIGHT_INDEX[tag]]
    for r in block.reads:
        mins = [rng.min for rng in r.region]
        if len(mins) == 4 and all(isinstance(m, Var) and m is v for m, v in zip(mins, want)):
            for j, p in enumerate(params):
                if p is r.buffer:
                    return j
    return None


def channel_block(channels: int, lanes: int) -> int:
    """Output channels per tile: two vectors when they divide ``channels``, else one,
    else 0 (not vectorized over channels)."""
    for v in (2 * lanes, lanes):
        if channels % v == 0:
            return v
    return 0


def pack_conv_weights(
    func: PrimFunc, lanes: int, layout_free: Collection[int] | None = None
) -> tuple[PrimFunc, dict[str, int]]:
    """``func`` with the weight of each dense conv packed for :func:`schedule_conv`, and
    the packed conv blocks' names with their channel block. Only the parameters in
    ``layout_free`` (constants the caller re-lays out; None: any) are packed."""
    convs: dict[str, int] = {}
    for block in _blocks(func):
        j = _dense_conv_weight(block, func.params)
        if j is None or j in prepacked_args(func):
            continue
        if layout_free is not None and j not in layout_free:
            continue
        nhwc = block.annotations.get("tag") == NHWC_CONV_TAG
        f_axis = 3 if nhwc else 0
        v = channel_block(int(func.params[j].shape[f_axis]), lanes)
        if not v:
            continue
        func = rewrite_param_layout(func, j, hwio_to_blocked(v) if nhwc else oihw_to_blocked(v))
        convs[block.name_hint] = v
    return func, convs


def _extent(sch: Schedule, loop) -> int:
    return int(sch.get(loop).extent.value)


def schedule_conv(sch: Schedule, block, v: int, lanes: int) -> None:
    """Tile, vectorize and parallelise one packed conv block (see the module doc)."""
    loops = sch.get_loops(block)
    if len(loops) != 7:
        raise ScheduleError(f"schedule_conv: expected 7 loops, found {len(loops)}")
    nhwc = sch.get(block).annotations.get("tag") == NHWC_CONV_TAG
    if nhwc:
        n, y, x, f, ry, rx, rc = loops
        reduction = (ry, rx, rc)
    else:
        n, f, y, x, rc, ry, rx = loops
        reduction = (rc, ry, rx)
    budget = 14 if lanes >= 16 else 12  # accumulator vectors, leaving room for operands
    t = _divisor_at_most(_extent(sch, x), budget // (v // lanes))
    f0, f1 = sch.split(f, [None, v])
    x0, x1 = sch.split(x, [None, t])
    sch.reorder(n, f0, y, x0, *reduction, x1, f1)
    local = sch.cache_write(block, 0, "local")
    if not nhwc:  # the tile [column, channel], as NHWC has it already
        sch.transform_layout(block, ("write", 0), lambda a, b, c, d: (a, c, d, b))
    for consumer in sch.get_consumers(local):  # the epilogue, applied at write-back
        try:
            sch.reverse_compute_inline(consumer)
        except ScheduleError:
            pass
    for wb in sch.get_consumers(block):
        sch.reverse_compute_at(wb, x0)
    init = sch.decompose_reduction(block, reduction[0])
    sch.parallel(sch.fuse(n, f0, y))
    sch.unroll(x1)
    sch.vectorize(f1)
    init_loops = sch.get_loops(init)
    sch.unroll(init_loops[-2])
    sch.vectorize(init_loops[-1])
