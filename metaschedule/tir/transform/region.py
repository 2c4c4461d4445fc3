"""The region of a buffer that a statement touches, as affine bounds per dimension."""

from __future__ import annotations

from ..buffer import Buffer
from ..expr import BufferLoad, PrimExpr, Var
from ..functor import Visitor, any_node
from ..stmt import BufferStore, For, Stmt
from .affine import Affine, Interval, bounds

#: per dimension: inclusive (lo, hi) affine bounds, or None where unknown
Region = list[Interval | None]


class _Collector(Visitor):
    def __init__(self, buffer: Buffer):
        self.buffer = buffer
        self.ranges: dict[Var, tuple[PrimExpr, PrimExpr]] = {}
        self.region: Region | None = None

    def visit_For(self, loop: For) -> None:
        self.visit(loop.min)
        self.visit(loop.extent)
        self.ranges[loop.loop_var] = (loop.min, loop.extent)
        self.visit(loop.body)
        del self.ranges[loop.loop_var]

    def visit_BufferLoad(self, load: BufferLoad) -> None:
        if load.buffer is self.buffer:
            self._add(load.indices)
        self.generic_visit(load)

    def visit_BufferStore(self, store: BufferStore) -> None:
        if store.buffer is self.buffer:
            self._add(store.indices)
        self.generic_visit(store)

    def _add(self, indices: tuple[PrimExpr, ...]) -> None:
        dims = [bounds(idx, self.ranges) for idx in indices]
        if self.region is None:
            self.region = dims
            return
        self.region = [interval_hull(old, new) for old, new in zip(self.region, dims)]


def touched_region(stmt: Stmt, buffer: Buffer) -> Region | None:
    """Bounds of every access to ``buffer`` in ``stmt``, loops inside ``stmt`` swept.

    Variables bound outside ``stmt`` stay symbolic. Returns None if ``buffer`` is not
    accessed at all.
    """
    collector = _Collector(buffer)
    collector.visit(stmt)
    return collector.region


def touches(node, buffer: Buffer) -> bool:
    """True if ``node`` loads from or stores to ``buffer``."""

    def access(n) -> bool:
        return (type(n) is BufferLoad or type(n) is BufferStore) and n.buffer is buffer

    return any_node(node, access)


def interval_hull(a: Interval | None, b: Interval | None) -> Interval | None:
    """The hull of two intervals whose bounds differ by constants (else unknown: None)."""
    if a is None or b is None:
        return None
    dlo, dhi = a[0] - b[0], a[1] - b[1]
    if not dlo.is_const() or not dhi.is_const():
        return None
    return (a[0] if dlo.const <= 0 else b[0]), (a[1] if dhi.const >= 0 else b[1])


def extent_of(iv: Interval | None) -> int | None:
    """``hi - lo + 1`` when it is a constant."""
    if iv is None:
        return None
    d: Affine = iv[1] - iv[0]
    return d.const + 1 if d.is_const() else None
