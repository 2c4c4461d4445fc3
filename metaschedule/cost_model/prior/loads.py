"""Operand loads of a register tile that the C code generator does not repeat, as the
analytic prior counts them: values kept in registers across the steps of a region written
out step by step (:func:`shared_loads`,
:func:`~metaschedule.codegen.c_accumulate.straight_line`), and loads made once before the
loop around the tile (:func:`invariant_loads`, :mod:`~metaschedule.codegen.c_invariant`).
"""

from __future__ import annotations

import functools
import math

# the code generator's switches are read at each call, as CodegenOptions.applied() sets them
from ...codegen import c_accumulate, c_codegen, c_invariant
from ...codegen.c_invariant import InvariantScope
from ...codegen.c_ir import chunks
from ...feature_extractor.features.linear import LinearForm
from ...feature_extractor.features.loop_nest import Store, const_int
from ...tir.buffer import Buffer
from ...tir.dtype import is_bool
from ...tir.stmt import ForKind
from .access import buffer_stats, first_strides, flat_strides
from .machine import Machine

__all__ = ["invariant_loads", "shared_loads"]


def shared_loads(
    st: Store,
    accesses: list,
    m: Machine,
    plan: tuple[int, list[int], float],
    split_out: list[int],
    vec_loop: int,
    accumulators: float,
) -> tuple[float, int, float] | None:
    """Operand load cycles of the whole store when the code generator writes the
    innermost loops of a register tile's region out step by step
    (:func:`~metaschedule.codegen.c_accumulate.straight_line`), with the number of
    region loops written out and the values a written-out block keeps in registers;
    else None: each
    operand vector, and each broadcast input scalar when the accumulators and the
    values held at once fit the registers (or the accumulators are few), is loaded once
    per written-out block and kept in a register (a 3x3 window over 4 pixels loads 6 x 3
    input pixels, not 9 x 4); an input scalar not kept is loaded by each step that
    reads it.

    As the code generator: a tile of at most ``max_straight_accumulators`` vectors of
    at least ``MIN_STRAIGHT_LANES`` lanes; the innermost region loops while they make at
    most ``STRAIGHT_STEPS`` steps and ``STRAIGHT_STATEMENTS`` updates; only when two
    steps read the same value (a sliding window)."""
    start, tile, _ = plan
    ext = st.extents
    if vec_loop < 0 or vec_loop not in tile or ext[vec_loop] < c_accumulate.MIN_STRAIGHT_LANES:
        return None
    if accumulators > m.limits.max_straight_accumulators:
        return None
    region = [j for j in range(start, len(ext)) if ext[j] > 1 and j not in tile]
    region = [j for j in region if j not in split_out]
    written: list[int] = []
    steps = 1
    for j in reversed(region):
        if (
            steps * ext[j] > c_accumulate.STRAIGHT_STEPS
            or accumulators * steps * ext[j] > c_accumulate.STRAIGHT_STATEMENTS
        ):
            break
        steps *= ext[j]
        written.insert(0, j)
    if not written:
        return None
    lanes = min(m.lanes, 1 << (ext[vec_loop].bit_length() - 1))
    chunks = -(-ext[vec_loop] // lanes)
    points = [j for j in tile if j != vec_loop and ext[j] > 1]
    n = len(ext)
    operands, gathered = [], 0.0
    labels: dict[int, int] = {}  # buffers numbered in order (the cache key stays small)
    for buf, lin in accesses:
        if buf is st.store.buffer:
            continue
        flat = flat_strides(buf, lin, n)
        if flat[vec_loop] not in (0.0, 1.0):  # a gather: a scalar load per lane and use
            gathered += math.prod(ext[j] for j in written + points) * ext[vec_loop]
            continue
        vector = flat[vec_loop] == 1.0
        step_offsets = _offsets([(flat[j], ext[j]) for j in written])
        point_offsets = _offsets(
            [(flat[j], ext[j]) for j in points]
            + ([(flat[vec_loop] * lanes, chunks)] if vector else [(0.0, chunks)])
        )
        operands.append(
            (labels.setdefault(id(buf), len(labels)), vector, step_offsets, point_offsets)
        )
    if not operands:
        return None
    reused, distinct, per_step, held = _window_sharing(tuple(operands))
    fits = accumulators + held <= m.vector_registers
    fits = fits or accumulators <= m.limits.broadcast_accumulators
    if c_accumulate.SHARE_BROADCASTS and reused[1] and fits:
        loads = kept = distinct[0] + distinct[1]  # the broadcasts kept too
    elif reused[0] and accumulators + distinct[0] <= m.vector_registers:
        # the broadcasts of each step, not kept; the vectors counted as kept only when
        # all of them fit beside the tile, as the prior counted them before broadcasts
        # were shared (the code generator shares them regardless; the depthwise
        # schedules of tests/cost_model/test_prior_depthwise.py are ranked so)
        loads, kept = distinct[0] + per_step, distinct[0]
    else:
        return None  # nothing shared (or kept): the loads of each step
    blocks = math.prod(ext) / (steps * math.prod(ext[j] for j in tile))
    return blocks * (loads + gathered) / m.loads_per_cycle, len(written), float(kept)


def _offsets(loops: list[tuple[float, int]]) -> tuple[float, ...]:
    """The offsets ``sum(stride * i)`` of every point of ``loops`` (``(stride, extent)``,
    outermost first), in loop order."""
    out = [0.0]
    for stride, extent in loops:
        out = [o + stride * i for o in out for i in range(extent)]
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def _window_sharing(
    operands: tuple[tuple[int, bool, tuple[float, ...], tuple[float, ...]], ...],
) -> tuple[tuple[bool, bool], tuple[int, int], int, int]:
    """Sharing among the written-out updates of a register tile, from each operand's
    ``(buffer number, vector, offsets per step, offsets per update of a step)``:
    ``((vector reused, broadcast reused), (distinct vectors, distinct broadcasts),
    distinct broadcasts of each step summed, most values held at once)``, a value held
    from its first use to its last (as the code generator's ``_shared_values`` counts)."""
    reused = [False, False]
    per_step = 0
    first: dict[tuple, tuple[int, int]] = {}  # value -> (step, update) of its first use
    last: dict[tuple, int] = {}
    n_steps, n_points = len(operands[0][2]), len(operands[0][3])
    for s in range(n_steps):
        seen: set[tuple] = set()
        for p in range(n_points):
            update = s * n_points + p
            for buf, vector, step_offsets, point_offsets in operands:
                key = (buf, vector, step_offsets[s] + point_offsets[p])
                hit = first.get(key)
                if hit is None:
                    first[key] = (s, update)
                elif hit[0] != s:
                    reused[0 if vector else 1] = True
                last[key] = update
                if not vector:
                    seen.add(key)
        per_step += len(seen)
    vectors = sum(1 for key in first if key[1])
    held = [0] * (n_steps * n_points + 1)  # values live at each update
    for key, (_, f) in first.items():
        if last[key] > f:
            held[f] += 1
            held[last[key] + 1] -= 1
    most = live = 0
    for delta in held:
        live += delta
        most = max(most, live)
    return (reused[0], reused[1]), (vectors, len(first) - vectors), per_step, most


def invariant_loads(
    st: Store,
    store_lin: list[LinearForm],
    accesses: list,
    m: Machine,
    plan: tuple[int, list[int], float],
    vec_loop: int,
    per_elem: float,
    accumulators: float,
    straight: tuple[int, float],
    row_at: int,
) -> float:
    """Load cycles the code generator saves by making the loads of a register tile that
    do not change across the loop around it once before that loop
    (:mod:`~metaschedule.codegen.c_invariant`): the ``B`` panel of a matmul's row read
    again by every row ``i``, where its loads outnumber the row's own.

    As the code generator: every reduction loop of the tile's region written out (the
    innermost ``straight[0]`` by :func:`~metaschedule.codegen.c_accumulate.straight_line`,
    the others unrolled explicitly, see :func:`_unrolled_explicitly`); the loop ``L``
    around the region (unit loops aside) a serial C loop whose body has no condition;
    the tile's loads that ``L`` does not move (not gathers, not of a buffer ``L``
    writes) made once per entry into ``L``, as many as the registers allow:
    :data:`~metaschedule.codegen.c_invariant.MAX_INVARIANT_SHARE` of them, less the
    accumulators, shared with the values a straight-line block keeps (``straight[1]``),
    which take registers as they come. A vector operand that stays a load is then read
    by each multiply-add that uses it: GCC folds the load into the instruction when the
    other operand is in a register (a matmul's ``B`` vector under 4 hoisted ``A`` rows:
    4 loads a step, not 1), so those extra loads are taken off what hoisting saves;
    a straight-line block keeps its vectors in registers instead. ``row_at``: where the
    loop of a serial row made vector code was (:func:`~.tiles.planned_row`), -1 if none."""
    if not c_invariant.HOIST_INVARIANT_LOADS:
        return 0.0
    start, tile, _ = plan
    ext, loops = st.extents, st.loops
    n = len(ext)
    # L: the innermost loop around the region that stays a C loop (unit loops and loops
    # written out copy by copy are constants in the code inside L)
    around = start - 1
    below = math.prod(ext[start:])  # statements of the nest below (c_codegen.steps)
    pieces = 1  # register-sized pieces of a vector statement (c_ir.vector_pieces)
    if vec_loop >= 0 and row_at < 0:
        below //= ext[vec_loop]  # a vectorized loop counts as one
        pieces = -(-ext[vec_loop] // m.lanes)
    while around >= 0:
        below *= ext[around]
        if ext[around] > 1 and not _unrolled_explicitly(
            st, around, below, row_at, c_codegen.EXPLICIT_UNROLL_STEPS, pieces
        ):
            break
        around -= 1
    if around < 0 or loops[around].kind not in (ForKind.SERIAL, ForKind.UNROLLED):
        return 0.0
    invariant: dict[Buffer, bool] = {}  # buffer -> whether every access of it is invariant in L
    for buf, lin in accesses:
        if buf is st.store.buffer:
            continue
        ok = not is_bool(buf.dtype) and all(around not in f.loops() for f in lin)
        if ok and vec_loop >= 0:
            ok = flat_strides(buf, lin, n)[vec_loop] in (0.0, 1.0)  # a gather is not hoisted
        invariant[buf] = invariant.get(buf, True) and ok
    if not any(invariant.values()):
        return 0.0
    # the loops of the region written out, and L a C loop
    region = [j for j in range(start, n) if ext[j] > 1 and j not in tile]
    points = max(1, int(round(accumulators)))
    steps = points
    for k, j in enumerate(reversed(region)):
        steps *= ext[j]
        if k >= straight[0] and not _unrolled_explicitly(
            st, j, steps, row_at, c_codegen.EXPLICIT_TILE_STEPS, pieces
        ):
            return 0.0
    scope = InvariantScope(loops[around].node, frozenset(), [], 0, 0)
    if not scope.safe():
        return 0.0
    # the distinct values the tile code reads per iteration of L, and the registers they
    # take: a broadcast one in each vector width of the tile's chunks (16 and 2 of 51
    # lanes), a scalar use reading a broadcast's first lane
    widths = 1
    if vec_loop >= 0:
        v = ext[vec_loop]
        lanes = m.lanes if v >= m.lanes else 1 << (v.bit_length() - 1)
        widths = max(1, len({w for _, w in chunks(v, lanes) if w > 1}))
    inside = tuple(e if j > around else 1 for j, e in enumerate(ext))
    values = registers = folded = 0.0
    # multiply-adds per iteration of L, in vectors: every one reads every operand
    uses = points * math.prod(ext[around + 1 :]) / math.prod(ext[j] for j in tile)
    stats = buffer_stats(st, store_lin, accesses, m, inside)
    for stat, flat in zip(stats, first_strides(st, store_lin, accesses, stats)):
        if stat.buffer is st.store.buffer:
            continue
        vector = vec_loop >= 0 and flat is not None and abs(flat[vec_loop]) == 1.0
        if not invariant.get(stat.buffer) or scope.writes(stat.buffer):
            if vector and not straight[0]:
                folded += max(0.0, uses - stat.footprint[0] * per_elem)
            continue
        if vector:
            values += stat.footprint[0] * per_elem  # vectors
            registers += stat.footprint[0] * per_elem
        else:
            values += stat.footprint[0]
            registers += stat.footprint[0] * widths
    budget = int(m.vector_registers * c_invariant.MAX_INVARIANT_SHARE) - points
    others = max(0.0, straight[1] - values)  # the block's own values, as they come
    if budget <= 0 or registers <= 0:
        return 0.0
    kept = registers if registers + others <= budget else budget * registers / (registers + others)
    entries = math.prod(ext[:around])
    saved = max(0.0, values - folded) * kept / registers
    return entries * (ext[around] - 1) * saved / m.loads_per_cycle


def _unrolled_explicitly(
    st: Store, j: int, steps: int, row_at: int, limit: int, pieces: int = 1
) -> bool:
    """Whether the code generator writes loop ``j`` out copy by copy
    (``c_codegen._unroll_mode``: ``explicit``) when it makes ``steps`` statements of
    ``pieces`` registers each: the loop unrolled (``pragma_auto_unroll_max_step`` of the
    innermost loop around it that has one, within
    :data:`~metaschedule.codegen.c_codegen.AUTO_UNROLL_STEPS` statements and
    :data:`~metaschedule.codegen.c_codegen.AUTO_UNROLL_PIECES` pieces, or an unrolled
    loop) and ``pragma_unroll_explicit`` set, ``steps`` at most ``limit``:
    :data:`~metaschedule.codegen.c_codegen.EXPLICIT_UNROLL_STEPS`, or
    :data:`~metaschedule.codegen.c_codegen.EXPLICIT_TILE_STEPS` in a register tile whose
    written-out steps read invariant loads."""
    loops = st.loops
    ancestors: list[int] = list(range(j + 1))
    if 0 <= row_at <= j:  # the row made vector code ran around the loops below it
        ancestors.insert(row_at, len(loops) - 1)
    auto, explicit = 0, False
    for q in ancestors:
        ann = loops[q].node.annotations
        if "pragma_auto_unroll_max_step" in ann:
            auto = const_int(ann["pragma_auto_unroll_max_step"], 0)
        if "pragma_unroll_explicit" in ann:
            explicit = bool(const_int(ann["pragma_unroll_explicit"], 0))
    kind = loops[j].kind
    wanted = kind is ForKind.UNROLLED or (
        kind is ForKind.SERIAL
        and auto > 0
        and steps <= min(auto, c_codegen.AUTO_UNROLL_STEPS)
        and steps * pieces <= c_codegen.AUTO_UNROLL_PIECES
    )
    return wanted and explicit and steps <= limit
