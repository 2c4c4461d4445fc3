"""Pass: shrink each allocated buffer to the region its scope actually touches.

For ``allocate B: body`` (B not a function parameter), the accessed region of B
inside ``body`` is bounded by interval analysis over the loops in ``body``; variables
bound outside stay symbolic. A dimension whose touched interval has a constant width
smaller than the declared size is shrunk to that width and its indices are offset by
the interval's start. Run after ``plan_allocations``, this turns a register tile
allocated at the root into a small per-iteration buffer.

Before::

    for i0 in range(8):
        allocate C_local[64, 64]:
            for i1, j in grid(8, 64):
                C_local[i0 * 8 + i1, j] = ...

After::

    for i0 in range(8):
        allocate C_local[8, 64]:
            for i1, j in grid(8, 64):
                C_local[i1, j] = ...
"""

from __future__ import annotations

from ..buffer import Buffer
from ..expr import BufferLoad, IntImm, PrimExpr
from ..function import PrimFunc
from ..functor import Mutator
from ..stmt import Allocate, BufferStore, Stmt
from .affine import Affine, affine
from .region import extent_of, touched_region


class _Compact(Mutator):
    def __init__(self, params: set[Buffer]):
        self.params = params
        # buffer -> (new buffer, per-dimension offset forms)
        self.remap: dict[Buffer, tuple[Buffer, list[Affine | None]]] = {}

    def visit_Allocate(self, alloc: Allocate) -> Stmt:
        buf = alloc.buffer
        plan = None if buf in self.params else _plan(buf, alloc.body)
        if plan is None:
            return self.generic_visit(alloc)
        self.remap[buf] = plan
        try:
            body = self.visit(alloc.body)
        finally:
            del self.remap[buf]
        return Allocate(plan[0], body)

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        load = self.generic_visit(load)
        if load.buffer not in self.remap:
            return load
        new, offsets = self.remap[load.buffer]
        return BufferLoad(new, _shift(load.indices, offsets))

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        if not self.remap:
            return store  # no compacted buffer in scope: nothing to rewrite in it
        store = self.generic_visit(store)
        if store.buffer not in self.remap:
            return store
        new, offsets = self.remap[store.buffer]
        return BufferStore(new, store.value, _shift(store.indices, offsets))


def _plan(buf: Buffer, body: Stmt) -> tuple[Buffer, list[Affine | None]] | None:
    region = touched_region(body, buf)
    if region is None:
        return None
    shape: list[PrimExpr] = []
    offsets: list[Affine | None] = []
    changed = False
    for dim, iv in zip(buf.shape, region):
        width = extent_of(iv)
        if width is None or not isinstance(dim, IntImm) or width >= dim.value or width <= 0:
            shape.append(dim)
            offsets.append(None)
            continue
        shape.append(IntImm(dim.dtype, width))
        offsets.append(iv[0])
        changed = True
    if not changed:
        return None
    return Buffer(buf.name, tuple(shape), buf.dtype, buf.scope), offsets


def _shift(indices: tuple[PrimExpr, ...], offsets: list[Affine | None]) -> tuple[PrimExpr, ...]:
    out = []
    for idx, off in zip(indices, offsets):
        if off is None:
            out.append(idx)
        else:
            out.append((affine(idx) - off).to_expr(idx.dtype))
    return tuple(out)


def compact_allocations(func: PrimFunc) -> PrimFunc:
    """Shrink allocated buffers to their touched regions (see the module docstring)."""
    return func.with_body(_Compact(set(func.params)).visit(func.body))
