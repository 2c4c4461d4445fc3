"""The legality checks and the loop nest of ``compute_at`` / ``reverse_compute_at``.

:func:`plan_compute_at` checks that a block may move under a loop (stage order, affine
bindings, complete or reduction block, regions covered) and returns the replacements
that the primitive commits: the block rebuilt under new loops ``ax0, ax1, ...`` bound to
``region start + loop``, with a predicate where the region may leave its domain.
"""

from __future__ import annotations

import dataclasses

from ...tir import (
    BlockRealize,
    Buffer,
    BufferRegion,
    For,
    ForKind,
    IterType,
    PrimExpr,
    Stmt,
    Var,
)
from ...tir.expr import IntImm, const, is_const_int, logical_and
from ...tir.functor import collect_vars
from ...tir.op import max as op_max
from ...tir.op import min as op_min
from ...tir.stmt import seq, true
from ..affine import check_affine_binding
from ..analysis import (
    analyzer_for_loops,
    buffers_of,
    check_complete_or_reduction,
    check_only_writer,
    consumers,
    is_ancestor,
    loop_doms,
    producers,
    readers_in_scope,
    relax_region,
    scope_blocks,
    subtree_blocks,
    union_regions,
    writers_in_scope,
)
from ..edit import removal_target, remove_stmt, stmt_children
from ..error import (
    InsertionIndexError,
    LoopPositionError,
    NotAllBlocksUnderLoopError,
    ScheduleError,
)
from ..linear import LinearProver, linear_terms
from ..state import ScheduleState

__all__ = ["can_compute_at", "plan_compute_at"]


def _names(realizes) -> list[str]:
    return [r.block.name_hint for r in realizes]


def _position_checks(
    state: ScheduleState, fname: str, realize: BlockRealize, loop: For, primitive: str
) -> None:
    bname, lname = realize.block.name_hint, loop.loop_var.name
    if is_ancestor(state, fname, realize, loop):
        raise LoopPositionError(
            f"{primitive}: loop {lname} is inside block {bname!r}; the "
            "block cannot move under its own loop"
        )
    if state.scope_realize(fname, realize) is None:
        raise LoopPositionError(f"{primitive}: block {bname!r} is the root block")
    if state.scope_realize(fname, loop) is not state.scope_realize(fname, realize):
        scope = state.scope_realize(fname, loop)
        where = scope.block.name_hint if scope is not None else "?"
        raise LoopPositionError(
            f"{primitive}: loop {lname} is in the scope of block {where!r}, not in the scope of "
            f"block {bname!r}; block and loop must be under the same scope block"
        )


def _inner_loops(state: ScheduleState, fname: str, realize: BlockRealize, loop: For) -> list[For]:
    """Loops between ``loop`` (exclusive) and ``realize``."""
    loops = state.loops_above(fname, realize)
    idx = next(i for i, lp in enumerate(loops) if lp is loop)
    return loops[idx + 1 :]


def _required_regions(state, fname, others, loop, buffers, pick, ana) -> dict[Buffer, BufferRegion]:
    """Per buffer, the union of what ``others`` access (``pick``: reads or writes) in one
    iteration of ``loop``.

    As TVM, a buffer that GPU threads share is relaxed over the thread-bound loops at and
    above ``loop`` too: a ``shared`` cache under a ``threadIdx`` loop holds what every
    thread of the block needs (the threads then fetch it cooperatively), a ``global`` one
    what every block needs; a ``local`` one only what its thread needs.
    """
    regions = []
    for r in others:
        wanted = [reg for reg in pick(r.block) if reg.buffer in buffers]
        if not wanted:
            continue
        inner = _inner_loops(state, fname, r, loop)
        outer = state.loops_above(fname, r)[: len(state.loops_above(fname, r)) - len(inner)]
        for reg in wanted:
            shared_over = [lp for lp in outer if _relaxed_under_thread(reg.buffer.scope, lp)]
            regions.extend(relax_region([reg], r, [*shared_over, *inner], ana))
    return {reg.buffer: reg for reg in union_regions(regions, ana)}


def _relaxed_under_thread(scope: str, loop: For) -> bool:
    """Whether a buffer of ``scope`` is shared by the threads ``loop`` is bound to."""
    if loop.kind is not ForKind.THREAD_BINDING:
        return False
    tag = loop.thread_binding or ""
    if scope.startswith("warp"):
        return tag == "threadIdx.x"
    if scope.startswith("shared"):
        return tag.startswith(("threadIdx", "vthread"))
    if scope == "global":
        return tag.startswith(("threadIdx", "vthread", "blockIdx"))
    return False


def _var_requirements(realize, provided, required, ana, primitive, strict) -> dict:
    """Per iteration variable of the moved block, the inclusive ``(lo, hi)`` it must cover.

    ``provided`` are the moved block's own regions of the exchanged buffers (its writes
    for compute_at, its reads for reverse_compute_at). A dimension indexed by a plain
    iteration variable restricts that variable; with ``strict`` (reverse_compute_at) any
    other index is an error, since then the iterations a loop provides are unknown.
    """
    ivars = {iv.var for iv in realize.block.iter_vars}
    reqs: dict[Var, list] = {}
    name = realize.block.name_hint
    for reg in provided:
        req = required.get(reg.buffer)
        if req is None:
            continue
        for d, (rng, rq) in enumerate(zip(reg.region, req.region)):
            lo = rq.min
            hi = ana.simplify(rq.min + rq.extent - 1)
            if isinstance(rng.min, Var) and rng.min in ivars and is_const_int(rng.extent, 1):
                reqs.setdefault(rng.min, []).append((lo, hi))
                continue
            used = (collect_vars(rng.min) | collect_vars(rng.extent)) & ivars
            if not strict:
                continue  # compute_at: those variables keep their whole domain
            if used or not (
                ana.can_prove(lo <= rng.min) and ana.can_prove(rng.min + rng.extent - 1 <= hi)
            ):
                raise ScheduleError(
                    f"{primitive}: block {name!r} accesses {reg.buffer.name!r} in dimension "
                    f"{d} at [{rng.min}, {rng.min} + {rng.extent}), which is not a single "
                    "iteration variable; cannot tell which of its iterations the loop provides"
                )
    out = {}
    for v, spans in reqs.items():
        lo, hi = spans[0]
        for lo2, hi2 in spans[1:]:
            if strict:
                if not (ana.can_prove_equal(lo, lo2) and ana.can_prove_equal(hi, hi2)):
                    raise ScheduleError(
                        f"{primitive}: block {name!r} needs {v.name} in [{lo}, {hi}] for one "
                        f"buffer and [{lo2}, {hi2}] for another; cannot place it"
                    )
            else:
                lo = ana.simplify(op_min(lo, lo2))
                hi = ana.simplify(op_max(hi, hi2))
        out[v] = (lo, hi)
    return out


def _build_nest(
    realize: BlockRealize,
    reqs: dict,
    prover: LinearProver,
    preserve_unit_loops: bool,
    primitive: str,
    reverse: bool,
) -> Stmt:
    """The moved block under fresh loops covering ``reqs`` (whole domains elsewhere)."""
    name = realize.block.name_hint
    le, simplify = prover.le, prover.simplify
    loops: list[tuple[Var, PrimExpr]] = []
    bindings: list[PrimExpr] = []
    conds: list[PrimExpr] = []
    for iv in realize.block.iter_vars:
        dmin, dext = iv.dom.min, iv.dom.extent
        dmax = simplify(dmin + dext - 1)
        ext: PrimExpr
        region_cap = False  # the loop runs past the region: stop at its end
        if iv.var in reqs:
            lo, hi = reqs[iv.var]
            if (
                reverse
                and iv.iter_type != IterType.DATA_PAR
                and not (le(lo, dmin) and le(dmax, hi))
            ):
                raise ScheduleError(
                    f"{primitive}: the loop would split the reduction variable {iv.var.name} of "
                    f"block {name!r} ([{lo}, {hi}] of [{dmin}, {dmax}]); move it to a loop "
                    "outside the producers' reduction"
                )
            # a region reaching past the domain on a side that always does is clamped there
            if le(lo, dmin):
                lo = dmin
            if le(dmax, hi):
                hi = dmax
            ext = simplify(hi - lo + 1)
            if not isinstance(ext, IntImm):
                bound = prover.ana.const_int_bound(ext)
                if not bound.is_bounded():
                    raise ScheduleError(
                        f"{primitive}: cannot bound the extent {ext} of the region of "
                        f"{iv.var.name} for block {name!r}"
                    )
                ext = const(max(1, bound.max_value), iv.var.dtype)
                region_cap = True
            need_lo = not le(dmin, lo)
            need_hi = not le(lo + ext - 1, dmax)
        else:
            lo, hi, ext = dmin, dmax, dext
            need_lo = need_hi = False
        if is_const_int(ext, 1) and not preserve_unit_loops:
            value = lo
        else:
            ax = Var(f"ax{len(loops)}", iv.var.dtype)
            loops.append((ax, ext))
            value = ax if isinstance(lo, IntImm) and lo.value == 0 else lo + ax
        bindings.append(value)
        if need_lo:
            conds.append(value >= dmin)
        if region_cap:
            conds.append(value <= hi)
        if need_hi:
            conds.append(value < simplify(dmin + dext))
    pred = logical_and(*conds) if conds else true()
    stmt: Stmt = BlockRealize(tuple(bindings), pred, realize.block)
    for ax, ext in reversed(loops):
        stmt = For(ax, const(0, ax.dtype), ext, ForKind.SERIAL, stmt)
    return stmt


def _insert_position(subtrees, before_blocks, after_blocks, index, primitive, what) -> int:
    """Legal positions are after every subtree holding a block of ``before_blocks`` and at or
    before the first subtree holding one of ``after_blocks``; -1 is the last, -2 the first."""

    def holds(stmt, group):
        return any(any(b is g for g in group) for b in subtree_blocks(stmt)) or any(
            stmt is g for g in group
        )

    lo = 0
    for i, s in enumerate(subtrees):
        if holds(s, before_blocks):
            lo = i + 1
    hi = len(subtrees)
    for i, s in enumerate(subtrees):
        if holds(s, after_blocks):
            hi = i
            break
    if lo > hi:
        raise InsertionIndexError(
            f"{primitive}: no place for {what} in the loop: a block it must follow comes after "
            "a block it must precede"
        )
    if index == -1:
        return hi
    if index == -2:
        return lo
    if not isinstance(index, int) or not lo <= index <= hi:
        raise InsertionIndexError(
            f"{primitive}: index must be -1, -2 or in [{lo}, {hi}] for {what}, got {index}"
        )
    return index


def _check_stage_order(blocks, pos, realize, primitive) -> None:
    """Inputs are written before the block, outputs read after it (a stage pipeline)."""
    bname, here = realize.block.name_hint, pos[id(realize)]
    for buf in buffers_of(realize.block.reads):
        late = [w for w in writers_in_scope(blocks, buf) if pos[id(w)] > here]
        if late:
            raise ScheduleError(
                f"{primitive}: block {late[0].block.name_hint!r} writes "
                f"{buf.name!r}, read by {bname!r}, after it"
            )
    for buf in buffers_of(realize.block.writes):
        early = [r for r in readers_in_scope(blocks, buf) if pos[id(r)] < here]
        if early:
            raise ScheduleError(
                f"{primitive}: block {early[0].block.name_hint!r} reads the "
                f"output of {bname!r} before it is written"
            )


def _consumer_side(blocks, realize, under, loop, primitive):
    """compute_at: (consumers, exchanged buffers, blocks to follow, blocks to precede)."""
    bname, lname = realize.block.name_hint, loop.loop_var.name
    others = consumers(blocks, realize)
    if not others:
        raise NotAllBlocksUnderLoopError(
            f"{primitive}: block {bname!r} has no consumer in "
            "its scope; there is nothing to compute it at"
        )
    missing = [c for c in others if not any(c is u for u in under)]
    if missing:
        raise NotAllBlocksUnderLoopError(
            f"{primitive}: consumers {_names(missing)} of block {bname!r} are not under loop "
            f"{lname}; every consumer must be under the loop"
        )
    return others, buffers_of(realize.block.writes), producers(blocks, realize), others


def _producer_side(blocks, pos, realize, under, loop, primitive):
    """reverse_compute_at: (producers under the loop, exchanged buffers, blocks to follow,
    blocks to precede)."""
    bname, lname = realize.block.name_hint, loop.loop_var.name
    prods = producers(blocks, realize)
    others = [p for p in prods if any(p is u for u in under)]
    if not others:
        raise NotAllBlocksUnderLoopError(
            f"{primitive}: no producer of block {bname!r} is under loop {lname}"
        )
    first_under = min(pos[id(u)] for u in under)
    stray = [p for p in prods if not any(p is o for o in others) and pos[id(p)] > first_under]
    if stray:
        raise NotAllBlocksUnderLoopError(
            f"{primitive}: producers {_names(stray)} of block {bname!r} are neither under loop"
            f" {lname} nor before it"
        )
    for p in others:
        check_only_writer(blocks, p)
    exchanged = [
        b
        for b in buffers_of(realize.block.reads)
        if any(w is o for o in others for w in writers_in_scope(blocks, b))
    ]
    return others, exchanged, prods, consumers(blocks, realize)


def can_compute_at(state: ScheduleState, fname: str, realize: BlockRealize, loop: For) -> bool:
    """Whether ``compute_at(realize, loop)`` is legal: what :func:`plan_compute_at`
    (``reverse=False``) decides, without building the moved nest where that cannot fail.

    The nest can only fail on a region extent it cannot bound. When every index of the
    consumers' reads of the block's outputs is linear, with integer coefficients, in loops
    of constant ranges (and the read extents are constant), the regions, their union and
    so every extent are bounded by those ranges: then only the checks before the regions
    and the insertion and removal checks after the nest decide. Otherwise the whole plan
    is built (tests check both give the same answers)."""
    try:
        checked = _plan_checks(state, fname, realize, loop, reverse=False)
        if not _regions_are_linear(state, fname, checked.others, loop, checked.exchanged):
            plan_compute_at(state, fname, realize, loop, False, -1, reverse=False)
            return True
        subtrees = stmt_children(loop.body)
        at = _insert_position(subtrees, checked.before, checked.after, -1, "compute_at", "")
        _removal(state, fname, realize, loop, subtrees, at, None)
    except ScheduleError:
        return False
    return True


def _regions_are_linear(state, fname, others, loop: For, exchanged) -> bool:
    """Whether every read of ``exchanged`` by ``others`` is, per dimension, a constant
    extent at an index linear in loops of constant range above the reader."""
    buffers = set(exchanged)
    for r in others:
        regions = [reg for reg in r.block.reads if reg.buffer in buffers]
        if not regions:
            continue
        boxed = {
            lp.loop_var
            for lp in state.loops_above(fname, r)
            if isinstance(lp.min, IntImm) and isinstance(lp.extent, IntImm)
        }
        values = {iv.var: v for iv, v in zip(r.block.iter_vars, r.iter_values)}
        forms: dict[Var, dict[Var, int] | None] = {}
        for iv_var, v in values.items():
            lin = linear_terms(v)
            forms[iv_var] = None if lin is None or not set(lin[1]) <= boxed else lin[1]
        for reg in regions:
            for rng in reg.region:
                if not isinstance(rng.extent, IntImm):
                    return False
                lin = linear_terms(rng.min)
                if lin is None:
                    return False
                for v in lin[1]:
                    if v in forms:
                        if forms[v] is None:
                            return False
                    elif v not in boxed:
                        return False
    return True


@dataclasses.dataclass
class _Checked:
    """What the checks of :func:`plan_compute_at` found before the regions."""

    blocks: list
    others: list
    exchanged: list
    before: list
    after: list


def _plan_checks(
    state: ScheduleState, fname: str, realize: BlockRealize, loop: For, reverse: bool
) -> _Checked:
    """The checks of a compute_at (or reverse_compute_at) that need no regions."""
    primitive = "reverse_compute_at" if reverse else "compute_at"
    _position_checks(state, fname, realize, loop, primitive)
    blocks = scope_blocks(state, fname, realize)
    pos = {id(r): i for i, r in enumerate(blocks)}
    check_complete_or_reduction(blocks, realize, primitive)
    check_affine_binding(state, fname, realize, primitive)
    under = [r for r in blocks if is_ancestor(state, fname, loop, r)]
    if reverse:
        others, exchanged, before, after = _producer_side(
            blocks, pos, realize, under, loop, primitive
        )
    else:
        others, exchanged, before, after = _consumer_side(blocks, realize, under, loop, primitive)
    _check_stage_order(blocks, pos, realize, primitive)
    return _Checked(blocks, others, exchanged, before, after)


def _removal(state, fname, realize, loop, subtrees, at, nest) -> dict[Stmt, Stmt | None]:
    """The replacements that insert ``nest`` at ``at`` of ``loop``'s body and remove the
    block from where it was (``ScheduleError`` if that leaves an empty scope); with
    ``nest=None`` only the removal is checked."""
    items: list[Stmt | None] = subtrees[:at] + [nest] + subtrees[at:]
    target = removal_target(state, fname, realize)
    mapping: dict[Stmt, Stmt | None] = {}
    if any(s is target for s in subtrees):
        items = [s for s in items if s is not target]
    elif is_ancestor(state, fname, loop, target):
        items = [
            remove_stmt(s, target) if is_ancestor(state, fname, s, target) else s for s in items
        ]
    else:
        mapping[target] = None
    if nest is not None:
        mapping[loop] = dataclasses.replace(loop, body=seq(*items))
    return mapping


def plan_compute_at(
    state: ScheduleState,
    fname: str,
    realize: BlockRealize,
    loop: For,
    preserve_unit_loops: bool,
    index: int,
    reverse: bool,
) -> dict[Stmt, Stmt]:
    """Check a compute_at (or reverse_compute_at) and return the replacements to commit."""
    primitive = "reverse_compute_at" if reverse else "compute_at"
    bname = realize.block.name_hint
    checked = _plan_checks(state, fname, realize, loop, reverse)
    outer = state.loops_above(fname, loop) + [loop]
    ana = analyzer_for_loops(outer)
    pick = (lambda b: b.writes) if reverse else (lambda b: b.reads)
    required = _required_regions(
        state, fname, checked.others, loop, set(checked.exchanged), pick, ana
    )
    provided = [
        r
        for r in (realize.block.reads if reverse else realize.block.writes)
        if r.buffer in required
    ]
    reqs = _var_requirements(realize, provided, required, ana, primitive, strict=reverse)
    prover = LinearProver(ana, loop_doms(outer))
    nest = _build_nest(realize, reqs, prover, preserve_unit_loops, primitive, reverse)
    # where it goes, and where it leaves ----------------------------------------------------
    subtrees = stmt_children(loop.body)
    at = _insert_position(
        subtrees, checked.before, checked.after, index, primitive, f"block {bname!r}"
    )
    return _removal(state, fname, realize, loop, subtrees, at, nest)
