"""Register accumulators written as C: the tile of an :class:`~.c_accumulate.AccumulatorPlan`
loaded into variables before its reduction loops, updated by them and stored after
(:func:`emit_accumulated`), and a reduction nest started from its fused init nest
(:func:`emit_fused_init`, :mod:`.c_init_fusion`). See :mod:`.c_accumulate` for when a
tile is kept in variables.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..tir import expr as E
from ..tir.dtype import c_type
from ..tir.stmt import For, IfThenElse, SeqStmt, Stmt
from .c_accumulate import AccumulatorPlan, first_lane, point_width, simd_reduction_loop, store_of
from .c_helpers import c_comment_text
from .c_init_fusion import InitFusion
from .c_ir import access_key
from .c_limits import TileLimits
from .c_straight import straight_line, update_order
from .c_vector import DryWriter, NotVectorizable

if TYPE_CHECKING:
    from .c_writer import CpuEmitter

__all__ = ["emit_accumulated", "emit_fused_init", "init_fails", "tile_body", "tile_fails"]


def tile_body(plan: AccumulatorPlan, limits: TileLimits) -> tuple[Stmt, bool, bool]:
    """The statement that updates the tile of ``plan`` (its region loops around its points,
    in the order of :func:`.c_straight.update_order`; the innermost loops written out when
    :func:`.c_straight.straight_line` says so), whether it is straight-line code sharing
    its loads, and whether it shares broadcasts too."""
    ordered = dataclasses.replace(plan, points=update_order(plan))
    outer, straight, broadcasts = straight_line(ordered, limits)
    body: Stmt = SeqStmt(tuple(ordered.points)) if len(plan.points) > 1 else plan.points[0]
    if straight is not None:
        body = straight
    for lp in reversed(outer):
        body = For(lp.loop_var, lp.min, lp.extent, lp.kind, body, lp.thread_binding, lp.annotations)
    return body, straight is not None, broadcasts


def tile_fails(
    fw: CpuEmitter, plan: AccumulatorPlan, extra: tuple[For, ...] = (), body: Stmt | None = None
) -> str | None:
    """Why the tile of ``plan`` cannot be written as planned here (a point's vector code
    cannot be written, or the code reads the tile's buffer outside its accumulators), None
    if it can: the checks of writing it, on a writer that keeps nothing
    (:class:`.c_vector.DryWriter`). ``extra``: loops between here and the tile's loop;
    ``body``: the tile's :func:`tile_body`, if known."""
    keys = {access_key(plan.buffer, store_of(p).indices) for p in plan.points}
    dry = DryWriter(fw, (plan.buffer, keys))
    for lp in (*extra, *plan.outer):
        dry.var_names[lp.loop_var] = lp.loop_var.name
        dry.ranges[lp.loop_var] = (lp.min, lp.extent)
    try:
        dry.stmt(body if body is not None else tile_body(plan, fw.limits)[0])
    except NotVectorizable as why:
        return str(why)
    return None


def emit_accumulated(
    fw: CpuEmitter, plan: AccumulatorPlan, init: E.PrimExpr | None = None, checked: bool = False
) -> bool:
    """Emit the plan; False (nothing emitted) if it cannot be written as planned (checked
    first, :func:`tile_fails`, unless ``checked`` already). ``init``: the value every
    accumulator starts from (a fused init nest, :func:`.c_init_fusion.plan_init_fusion`)
    instead of the tile's contents in memory."""
    body, straight, broadcasts = tile_body(plan, fw.limits)
    if not checked and tile_fails(fw, plan, body=body) is not None:
        return False
    buf = plan.buffer
    t = c_type(buf.dtype)
    names: list[str] = []
    fw.accumulated = buf
    try:
        for lp in plan.outer:  # a split tile: its outer loops around the region
            name = fw.var_names.get(lp.loop_var) or fw.names.fresh(lp.loop_var.name)
            fw.var_names[lp.loop_var] = name
            fw.ranges[lp.loop_var] = (lp.min, lp.extent)
            fw.for_header(lp, name)
            fw.indent += 1
        fw.line(f"{{ // {c_comment_text(plan.describe())}")
        fw.indent += 1
        value = fw.expr(init) if init is not None else None
        for point in plan.points:
            name = fw.names.fresh(f"{buf.name}_acc")
            names.append(name)
            elem = f"{fw.buf_names[buf]}[{fw.index(buf, first_lane(point))}]"
            width = point_width(point)  # lanes, or fewer for a vector loop's remainder
            vt = fw.helpers.vtype(buf.dtype, width) if width > 1 else t
            if value is not None:
                start = (
                    f"{fw.helpers.vbroadcast(buf.dtype, width)}({value})" if width > 1 else value
                )
                fw.line(f"{vt} {name} = {start};")
            elif width > 1:
                fw.line(f"{vt} {name} = {fw.helpers.vload(buf.dtype, width)}(&{elem});")
            else:
                fw.line(f"{t} {name} = {elem};")
            fw.accumulators[access_key(buf, store_of(point).indices)] = name
        simd = simd_reduction_loop(plan)
        if simd is not None:
            fw.simd_reduction = (simd.loop_var, tuple(names))
        if straight:
            fw.shared_loads, fw.shared_decls = {}, []
            fw.shared_broadcasts = broadcasts
        decls_at = len(fw.lines)
        fw.stmt(body)
        # the shared loads' variables, declared before the loops (each pass assigns them
        # before it reads them: the updates are straight-line code)
        by_type: dict[str, list[str]] = {}
        for vt_name, ld in fw.shared_decls:
            by_type.setdefault(vt_name, []).append(ld)
        fw.lines[decls_at:decls_at] = [
            "  " * fw.indent + f"{vt_name} {', '.join(lds)};" for vt_name, lds in by_type.items()
        ]
        fw.accumulators.clear()
        fw.accumulated = None
        for point, name in zip(plan.points, names):
            elem = f"{fw.buf_names[buf]}[{fw.index(buf, first_lane(point))}]"
            width = point_width(point)
            vstore = fw.helpers.vstore(buf.dtype, width) if width > 1 else ""
            fw.line(f"{vstore}(&{elem}, {name});" if width > 1 else f"{elem} = {name};")
        fw.indent -= 1
        fw.line("}")
        for _ in plan.outer:
            fw.indent -= 1
            fw.line("}")
    finally:
        for lp in plan.outer:
            fw.ranges.pop(lp.loop_var, None)
        fw.accumulators.clear()
        fw.accumulated = None
        fw.simd_reduction = None
        fw.shared_loads, fw.shared_decls = None, []
        fw.shared_broadcasts = False
    return True


def emit_fused_init(fw: CpuEmitter, fusion: InitFusion, red: Stmt) -> bool:
    """Emit ``red`` with the init nest before it folded into its accumulators as
    ``fusion`` plans (:func:`.c_init_fusion.plan_init_fusion`); False (nothing emitted)
    when it cannot be written so (checked first, :func:`init_fails`)."""
    if init_fails(fw, fusion, red) is not None:
        return False
    fw.pending_init, fw.init_uses = fusion, set()
    try:
        fw.stmt(red)
    finally:
        fw.pending_init = None
    if fw.init_uses != {id(r) for r in fusion.roots}:  # checked by init_fails: a bug
        raise AssertionError(f"a fused init was not taken at every loop of {fusion.roots}")
    return True


def init_fails(fw: CpuEmitter, fusion: InitFusion, red: Stmt) -> str | None:
    """Why ``red`` cannot be written with its init folded in as ``fusion`` plans, None if
    it can: writing ``red`` reaches every root (no loop on the way keeps a tile or is made
    vector code itself) and the tile planned there can be written (:func:`tile_fails`)."""
    for root in fusion.roots:
        path = _path(red, root)
        if path is None:
            return f"loop {root.loop_var.name} is not in the reduction nest"
        for lp in path:
            if fw.tile_at(lp) is not None or fw.row_at(lp) is not None:
                return f"loop {lp.loop_var.name} above {root.loop_var.name} is written otherwise"
        plan = fw.tile_at(root)
        if plan is None:
            return f"no tile is planned at loop {root.loop_var.name}"
        why = tile_fails(fw, plan, tuple(path))
        if why is not None:
            return why
    return None


def _path(cur: Stmt, root: For) -> list[For] | None:
    """The loops from ``cur`` down to ``root`` (not included), None if it is not below."""
    if cur is root:
        return []
    if isinstance(cur, For):
        below = _path(cur.body, root)
        return None if below is None else [cur, *below]
    if isinstance(cur, IfThenElse):
        for branch in (cur.then_case, cur.else_case):
            below = None if branch is None else _path(branch, root)
            if below is not None:
                return below
    if isinstance(cur, SeqStmt):
        for x in cur.seq:
            below = _path(x, root)
            if below is not None:
                return below
    return None
