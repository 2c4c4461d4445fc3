"""Pass: move each ``Allocate`` down to the innermost statement that holds all its uses.

An allocation moves into a sub-statement of a sequence when only a contiguous run of
the sequence uses it, into the branch of an ``if`` that holds every use, and into the
body of a serial, parallel or unrolled loop when different iterations touch disjoint
parts of the buffer (so no value flows from one iteration to the next through it).
This is what turns a ``cache_write`` to "local" under a ``compute_at`` into a
per-iteration tile that ``compact_allocations`` then shrinks. An unused allocation
is dropped.

Before::

    allocate C_local[64, 64]:
        for i0 in range(8):
            for i1 in range(8):  C_local[i0 * 8 + i1, 0] = ...
            for i1 in range(8):  C[i0 * 8 + i1, 0] = C_local[i0 * 8 + i1, 0]

After::

    for i0 in range(8):
        allocate C_local[64, 64]:
            for i1 in range(8):  C_local[i0 * 8 + i1, 0] = ...
            for i1 in range(8):  C[i0 * 8 + i1, 0] = C_local[i0 * 8 + i1, 0]
"""

from __future__ import annotations

import dataclasses

from ..buffer import Buffer
from ..function import PrimFunc
from ..functor import Mutator
from ..stmt import Allocate, For, ForKind, IfThenElse, SeqStmt, Stmt, seq
from .region import touched_region, touches

_SINKABLE = (ForKind.SERIAL, ForKind.PARALLEL, ForKind.UNROLLED)


class _PlanAllocations(Mutator):
    def visit_Allocate(self, alloc: Allocate) -> Stmt:
        body = self.visit(alloc.body)
        return _sink(alloc.buffer, body)


def _sink(buf: Buffer, stmt: Stmt) -> Stmt:
    """``stmt`` with ``allocate buf`` placed as deep inside it as is safe."""
    if isinstance(stmt, SeqStmt):
        used = [i for i, s in enumerate(stmt.seq) if touches(s, buf)]
        if not used:
            return stmt
        first, last = used[0], used[-1]
        if first == last:
            inner = _sink(buf, stmt.seq[first])
        else:
            inner = Allocate(buf, seq(*stmt.seq[first : last + 1]))
        return seq(*stmt.seq[:first], inner, *stmt.seq[last + 1 :])
    if not touches(stmt, buf):
        return stmt
    if isinstance(stmt, For) and stmt.kind in _SINKABLE and _iterations_disjoint(buf, stmt):
        return dataclasses.replace(stmt, body=_sink(buf, stmt.body))
    if isinstance(stmt, IfThenElse) and not touches(stmt.condition, buf):
        in_then = touches(stmt.then_case, buf)
        in_else = stmt.else_case is not None and touches(stmt.else_case, buf)
        if in_then and not in_else:
            return dataclasses.replace(stmt, then_case=_sink(buf, stmt.then_case))
        if in_else and not in_then:
            return dataclasses.replace(stmt, else_case=_sink(buf, stmt.else_case))
    if isinstance(stmt, Allocate):
        return dataclasses.replace(stmt, body=_sink(buf, stmt.body))
    return Allocate(buf, stmt)


def _iterations_disjoint(buf: Buffer, loop: For) -> bool:
    """True if two iterations of ``loop`` never touch the same element of ``buf``.

    Sufficient test: in some dimension the touched interval moves by ``c * loop_var``
    and is narrower than ``|c|``.
    """
    region = touched_region(loop.body, buf)
    if region is None:
        return True
    v = loop.loop_var
    for iv in region:
        if iv is None:
            continue
        lo, hi = iv
        c = lo.coef(v)
        if c == 0 or hi.coef(v) != c:
            continue
        if lo.without(v).uses(v) or hi.without(v).uses(v):
            continue
        width = hi - lo
        if width.is_const() and width.const < abs(c):
            return True
    return False


def plan_allocations(func: PrimFunc) -> PrimFunc:
    """Sink every ``Allocate`` to the innermost safe position (see the module docstring)."""
    return func.with_body(_PlanAllocations().visit(func.body))
