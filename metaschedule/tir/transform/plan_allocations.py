"""Pass: move each ``Allocate`` down to the innermost statement that holds all its uses.

An allocation moves into a sub-statement of a sequence when only a contiguous run of
the sequence uses it, into the branch of an ``if`` that holds every use, and into the
body of a serial or unrolled loop when different iterations touch disjoint parts of
the buffer (so no value flows from one iteration to the next through it). This is
what turns a ``cache_write`` to "local" under a ``compute_at`` into a per-iteration
tile that ``compact_allocations`` then shrinks. An unused allocation is dropped.

Disjointness is proved per dimension: if the touched interval of a dimension is
``g * h(v) + r`` to ``g * h(v) + r + w`` with ``w < g`` (``r`` and ``w`` free of the loop
variable ``v``), iterations with different values of ``h(v)`` touch different
elements. The dimensions whose ``h`` separate iterations this way prove the loop
disjoint when ``v -> (h_1(v), h_2(v), ...)`` is one-to-one over the loop's range,
checked with :func:`~metaschedule.tir.arith.detect_iter_map` (bijective). That covers
a fused loop ``f`` whose tile is indexed by ``f // 8`` in one dimension and ``f % 8``
in another.

GPU thread-bound loops follow the memory model of the GPU: a ``shared`` or ``local``
buffer sinks into a ``blockIdx`` loop (each block has its own), a ``local`` one into a
``threadIdx`` loop (registers are per thread), and a ``vthread`` loop is serial.

A parallel loop is different: its iterations are independent by the contract of the
``parallel`` primitive, so a buffer whose every use lies inside one is *private* to an
iteration and is always allocated inside the loop body, even when disjointness cannot
be proved. A buffer shared by all threads would race as soon as two iterations
touch the same element.

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

import itertools
from math import gcd

from .. import expr as E
from ..arith import detect_iter_map
from ..buffer import Buffer
from ..function import PrimFunc
from ..functor import Mutator, collect_vars, replace_fields
from ..stmt import Allocate, BufferStore, For, ForKind, IfThenElse, Range, SeqStmt, Stmt, seq
from .affine import Affine, affine, bounds
from .region import touched_region, touches

_SINKABLE = (ForKind.SERIAL, ForKind.UNROLLED)


class _PlanAllocations(Mutator):
    def visit_Allocate(self, alloc: Allocate) -> Stmt:
        body = self.visit(alloc.body)
        return _sink(alloc.buffer, body)

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        return store  # no allocation inside: its expressions need no walk


def _sink(buf: Buffer, stmt: Stmt, ranges: dict | None = None) -> Stmt:
    """``stmt`` with ``allocate buf`` placed as deep inside it as is safe; ``ranges``: of
    the loops around ``stmt``."""
    ranges = ranges or {}
    if isinstance(stmt, SeqStmt):
        used = [i for i, s in enumerate(stmt.seq) if touches(s, buf)]
        if not used:
            return stmt
        first, last = used[0], used[-1]
        if first == last:
            inner = _sink(buf, stmt.seq[first], ranges)
        else:
            inner = Allocate(buf, seq(*stmt.seq[first : last + 1]))
        return seq(*stmt.seq[:first], inner, *stmt.seq[last + 1 :])
    if not touches(stmt, buf):
        return stmt
    if isinstance(stmt, For) and (
        stmt.kind is ForKind.PARALLEL
        or _private_per_thread(buf, stmt)
        or (
            _sinkable(stmt)
            and (
                _iterations_disjoint(buf, stmt)
                or _written_before_read(buf, stmt.body, {**ranges, stmt.loop_var: _range(stmt)})
            )
        )
    ):
        inner = {**ranges, stmt.loop_var: _range(stmt)}
        return replace_fields(stmt, body=_sink(buf, stmt.body, inner))
    if isinstance(stmt, IfThenElse) and not touches(stmt.condition, buf):
        in_then = touches(stmt.then_case, buf)
        in_else = stmt.else_case is not None and touches(stmt.else_case, buf)
        if in_then and not in_else:
            return replace_fields(stmt, then_case=_sink(buf, stmt.then_case, ranges))
        if in_else and not in_then:
            return replace_fields(stmt, else_case=_sink(buf, stmt.else_case, ranges))
    if isinstance(stmt, Allocate):
        return replace_fields(stmt, body=_sink(buf, stmt.body, ranges))
    return Allocate(buf, stmt)


def _range(loop: For) -> tuple[E.PrimExpr, E.PrimExpr]:
    return loop.min, loop.extent


def _sinkable(loop: For) -> bool:
    """Serial in each thread: serial, unrolled, and virtual-thread loops."""
    return loop.kind in _SINKABLE or (
        loop.kind is ForKind.THREAD_BINDING and loop.thread_binding.startswith("vthread")
    )


def _private_per_thread(buf: Buffer, loop: For) -> bool:
    """Whether every GPU block (thread) bound by ``loop`` gets its own copy of ``buf``.

    Each block has its own shared and local memory, so both sink into a ``blockIdx``
    loop; only local (register) memory is private to a ``threadIdx``, shared memory is
    what the threads of a block have in common.
    """
    if loop.kind is not ForKind.THREAD_BINDING:
        return False
    tag = loop.thread_binding
    if tag.startswith("blockIdx"):
        return buf.scope in ("shared", "local")
    if tag.startswith("threadIdx"):
        return buf.scope == "local"
    return False


def _iterations_disjoint(buf: Buffer, loop: For) -> bool:
    """True if two iterations of ``loop`` never touch the same element of ``buf``."""
    region = touched_region(loop.body, buf)
    if region is None:
        return True
    v = loop.loop_var
    separating: list[E.PrimExpr] = []
    for iv in region:
        h = _separated_part(iv, v)
        if h is None:
            continue
        if h is v:
            return True  # the common case, decided without the iter-map analysis
        separating.append(h)
    if not separating:
        return False
    dom = {v: Range(loop.min, loop.extent)}
    for subset in _subsets(separating):
        if detect_iter_map(subset, dom, check_level="bijective").success:
            return True
    return False


def _written_before_read(buf: Buffer, body: Stmt, ranges: dict | None = None) -> bool:
    """True if every element of ``buf`` that one execution of ``body`` reads, it wrote
    before (so no value flows through ``buf`` from one iteration of the loop around
    ``body`` to the next, however their regions overlap): a loop nest that only stores
    to ``buf`` and covers a box of it, followed by uses inside that box, as a producer
    computed at the loop (``compute_at``) and its consumer, or loops over such bodies."""
    ranges = dict(ranges or {})  # of the loops walked into, for the box comparisons
    while isinstance(body, (For, Allocate)):
        if isinstance(body, For):
            ranges[body.loop_var] = (body.min, body.extent)
        body = body.body  # true of every iteration of a loop: true of the loop
    if not isinstance(body, SeqStmt):
        return False
    users = [s for s in body.seq if touches(s, buf)]
    if not users:
        return True
    box = _dense_box(buf, users[0])
    if box is None:  # each statement by itself, then
        return all(_written_before_read(buf, s, ranges) for s in users)
    return all(
        _inside(buf, s, box, ranges) or _written_before_read(buf, s, ranges) for s in users[1:]
    )


def _inside(buf: Buffer, stmt: Stmt, box: list[tuple[Affine, Affine]], ranges: dict) -> bool:
    """True if every access of ``stmt`` to ``buf`` lies in ``box``, for all values of the
    loop variables in ``ranges``."""
    region = touched_region(stmt, buf)
    if region is None or any(iv is None for iv in region):
        return False
    for (w_lo, w_hi), (lo, hi) in zip(box, region):
        for gap in (lo - w_lo, w_hi - hi):
            iv = gap if gap.is_const() else bounds(gap.to_expr("int32"), ranges)
            least = iv if isinstance(iv, Affine) else (iv[0] if iv is not None else None)
            if least is None or not least.is_const() or least.const < 0:
                return False
    return True


def _dense_box(buf: Buffer, stmt: Stmt) -> list[tuple[Affine, Affine]] | None:
    """The box of ``buf`` that ``stmt`` writes every element of, when ``stmt`` is a
    perfect loop nest around one store to ``buf`` that reads nothing of it, with each
    index the outer variables plus at most one loop of the nest (coefficient 1, a loop
    in one index only); else None."""
    inner: dict[E.Var, tuple[E.PrimExpr, E.PrimExpr]] = {}
    s = stmt
    while isinstance(s, For):
        if s.kind is ForKind.PARALLEL or not isinstance(s.extent, E.IntImm):
            return None
        if s.extent.value < 1:
            return None
        inner[s.loop_var] = (s.min, s.extent)
        s = s.body
    if not isinstance(s, BufferStore) or s.buffer is not buf or touches(s.value, buf):
        return None
    used: set[E.Var] = set()
    for idx in s.indices:
        form = affine(idx)
        for coef, atom in form.terms.values():
            names = collect_vars(atom) & inner.keys()
            if not names:
                continue
            if not isinstance(atom, E.Var) or coef != 1 or atom in used:
                return None
            used.add(atom)
    box = []
    for idx in s.indices:
        iv = bounds(idx, inner)
        if iv is None:
            return None
        box.append(iv)
    return box


def _separated_part(iv: tuple[Affine, Affine] | None, v: E.Var) -> E.PrimExpr | None:
    """``h(v)`` if the interval is ``[g*h(v) + r, g*h(v) + r + w]`` with ``0 <= w < g``."""
    if iv is None:
        return None
    lo, hi = iv
    width = hi - lo
    if not width.is_const() or width.const < 0:
        return None
    dep = {k: t for k, t in lo.terms.items() if v in collect_vars(t[1])}
    if not dep:
        return None
    g = 0
    for coef, _ in dep.values():
        g = gcd(g, abs(coef))
    if width.const >= g:
        return None
    if len(dep) == 1:  # c * atom: the sign of c does not matter for one-to-one-ness
        return next(iter(dep.values()))[1]
    return Affine({k: (c // g, a) for k, (c, a) in dep.items()}, 0).to_expr(v.dtype)


def _subsets(parts: list[E.PrimExpr]) -> list[list[E.PrimExpr]]:
    """All parts first, then smaller groups (a redundant part can break bijectivity)."""
    if len(parts) > 4:
        return [parts] + [[p] for p in parts]
    out = []
    for size in range(len(parts), 0, -1):
        out.extend(list(c) for c in itertools.combinations(parts, size))
    return out


def plan_allocations(func: PrimFunc) -> PrimFunc:
    """Sink every ``Allocate`` to the innermost safe position (see the module docstring)."""
    return func.with_body(_PlanAllocations().visit(func.body))
