"""A register tile's updates as they are written: the innermost reduction steps written
out straight (:func:`straight_line`), and the order of a step's updates
(:func:`update_order`). The switches are :mod:`.c_accumulate`'s (``STRAIGHT_STEPS``,
``SHARE_BROADCASTS``, ``ORDER_UPDATES``, ...)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..tir import expr as E
from ..tir.buffer import Buffer
from ..tir.functor import substitute
from ..tir.stmt import For, ForKind, SeqStmt, Stmt
from ..tir.transform.affine import affine
from . import c_accumulate as acc
from .c_accumulate import (
    AccumulatorPlan,
    TileLimits,
    body_accesses,
    const_extent,
    loop_points,
    point_width,
)
from .c_expr import linear_index
from .c_ir import access_key

__all__ = ["straight_line", "update_order"]


def straight_line(
    plan: AccumulatorPlan, limits: TileLimits
) -> tuple[tuple[For, ...], Stmt | None, bool]:
    """The region split into its outer loops and, for a vector tile, its innermost loops
    written out: every update of every step, step by step, as one sequence (None if no
    loop qualifies, see :data:`.c_accumulate.STRAIGHT_STEPS`), and whether the broadcast scalars are
    shared too.

    Written out, the updates of neighbouring points and steps read the same values (a
    3x3 window slid by one pixel reads each input pixel up to three times: a vector of a
    depthwise input, the broadcast input scalar of a convolution over channels; a weight
    is shared by the tile's pixels): each is loaded (and broadcast) once and kept in a
    register (``FunctionWriter.shared_loads``), as LLVM's value numbering does for TVM
    after it unrolls the same nest. Broadcasts are shared when two steps read the same
    one and the accumulators and the values held at once fit the vector registers
    (or the accumulators are few, :class:`TileLimits`); else only the vector
    loads, if two steps read the same vector. Each element is updated by the same steps
    in the same order.
    """
    n = len(plan.points)
    if plan.lanes < acc.MIN_STRAIGHT_LANES or n > limits.max_straight_accumulators:
        return plan.region, None, False
    steps, k = 1, len(plan.region)
    while k > 0:
        lp = plan.region[k - 1]
        ext = const_extent(lp)
        if ext is None or lp.kind not in (ForKind.SERIAL, ForKind.UNROLLED):
            break
        if steps * ext > acc.STRAIGHT_STEPS or n * steps * ext > acc.STRAIGHT_STATEMENTS:
            break
        steps, k = steps * ext, k - 1
    inner = plan.region[k:]
    if not inner:
        return plan.region, None, False
    combos = loop_points(list(inner), {})
    vectors_reused, broadcasts_reused, held = _shared_values(plan, combos)
    fits = n + held <= limits.straight_registers or n <= limits.broadcast_accumulators
    broadcasts = acc.SHARE_BROADCASTS and broadcasts_reused and fits
    if not (broadcasts or vectors_reused):
        return plan.region, None, False  # nothing to share that the compiler does not share
    updates = [substitute(p, c) for c in combos for p in plan.points]
    return plan.region[:k], SeqStmt(tuple(updates)), broadcasts


def update_order(plan: AccumulatorPlan) -> tuple[Stmt, ...]:
    """The points in the order their updates are written in a step: the tile's own
    order, or its points grouped by the broadcast scalar they read when that keeps fewer
    loaded operands live at once (:func:`_peak_live`).

    A convolution's tile is an outer product: a broadcast input scalar per pixel times a
    weight vector per output-channel vector. Written weight vector by weight vector (the
    tile loops' order when the channel loop is outside the pixel loop), every pixel's
    broadcast stays live across the step (14 pixels by 2 vectors: 28 accumulators, 14
    broadcasts and a vector, 43 of AVX-512's 32 registers); written pixel by pixel, two
    weight vectors and one broadcast (31). GCC keeps the written order (it schedules no
    instructions before register allocation on x86) and spills accumulators to the stack
    instead: a load and a store on a chain of updates in every step. Measured on cbr's
    third-best tuned schedule (one thread): five accumulators spilled, 244 GFLOPS;
    grouped, none, 265. Vector operands are not grouped (a depthwise tile, input vector
    times weight vector: 0.98x). Each accumulator's updates, and so the result, are the
    same in any order: the points update distinct elements and only read other buffers.
    """
    points = tuple(plan.points)
    if not acc.ORDER_UPDATES or len(points) < 3:
        return points
    operands = [
        [
            (vector, point_width(p), access_key(ld.buffer, ld.indices))
            for ld, vector in _operands(p, plan.buffer)
        ]
        for p in points
    ]
    first: dict[tuple, int] = {}
    for i, keys in enumerate(operands):
        for k in keys:
            first.setdefault(k, i)
    # grouped by their broadcasts (each broadcast's points in the tile's order)
    order = sorted(
        range(len(points)), key=lambda i: (sorted(first[k] for k in operands[i] if not k[0]), i)
    )
    if _peak_live(operands, order) < _peak_live(operands, range(len(points))):
        return tuple(points[i] for i in order)
    return points


def _peak_live(operands: list[list[tuple]], order) -> int:
    """The most operand values live at once when the points' updates are written in
    ``order``: each from its first use to its last, one step at a time."""
    span: dict[tuple, list[int]] = {}
    for pos, i in enumerate(order):
        for k in operands[i]:
            span.setdefault(k, [pos, pos])[1] = pos
    return _most_at_once(span.values(), len(operands))


def _most_at_once(spans: Iterable[Sequence[int]], n: int) -> int:
    """The most of the inclusive ``[first, last]`` spans over ``0..n-1`` that overlap at
    one position."""
    live = [0] * (n + 1)
    for first, last in spans:
        live[first] += 1
        live[last + 1] -= 1
    most = cur = 0
    for d in live:
        cur += d
        most = max(most, cur)
    return most


def _shared_values(plan: AccumulatorPlan, combos: list[dict]) -> tuple[bool, bool, int]:
    """``(vectors reused, broadcasts reused, held)`` for the points updated step by step
    (``combos``: the steps): whether two steps read the same input vector, the same
    broadcast scalar (a window sliding over its input; within one step the compiler
    shares loads itself), and the most of these values held in registers at once, each
    from its first to its last use (what the written-out updates keep busy beside the
    accumulators)."""
    operands = [_operands(point, plan.buffer) for point in plan.points]
    uses: dict[tuple, list[int]] = {}  # key -> [first step, first update, last update]
    reused = [False, False]  # broadcast, vector
    update = 0
    for step, combo in enumerate(combos):
        for point, loads in zip(plan.points, operands):
            for ld, vector in loads:
                indices = [substitute(i, combo) for i in ld.indices]
                key = (vector, point_width(point), access_key(ld.buffer, indices))
                use = uses.setdefault(key, [step, update, update])
                use[2] = update
                if use[0] != step:
                    reused[vector] = True
            update += 1
    held = [(first, last) for _, first, last in uses.values() if last > first]
    return reused[True], reused[False], _most_at_once(held, update)


def _operands(point: Stmt, acc: Buffer) -> list[tuple[E.BufferLoad, bool]]:
    """The loads of a vector point that the written-out updates may share, each with
    True for a vector (unit stride along the lanes), False for a broadcast scalar (no
    lane dependence); gathers and the accumulated buffer ``acc`` are left out."""
    if not isinstance(point, For):
        return []
    found = body_accesses(point.body)
    if found is None:
        return []
    lane, out = point.loop_var, []
    for ld in found[1]:
        if ld.buffer is acc:
            continue
        form = affine(linear_index(ld.buffer, ld.indices))
        if not form.uses(lane):
            out.append((ld, False))
        elif form.coef(lane) == 1 and not form.without(lane).uses(lane):
            out.append((ld, True))
    return out
