"""``RewriteLayout``: read each constant weight in the order its schedule walks it.

A parameter listed in ``attrs["layout_free_buffers"]`` (a weight, re-laid out once ahead of
time by whoever calls the function) gets the layout of the loop nest that reads it: each
loop around the reading block that moves an index of the weight contributes one dimension
of its extent, outermost loop first, so the innermost loops read consecutive memory. A
dense weight ``W[64, 32]`` read as ``W[j, k]`` under the loops ``j0, k0, j1, k1`` (extents
4, 2, 16, 16; ``j = j0 * 16 + j1``, ``k = k0 * 16 + k1``) becomes ``W[4, 2, 16, 16]``::

    IndexMap(lambda i0, i1: (i0 // 16, i1 // 16, i0 % 16, i1 % 16))

Loops that do not move the weight's indices are left out. The map is recorded, with the
original shape, in
``attrs["prepacked_args"]`` (see :mod:`metaschedule.schedule.prepacked`), and applied to the
weight once by :func:`metaschedule.pack_weights` or, for whole models, at compile time.

The rewrite is ``sch.transform_layout`` of the parameter, so it is in the trace and
replays. Where we differ from TVM on purpose: TVM inserts a ``cache_read`` block that a
Relax pass later splits into a separate pre-processing function; we rewrite the parameter
itself and say how to pack it. A weight is skipped (the schedule is kept as it is) when it
is written, read by several blocks or through a copy (``cache_read``), read with several
different indices, under a nested block, or when its indices are not mixed-radix sums of
perfectly tiled loops; applying the postprocessor again changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..schedule import ScheduleError
from ..schedule.index_map import IndexMap
from ..schedule.prepacked import layout_free_params, prepacked_args, written_buffers
from ..schedule.state import child_stmts
from ..tir import Block, BlockRealize, Buffer, BufferLoad, BufferStore, For, PrimFunc, Stmt, Var
from ..tir.arith import Analyzer
from ..tir.expr import Add, FloorDiv, FloorMod, IntImm, Mul, PrimExpr
from ..tir.functor import Visitor, substitute
from ..tir.structural import structural_equal
from .base import Postproc

if TYPE_CHECKING:
    from ..schedule import Schedule

__all__ = ["RewriteLayout", "suggest_layout"]


class RewriteLayout(Postproc):
    """Have each layout-free weight read in its schedule's loop order (see the module doc).

    Never rejects a schedule: a weight it cannot analyse keeps its layout.
    """

    def apply(self, sch: Schedule) -> bool:
        for fname in list(sch.mod.functions):
            func = sch.mod[fname]
            done = prepacked_args(func)
            for j in layout_free_params(func):
                if j in done or j >= len(func.params):
                    continue
                plan = suggest_layout(sch.mod[fname], j)
                if plan is None:
                    continue
                try:
                    block = sch.get_block(plan.block, fname)
                    sch.transform_layout(block, ("read", plan.read_index), plan.index_map)
                except ScheduleError:
                    continue
        return True


@dataclass(frozen=True)
class LayoutPlan:
    """Where and how to re-lay out one parameter."""

    block: str
    read_index: int
    index_map: IndexMap


@dataclass(frozen=True)
class _Digit:
    """``(loop // lower) % extent`` of loop number ``position``, scaled by ``coeff`` in
    one index of the weight."""

    position: int
    lower: int
    extent: int
    coeff: int


def suggest_layout(func: PrimFunc, index: int) -> LayoutPlan | None:
    """The layout of parameter ``index`` that its reading block's loops walk in order, or
    None (not rewritable, or already in that layout)."""
    buf = func.params[index]
    if buf in written_buffers(func):
        return None
    readers = _readers(func, buf)
    if len(readers) != 1:
        return None
    realize, loops = readers[0]
    if loops is None or _is_copy(realize.block, buf):
        return None
    indices = _unique_indices(realize.block, buf)
    if indices is None:
        return None
    read_index = next(k for k, r in enumerate(realize.block.reads) if r.buffer is buf)
    bind = {iv.var: v for iv, v in zip(realize.block.iter_vars, realize.iter_values)}
    position: dict[Var, tuple[int, int]] = {}
    for k, lp in enumerate(loops):
        if not (isinstance(lp.min, IntImm) and lp.min.value == 0 and isinstance(lp.extent, IntImm)):
            return None
        position[lp.loop_var] = (k, lp.extent.value)
    ana = Analyzer()
    dims: list[list[_Digit]] = []
    for d, e in enumerate(indices):
        digits = _digits(ana.simplify(substitute(e, bind)), position)
        if digits is None or not _mixed_radix(digits, int(buf.shape[d])):
            return None
        dims.append(sorted(digits, key=lambda g: g.coeff))
    new = sorted(
        ((d, g) for d, digits in enumerate(dims) for g in digits),
        key=lambda dg: (dg[1].position, -dg[1].lower),
    )
    order = [d for d, _ in new]
    if order == sorted(order) and all(len(ds) <= 1 for ds in dims):
        return None  # already the loop order (up to dimensions of extent 1)
    names = [Var(f"i{d}", "int32") for d in range(len(dims))]
    final = []
    for d, g in new:
        e: PrimExpr = names[d]
        if g.coeff != 1:
            e = e // g.coeff
        if g.coeff * g.extent != int(buf.shape[d]):
            e = e % g.extent
        final.append(e)
    if not final:
        return None
    return LayoutPlan(realize.block.name_hint, read_index, IndexMap(tuple(names), tuple(final)))


def _readers(func: PrimFunc, buf: Buffer) -> list[tuple[BlockRealize, list[For] | None]]:
    """The blocks that read ``buf`` with the loops from the root down to each (None under
    another block than the root)."""
    found: list[tuple[BlockRealize, list[For] | None]] = []

    def walk(node: Stmt, loops: list[For], nested: bool) -> None:
        if isinstance(node, BlockRealize):
            if any(r.buffer is buf for r in node.block.reads):
                found.append((node, None if nested else list(loops)))
            for child in child_stmts(node.block):
                walk(child, [], True)
        elif isinstance(node, For):
            walk(node.body, [*loops, node], nested)
        else:
            for child in child_stmts(node):
                walk(child, loops, nested)

    root = func.body
    if isinstance(root, BlockRealize):
        for child in child_stmts(root.block):
            walk(child, [], False)
    return found


def _loads(block: Block, buf: Buffer) -> list[BufferLoad]:
    loads: list[BufferLoad] = []

    class _Find(Visitor):
        def visit_BufferLoad(self, node: BufferLoad) -> None:
            if node.buffer is buf:
                loads.append(node)
            self.generic_visit(node)

    _Find().visit(block.body)
    if block.init is not None:
        _Find().visit(block.init)
    return loads


def _unique_indices(block: Block, buf: Buffer) -> tuple[PrimExpr, ...] | None:
    loads = _loads(block, buf)
    if not loads or any(not structural_equal(ld.indices, loads[0].indices) for ld in loads):
        return None
    return loads[0].indices


def _is_copy(block: Block, buf: Buffer) -> bool:
    """A block that only copies ``buf`` elsewhere (a ``cache_read``)."""
    body = block.body
    return (
        isinstance(body, BufferStore)
        and isinstance(body.value, BufferLoad)
        and body.value.buffer is buf
    )


def _digits(e: PrimExpr, position: dict[Var, tuple[int, int]]) -> list[_Digit] | None:
    """``e`` as a sum of scaled digits of loops, or None (another form, or a constant)."""
    out: list[_Digit] = []

    def piece(x: PrimExpr) -> tuple[int, int, int] | None:  # (position, lower, extent)
        if isinstance(x, Var) and x in position:
            k, ext = position[x]
            return k, 1, ext
        if isinstance(x, FloorDiv) and isinstance(x.b, IntImm) and x.b.value > 0:
            inner = piece(x.a)
            c = x.b.value
            if inner is None or inner[2] % c:
                return None
            return inner[0], inner[1] * c, inner[2] // c
        if isinstance(x, FloorMod) and isinstance(x.b, IntImm) and x.b.value > 0:
            inner = piece(x.a)
            c = x.b.value
            if inner is None:
                return None
            if inner[2] <= c:
                return inner
            if inner[2] % c:
                return None
            return inner[0], inner[1], c
        return None

    def walk(x: PrimExpr, coeff: int) -> bool:
        if isinstance(x, Add):
            return walk(x.a, coeff) and walk(x.b, coeff)
        if isinstance(x, Mul) and isinstance(x.b, IntImm):
            return walk(x.a, coeff * x.b.value)
        if isinstance(x, Mul) and isinstance(x.a, IntImm):
            return walk(x.b, coeff * x.a.value)
        if isinstance(x, IntImm):
            return x.value == 0
        p = piece(x)
        if p is None or coeff <= 0:
            return False
        if p[2] > 1:
            out.append(_Digit(p[0], p[1], p[2], coeff))
        return True

    return out if walk(e, 1) else None


def _mixed_radix(digits: list[_Digit], extent: int) -> bool:
    """Whether the digits, by increasing scale, tile ``[0, extent)`` exactly once."""
    scale = 1
    for g in sorted(digits, key=lambda g: g.coeff):
        if g.coeff != scale:
            return False
        scale *= g.extent
    return scale == extent
