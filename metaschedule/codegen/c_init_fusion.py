"""A reduction's init nest folded into its register accumulators: the plan.

A reduction block decomposed by ``RewriteReductionBlock`` leaves its init as a loop nest
just before the reduction nest. When the init nest writes exactly the elements of the
tile that :func:`.c_accumulate.plan_accumulators` keeps in variables, the accumulators
start from the init value and the init nest is not emitted (see the docstring of
:mod:`.c_accumulate`; switches ``FUSE_INIT``, ``MAX_INIT_ELEMENTS`` there).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..tir import expr as E
from ..tir.functor import collect_vars, substitute
from ..tir.stmt import BufferStore, For, ForKind, IfThenElse, Stmt
from . import c_accumulate as acc
from .c_accumulate import (
    AccumulatorPlan,
    PlanTarget,
    const_extent,
    first_lane,
    loop_chain,
    loop_points,
    plan_accumulators,
    point_width,
)
from .c_ir import access_key, has_load, int_value

__all__ = ["InitFusion", "plan_init_fusion"]


@dataclass(frozen=True)
class InitFusion:
    """An init nest folded into the accumulators of the reduction nest after it.

    Attributes:
        roots: the loops of the reduction nest where accumulator plans start (one, or
            one per copy of a versioned body).
        value: the value the init stores (into every element of the tile).
    """

    roots: tuple[For, ...]
    value: E.PrimExpr


def plan_init_fusion(fw: PlanTarget, init: Stmt, red: Stmt) -> InitFusion | None:
    """Whether the init nest ``init`` (run just before ``red``) can start ``red``'s
    accumulators instead of being stored: ``init`` is a perfect nest storing one
    load-free value into buffer ``B``; ``red`` descends through serial loops (each
    non-unit one matched with the next non-unit loop of ``init``, same extent) to a
    loop where :func:`.c_accumulate.plan_accumulators` keeps a tile of ``B`` in variables; and the
    rest of ``init`` stores exactly that tile's elements. None otherwise."""
    if not acc.FUSE_INIT or not isinstance(init, For) or not isinstance(red, For):
        return None
    ichain, ibody = loop_chain(init)
    if not isinstance(ibody, BufferStore):
        return None
    if any(
        const_extent(lp) is None
        or lp.kind not in (ForKind.SERIAL, ForKind.UNROLLED, ForKind.VECTORIZED)
        for lp in ichain
    ):
        return None
    ivars = {lp.loop_var for lp in ichain}
    if has_load(ibody.value) or collect_vars(ibody.value) & ivars:
        return None
    roots = _fused_roots(fw, ichain, ibody, 0, {}, {}, red)
    return InitFusion(tuple(roots), ibody.value) if roots else None


def _fused_roots(
    fw: PlanTarget,
    ichain: list[For],
    ibody: BufferStore,
    k: int,
    subst: dict[E.Var, E.PrimExpr],
    red_consts: dict[E.Var, E.PrimExpr],
    cur: Stmt,
) -> list[For] | None:
    """The planned loops below ``cur`` whose tiles are what the init nest from
    ``ichain[k]`` on writes (``subst``: init loops already matched; ``red_consts``: unit
    loops of the reduction nest), or None. Both copies of a versioned body
    (:mod:`.c_versioning`) must take the init."""
    if isinstance(cur, IfThenElse):
        if cur.else_case is None:
            return None
        then = _fused_roots(fw, ichain, ibody, k, subst, red_consts, cur.then_case)
        other = _fused_roots(fw, ichain, ibody, k, subst, red_consts, cur.else_case)
        return then + other if then and other else None
    if not isinstance(cur, For):
        return None
    plan = plan_accumulators(fw, cur)
    if plan is not None:
        return [cur] if _covers(ichain[k:], ibody, subst, red_consts, plan) else None
    ext = const_extent(cur)
    if ext is None or cur.kind not in (ForKind.SERIAL, ForKind.UNROLLED):
        return None
    if ext == 1:
        red_consts = {**red_consts, cur.loop_var: cur.min}
    else:
        subst = dict(subst)
        while k < len(ichain) and const_extent(ichain[k]) == 1:
            subst[ichain[k].loop_var] = ichain[k].min
            k += 1
        if k == len(ichain):
            return None
        ilp = ichain[k]
        same = const_extent(ilp) == ext and int_value(ilp.min) == int_value(cur.min)
        if not same or ilp.kind is ForKind.VECTORIZED:
            return None
        subst[ilp.loop_var] = cur.loop_var
        k += 1
    return _fused_roots(fw, ichain, ibody, k, subst, red_consts, cur.body)


def _covers(
    rest: list[For],
    ibody: BufferStore,
    subst: dict[E.Var, E.PrimExpr],
    red_consts: dict[E.Var, E.PrimExpr],
    plan: AccumulatorPlan,
) -> bool:
    """Whether the init loops ``rest`` store exactly the elements of ``plan``'s tile."""
    buf = plan.buffer
    if buf is not ibody.buffer:
        return False
    n = 1
    for lp in rest:
        n *= int_value(lp.extent)
    if n > acc.MAX_INIT_ELEMENTS:
        return False
    combos = loop_points(rest, subst)
    init_keys = {access_key(buf, [substitute(i, c) for i in ibody.indices]) for c in combos}
    tile_keys: set[tuple] = set()
    for point in plan.points:
        bid, terms, const = access_key(buf, [substitute(i, red_consts) for i in first_lane(point)])
        tile_keys.update((bid, terms, const + lane) for lane in range(point_width(point)))
    return init_keys == tile_keys
