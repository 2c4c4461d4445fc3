"""The schedule a function gets when the database has none: inline, parallel, vectorize.

1. Inline every spatial block that is not an output into its consumers (biases,
   activations before the last one), then try inlining the remaining spatial epilogues
   into their producers. Padding stays a stage of its own, except before a window that
   reduces across no index of its own (a pool, a depthwise convolution): a padded copy
   would move as many bytes as the window, so the window reads the input through guarded
   loads, which the code generator versions away in the interior.
2. A dense NCHW or NHWC convolution is vectorized over output channels with its weight packed
   at compile time (:mod:`.schedule_conv`); so are the integer kernels (quantized conv2d,
   dense, matmul: :mod:`.schedule_quantized`), their 4-wide reductions tensorized with
   the target's exact dot product where it has one.
3. A pooling window (:mod:`..schedule_rule.window_tiling`): two output rows by a channel
   vector in registers across the window, its padding inlined as guarded loads.
4. Another reduction block: the innermost spatial loop moves inside the reduction loops
   when its accesses are contiguous along it (``i, j, k`` -> ``i0, j0, k, i1, j1`` for
   a matmul), split to at most ``2 * vector lanes`` and vectorized, with a register
   tile of a few rows (``i1``, unrolled) that keeps enough parallel work outside it;
   the tile accumulates in a local buffer whose write-back applies the epilogue
   (bias, residual, activation), and the init is hoisted out of the reduction. Matmuls
   take 8 rows, a depthwise convolution over NHWC channels 8 output columns (its tile
   shares only the weight vector), and a constant weight ``W[k, j]`` is taken in
   column panels ``[j0, k, j1]`` (packed at compile time, as ``RewriteLayout`` does for
   tuned schedules). An extent without small divisors (ViT's 197 tokens) is tiled anyway:
   rows by 8 with a guarded last tile (the code generator versions it, so the other
   tiles stay unguarded register tiles), a vector loop whole (the code generator writes
   its remainder in narrower vectors). A reduction along its input's innermost axis
   (softmax, layer norm) that this does not apply to gets its init hoisted, so that it
   runs in vector lanes.
5. An element-wise block whose inner extent the postprocessor's fuse-and-split would
   not divide is vectorized by a divisor of that extent (or whole, when none fits a
   vector: 197 is 12 vectors and a remainder); one that gathers along a
   loop too short for a vector (an image's 3 channels in an NCHW -> NHWC transpose)
   unrolls it, and the C compiler vectorizes the loop around it.
6. Annotate the root with parallel/vectorize limits and let the
   ``RewriteParallelVectorizeUnroll`` postprocessor fuse and parallelise the outer
   spatial loops and vectorize the inner ones left, as tuned schedules do.

Every step is a schedule primitive, so the result has a trace like a tuned schedule
(the weight packing of step 2 is a rewrite of the function before it).
"""

from __future__ import annotations

from collections.abc import Collection

from ..codegen.isa import isa_of
from ..postproc.rewrite_layout import suggest_layout
from ..postproc.rewrite_parallel_vectorize_unroll import (
    PARALLEL,
    UNROLL_EXPLICIT,
    VECTORIZE,
    RewriteParallelVectorizeUnroll,
)
from ..schedule import Schedule, ScheduleError
from ..schedule.prepacked import layout_free_params, prepacked_args
from ..schedule_rule.analysis import realize_of
from ..schedule_rule.window_tiling import plan_window, tile_window
from ..target import Target
from ..tir import ForKind, IterType
from ..tir.expr import Var
from ..tir.function import PrimFunc
from ..tir.functor import Visitor, collect_vars
from .schedule_conv import pack_conv_weights, schedule_conv
from .schedule_quantized import pack_quantized_weights, schedule_quantized


def _divisor_at_most(n: int, limit: int) -> int:
    for d in range(min(n, limit), 0, -1):
        if n % d == 0:
            return d
    return 1


#: output rows (channels) per register tile in reduction blocks
REGISTER_ROWS = 4
#: ... in matmuls (te tags ``matmul``, ``batch_matmul``, ``dense``): 8 rows by two
#: vectors, 16 accumulators, one weight-vector load per 8 FMAs (per CPU-second on BERT's
#: matmuls 1.5-2x the 4-row tile; 16 rows spilled)
MATMUL_REGISTER_ROWS = 8
MATMUL_TAGS = ("matmul", "batch_matmul", "dense")
#: a shared operand (matmul weight) this many times the L2 cache: the column blocks go
#: outside the row blocks (measured on BERT: 2.4x faster at 9.4 MB with a 1 MB L2,
#: slower at 2.4 MB)
COLUMNS_OUTSIDE_L2 = 4


#: output columns per register tile of a window over channels (an NHWC depthwise
#: convolution), by the channel vector: 8, or the divisor of the width it finds (7 at
#: 7x7, 14x14, 28x28); the columns share each tap's weight vector (one core, 960 channels
#: at 7x7: 3x3 3.1x, 5x5 3.3x as fast as 4 columns, which fell back to 1 column at 7)
WINDOW_COLUMNS = 8


def _columns_outside(blk, reg: int, v: Var, l2_bytes: int) -> bool:
    """Whether the operand the register rows share (read along the vector, not along
    the rows) is too big to stay cached while the row blocks sweep it."""
    u = blk.iter_vars[reg].var
    for r in blk.reads:
        names = _region_vars(r)
        if v in names and u not in names:
            n = 1
            for s in r.buffer.shape:
                n *= int(s)
            if n * 4 > COLUMNS_OUTSIDE_L2 * l2_bytes:
                return True
    return False


def _vector_factor(extent: int, lanes: int) -> int:
    """The vector length for a loop: a power-of-two divisor up to two vectors, else the
    largest divisor up to two vectors."""
    p = 1
    while p * 2 <= 2 * lanes and extent % (p * 2) == 0:
        p *= 2
    return p if p >= 4 else _divisor_at_most(extent, 2 * lanes)


#: the vector loop of a reduction whose extent no good vector length divides (197 tokens)
#: is vectorized whole up to this many vectors (the code generator covers the remainder in
#: narrower vectors: 197 = 12 x 16 + 4 + 1), else split by two vectors with a last tile
#: in part outside the extent, guarded and versioned by the code generator
WHOLE_VECTORS = 16
#: ... and its register tile holds at most this many vectors (QK^T of 197 tokens: 2 rows of
#: 14 vectors, 1.2x as fast as 1 row, 1.7x as fast as 8 rows by a guarded 16-lane tile)
MAX_TILE_VECTORS = 28


def _reduction_vector(extent: int, lanes: int) -> int:
    """The vector length of a reduction's output loop: :func:`_vector_factor`, or where
    that finds no divisor of at least 4, the whole loop up to :data:`WHOLE_VECTORS`
    vectors, else two vectors and a tail."""
    factor = _vector_factor(extent, lanes)
    if factor >= 4 or extent <= 3:
        return factor
    return extent if extent <= WHOLE_VECTORS * lanes else 2 * lanes


#: a reduction without rows to tile accumulates up to this many vectors of its output at
#: once: one vector alone waits on its own add latency every step (a global average pool
#: of 56x56x144: 35 us with one 16-lane vector, 3 vectors at once 3x faster)
WIDE_VECTORS = 8


def _wide_vector(extent: int, factor: int, lanes: int, outside: int, cores: int) -> int:
    """The vector loop of a reduction without a register tile: the largest multiple of
    ``factor`` dividing ``extent``, at most :data:`WIDE_VECTORS` vectors of ``lanes``, that
    leaves a chunk for every core (``outside``: the parallel iterations outside it)."""
    best = factor
    for f in range(2 * factor, min(extent, WIDE_VECTORS * lanes) + 1, factor):
        if extent % f == 0 and outside * (extent // f) >= cores:
            best = f
    return best


def _tile_rows(extent: int, limit: int) -> int:
    """Rows of a register tile over a loop of ``extent``: the largest divisor up to
    ``limit``, or ``limit`` with a last tile in part outside the extent (guarded, and
    versioned by the code generator: the other tiles run unguarded) when the divisor is
    under half of ``limit`` (or 1) and the extent more than twice it (197 rows: 24 tiles
    of 8 and one of 5, not 197 of 1)."""
    rows = _divisor_at_most(extent, limit)
    if (2 * rows < limit or rows == 1 < limit) and extent > 2 * limit:
        return limit
    return rows


def _region_vars(region) -> set:
    return {x for rng in region.region for x in collect_vars(rng.min)}


def _only_last_index(var: Var, regions) -> bool:
    """``var`` appears in no index but the last of every region (and in some region)."""
    seen = False
    for r in regions:
        for d, rng in enumerate(r.region):
            if var in collect_vars(rng.min):
                if d != len(r.region) - 1:
                    return False
                seen = True
    return seen


def _has_select(sch: Schedule, block) -> bool:
    found = []

    class _Find(Visitor):
        def visit_Select(self, node):
            found.append(node)

    _Find().visit(realize_of(sch, block)[1].block.body)
    return bool(found)


#: output rows per register tile of a pooling window (see :mod:`..schedule_rule.window_tiling`)
WINDOW_ROWS = 2


def _slides_over(consumer, buffer) -> bool:
    """Whether every reduction iterator of ``consumer`` indexes ``buffer`` only beside a
    spatial one (``y*s + ry``: a window), and some does: a depthwise convolution or a
    pool, not a dense one (its input channel ``rc`` is an index of its own)."""
    spatial = {iv.var for iv in consumer.iter_vars if iv.iter_type == IterType.DATA_PAR}
    reduce = {iv.var for iv in consumer.iter_vars} - spatial
    regions = [r for r in consumer.reads if r.buffer is buffer]
    if not reduce or not regions:
        return False
    for r in regions:
        for rng in r.region:
            names = collect_vars(rng.min)
            if names & reduce and not names & spatial:
                return False
    return True


def _window_over_channels(blk, v: Var) -> bool:
    """Whether ``blk`` slides a window over an input whose last index is the vector
    loop ``v`` alone (an NHWC depthwise convolution's channels): the register tile's
    outputs share no operand, so it takes :data:`WINDOW_COLUMNS` of them."""
    for r in blk.reads:
        if r.region and collect_vars(r.region[-1].min) == {v} and _slides_over(blk, r.buffer):
            return True
    return False


def _pads_a_window(sch: Schedule, block, lanes: int) -> bool:
    """Whether every consumer of ``block`` slides a window over it without reducing
    across an index of its own (a pool, a depthwise convolution): padding read there is
    a guarded load, which the code generator versions away in the interior, and a
    separate padding pass would move as many bytes as the window itself."""
    consumers = sch.get_consumers(block)
    if not consumers:
        return False
    if all(plan_window(sch, c, lanes) is not None for c in consumers):
        return True
    buffer = realize_of(sch, block)[1].block.writes[0].buffer
    return all(_slides_over(realize_of(sch, c)[1].block, buffer) for c in consumers)


#: a block is not inlined into a consumer that writes this many times its elements
BROADCAST_RATIO = 4


def _broadcast_into(sch: Schedule, block) -> bool:
    """Whether a consumer of ``block`` reads it broadcast (writes :data:`BROADCAST_RATIO`
    times its elements or more): inlined, the block would be computed again for every
    element of the consumer (a squeeze-excite gate's sigmoid once per pixel, not once
    per channel); as a stage of its own it is computed once."""
    blk = realize_of(sch, block)[1].block
    if not blk.writes:
        return False
    small = blk.writes[0].buffer.numel()
    for consumer in sch.get_consumers(block):
        c = realize_of(sch, consumer)[1].block
        if c.writes and c.writes[0].buffer.numel() >= BROADCAST_RATIO * small:
            return True
    return False


def _inline(sch: Schedule, root, lanes: int) -> None:
    for block in reversed(sch.get_child_blocks(root)):
        if _has_select(sch, block) and not _pads_a_window(sch, block, lanes):
            continue  # padding: a conditional in the consumer's inner loop
        if _broadcast_into(sch, block):
            continue
        try:
            sch.compute_inline(block)
        except ScheduleError:
            pass
    for block in sch.get_child_blocks(root):
        try:
            sch.reverse_compute_inline(block)
        except ScheduleError:
            pass


def _reorder_reduction(sch: Schedule, block, lanes: int, cores: int, l2_bytes: int) -> None:
    _, realize = realize_of(sch, block)
    blk = realize.block
    if all(iv.iter_type == IterType.DATA_PAR for iv in blk.iter_vars):
        return
    loops = sch.get_loops(block)
    kinds = []
    for lp, iv, val in zip(loops, blk.iter_vars, realize.iter_values):
        loop = sch.get(lp)
        if not isinstance(val, Var) or val is not loop.loop_var:
            return  # not the plain loop nest create_prim_func makes
        kinds.append(iv.iter_type)
    if len(kinds) != len(loops) or kinds[-1] == IterType.DATA_PAR:
        return
    spatial = [i for i, k in enumerate(kinds) if k == IterType.DATA_PAR]
    if not spatial or any(k != IterType.DATA_PAR for k in kinds[: spatial[-1]]):
        return
    last = spatial[-1]
    v = blk.iter_vars[last].var
    if not _only_last_index(v, blk.writes) or not all(
        _only_last_index(v, [r])
        for r in blk.reads
        if v in {x for rng in r.region for x in collect_vars(rng.min)}
    ):
        return
    extent = int(sch.get(loops[last]).extent.value)
    factor = _reduction_vector(extent, lanes)
    reduce_loops = loops[last + 1 :]
    # a register tile: a spatial loop that some operand of the vector does not depend
    # on (conv: the output channel; matmul: the row) is split and unrolled inside
    reg = None
    for k in range(last - 1, -1, -1):
        u = blk.iter_vars[k].var
        ext_k = int(sch.get(loops[k]).extent.value)
        if ext_k > 1 and any(u not in _region_vars(r) and v in _region_vars(r) for r in blk.reads):
            reg = k
            break
    if reg is None and last >= 1 and int(sch.get(loops[last - 1]).extent.value) > 1:
        reg = last - 1  # independent accumulators all the same (depthwise: output rows)
    if reg is None:  # no rows to tile (a global pool): several vectors of the output
        outside = 1
        for k in spatial[:-1]:
            outside *= int(sch.get(loops[k]).extent.value)
        factor = _wide_vector(extent, factor, lanes, outside, cores)
    outer, inner = sch.split(loops[last], [None, factor])
    rows = WINDOW_COLUMNS if _window_over_channels(blk, v) else _register_rows(blk)
    if reg is not None:
        ext_r = int(sch.get(loops[reg]).extent.value)
        vectors = -(-factor // lanes)
        limit = max(1, min(rows, MAX_TILE_VECTORS // vectors))
        rf = _tile_rows(ext_r, limit)
        # keep enough parallel work outside the tile for every core
        others = 1
        for k in spatial[:-1]:
            if k != reg:
                others *= int(sch.get(loops[k]).extent.value)
        others *= -(-extent // factor)
        while rf > 1 and others * -(-ext_r // rf) < cores:
            rf = _tile_rows(ext_r, rf - 1)
        r_outer, r_inner = sch.split(loops[reg], [None, rf])
        if _columns_outside(blk, reg, v, l2_bytes):
            # the column block outside the row blocks: the weight strip one column block
            # reads over the whole reduction stays in cache for every row block
            between = [outer, r_outer, *loops[reg + 1 : last]]
        else:
            between = [r_outer, *loops[reg + 1 : last], outer]
        sch.reorder(*between, *reduce_loops, r_inner, inner)
        tile = between[-1]
        sch.unroll(r_inner)
    else:
        sch.reorder(outer, *reduce_loops, inner)
        tile = outer
    sch.vectorize(inner)
    # accumulate the register tile in a local buffer, written back after the reduction
    # with the epilogue applied; the init hoisted out of the reduction loops
    try:
        local = sch.cache_write(block, 0, "local")
    except ScheduleError:
        return
    for consumer in sch.get_consumers(local):
        try:
            sch.reverse_compute_inline(consumer)
        except ScheduleError:
            pass
    for wb in sch.get_consumers(block):
        sch.reverse_compute_at(wb, tile)
    try:
        init = sch.decompose_reduction(block, reduce_loops[0])
    except ScheduleError:
        return
    init_loops = sch.get_loops(init)
    sch.vectorize(init_loops[-1])
    if reg is not None:
        sch.unroll(init_loops[-2])


def _hoist_row_reduction_init(sch: Schedule, block) -> None:
    """A reduction along the innermost, contiguous axis of its input (softmax's row max
    and sum of exponentials, layer norm's mean and variance) that ``_reorder_reduction``
    left as it was: its init moves out of the reduction loop, so the loop is a plain
    accumulation the code generator writes as vector code (partial sums in lanes,
    vector ``exp``) instead of a scalar loop that tests for its first step."""
    _, realize = realize_of(sch, block)
    blk = realize.block
    if blk.init is None or blk.iter_vars[-1].iter_type != IterType.COMM_REDUCE:
        return
    loops = sch.get_loops(block)
    if len(loops) != len(blk.iter_vars):
        return
    sch.decompose_reduction(block, loops[-1])


def _register_rows(blk) -> int:
    """The rows of the register tile of a reduction block (see MATMUL_REGISTER_ROWS)."""
    return MATMUL_REGISTER_ROWS if blk.annotations.get("tag") in MATMUL_TAGS else REGISTER_ROWS


def _tile_window(sch: Schedule, block, plan) -> None:
    """A pooling window: ``WINDOW_ROWS`` output rows by a channel vector kept in registers
    across the window (the tuned space's WindowTiling sketch), the init outside it."""
    rows = int(sch.get(sch.get_loops(block)[plan.row]).extent.value)
    row_inner, _ = tile_window(sch, block, plan, min(WINDOW_ROWS, rows))
    sch.unroll(row_inner)
    loops = sch.get_loops(block)
    first_window = len(loops) - 2 - len(plan.reductions)
    sch.decompose_reduction(block, loops[first_window])


def _vectorize_spatial(sch: Schedule, block, lanes: int) -> None:
    """Vectorize the innermost loop of a plain element-wise block by a divisor of its
    extent when the postprocessor's fuse-and-split by ``2 * lanes`` would not divide it
    (a vector over a fused loop is only possible where the split divides the rows)."""
    _, realize = realize_of(sch, block)
    blk = realize.block
    if not all(iv.iter_type == IterType.DATA_PAR for iv in blk.iter_vars) or _has_select(
        sch, block
    ):
        return
    loops = sch.get_loops(block)
    if len(loops) < 2:
        return
    extent = int(sch.get(loops[-1]).extent.value)
    if extent % (2 * lanes) == 0:
        return
    factor = _vector_factor(extent, lanes)
    if factor < 4 and extent >= lanes:
        factor = extent  # no divisor fits a vector (197): the code generator chunks it
    if factor < 4:
        return
    if factor < extent:
        _, inner = sch.split(loops[-1], [None, factor])
    else:
        inner = loops[-1]
    sch.vectorize(inner)


#: an innermost spatial loop this short is unrolled, not vectorized (see _unroll_short_inner)
SHORT_INNER = 3


def _unroll_short_inner(sch: Schedule, block) -> None:
    """Unroll the innermost loop of an element-wise block that gathers along it (a read
    steps by more than one element) when it is too short for a vector (at most
    :data:`SHORT_INNER`: the 3 channels of an NHWC image). The postprocessor cannot fuse
    it with the loops outside (the gather is not contiguous), so vectorized it would be a
    2-lane vector and a scalar per point; unrolled, the C compiler vectorizes the loop
    around it (an image row), interleaving the channels with permutes: a 1x3x224x224
    NCHW -> NHWC transpose runs 1.7x faster."""
    _, realize = realize_of(sch, block)
    blk = realize.block
    if not all(iv.iter_type == IterType.DATA_PAR for iv in blk.iter_vars):
        return
    loops = sch.get_loops(block)
    if len(loops) < 2:
        return
    inner = sch.get(loops[-1])
    extent = int(inner.extent.value)
    if not 1 < extent <= SHORT_INNER or inner.kind != ForKind.SERIAL:
        return
    v = blk.iter_vars[-1].var
    if all(_only_last_index(v, [r]) for r in blk.reads if v in _region_vars(r)):
        return  # contiguous: the postprocessor fuses it with the loops outside
    sch.unroll(loops[-1])


def default_schedule(
    func: PrimFunc, target: Target | str = "cpu", layout_free: Collection[int] | None = None
) -> Schedule:
    """A parallel, vectorized schedule of ``func`` without search (see the module doc).

    The schedule's function may take a convolution's weight in another layout than
    ``func`` (recorded in ``attrs["prepacked_args"]``; see :mod:`.weight_layout`):
    only a parameter in ``layout_free`` (the indices of parameters that are constants
    the caller re-lays out, as ``compile_relax`` passes; None: any parameter).
    """
    target = target if isinstance(target, Target) else Target(target)
    lanes = isa_of(target).lanes("float32")
    func, convs = pack_conv_weights(func, lanes, layout_free)
    func, quantized = pack_quantized_weights(func, target, layout_free)
    cores = int(target.attrs.get("num_cores") or target.num_cores or 1)
    l2_bytes = int(target.attrs.get("l2_cache_bytes") or 1 << 20)
    sch = Schedule(func)
    root = sch.get_block("root")
    _inline(sch, root, lanes)
    for block in sch.get_child_blocks(root):
        try:
            window = plan_window(sch, block, lanes)
            name = sch.get(block).name_hint
            if name in convs:
                schedule_conv(sch, block, convs[name], lanes)
            elif name in quantized:
                schedule_quantized(sch, block, quantized[name])
            elif window is not None:
                _tile_window(sch, block, window)
            else:
                _reorder_reduction(sch, block, lanes, cores, l2_bytes)
                _hoist_row_reduction_init(sch, block)
        except ScheduleError:
            pass
    for block in sch.get_child_blocks(root):
        try:
            _vectorize_spatial(sch, block, lanes)
            _unroll_short_inner(sch, block)
        except ScheduleError:
            pass
    sch.annotate(root, PARALLEL, cores * 16)
    sch.annotate(root, VECTORIZE, 2 * lanes)
    sch.annotate(root, UNROLL_EXPLICIT, 16)
    sch.enter_postproc()
    RewriteParallelVectorizeUnroll().apply(sch)
    _pack_reduction_weights(sch, layout_free)
    return sch


def _pack_reduction_weights(sch: Schedule, layout_free: Collection[int] | None) -> None:
    """Re-lay out each constant weight of a matmul (``W[k, j]``) in the
    order the register tile walks it, as the ``RewriteLayout`` postprocessor does for
    tuned schedules: ``[j0, k, j1]``, the panel of one column block contiguous. Rows of
    a weight a multiple of 4 KiB apart (BERT's ``768 x 3072``) otherwise all fall into the
    same L1 sets, and every block of columns re-reads its panel from L2 at a new stride."""
    func = sch.mod["main"]
    done = prepacked_args(func)
    for j in layout_free_params(func):
        if j in done or j >= len(func.params) or (layout_free is not None and j not in layout_free):
            continue
        if len(func.params[j].shape) < 2:
            continue
        plan = suggest_layout(sch.mod["main"], j)
        if plan is None:
            continue
        try:
            block = sch.get_block(plan.block)
            if sch.get(block).annotations.get("tag") not in MATMUL_TAGS:
                continue  # convolutions: packed (or deliberately not) by schedule_conv
            sch.transform_layout(block, ("read", plan.read_index), plan.index_map)
        except ScheduleError:
            continue
