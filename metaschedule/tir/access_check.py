"""Static bounds of buffer accesses: indices that provably leave their buffer's shape.

``find_out_of_bounds(func)`` walks a PrimFunc (block form or lowered) with the range of
every loop variable and block iteration variable, bounds each index of each load and
store with the arithmetic toolkit, and reports the accesses that can leave the shape.
``te.create_prim_func`` runs the same check on te bodies (:func:`check_expr_accesses`),
``verify_well_formed`` on PrimFuncs.

Only *proved* violations are reported, never a false alarm:

* an access under a condition (a ``Select``, ``te.if_then_else``, the lazy side of
  ``and``/``or``, a reduction's ``where``, an ``IfThenElse``) is checked over the
  points where the condition holds when it is a conjunction of bounds of single
  variables by constants (``k < 8``, ``te.all(i >= 1, i < 17)``): the ranges narrowed
  to them are exactly those points. Under any other condition, or in a block with a
  predicate (whose bindings then miss part of the domain), it is guarded: left to the
  run-time checks (the interpreter, and the ``debug`` build mode);
* the interval of an index is an over-approximation when variables repeat, so a
  violation is reported only with a witness: a corner of the iteration box (each
  variable at its minimum or maximum) at which the index really is out of range;
* data-dependent indices (``A[B[i]]``, gathers) and symbolic shapes are not judged.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from . import expr as E
from .arith import Analyzer
from .arith.evaluate import evaluate
from .buffer import Buffer
from .function import PrimFunc
from .functor import collect_vars
from .stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    Range,
    SeqStmt,
)

__all__ = ["AccessViolation", "check_expr_accesses", "find_out_of_bounds"]

_MAX_WITNESS_VARS = 10  # 2**10 corners at most


@dataclass(frozen=True)
class AccessViolation:
    """A load or store whose index ``dim`` ranges over ``[lo, hi]``, outside the shape."""

    kind: str  # "reads" or "writes"
    buffer: Buffer
    indices: tuple[E.PrimExpr, ...]
    dim: int
    lo: int
    hi: int
    where: str  # e.g. "block 'C'" or "te.compute 'C'"
    node: Any = field(default=None, compare=False, repr=False)  # the enclosing block

    def message(self) -> str:
        shape = tuple(int(s) if isinstance(s, E.IntImm) else s for s in self.buffer.shape)
        shape_text = f"({shape[0]},)" if len(shape) == 1 else str(shape)
        idx = ", ".join(str(i) for i in self.indices)
        return (
            f"{self.where} {self.kind} {self.buffer.name}[{idx}] with "
            f"{self.indices[self.dim]} in [{self.lo}, {self.hi}], but {self.buffer.name} "
            f"has shape {shape_text}"
        )


# ----------------------------------------------------------------------------- expressions


#: variable ranges where an access runs; None: under a condition not understood
Ranges = Mapping[E.Var, tuple[int, int]]


def _accesses(e: Any, ranges: Ranges | None) -> Iterator[tuple[E.BufferLoad, Ranges | None]]:
    """Every BufferLoad in ``e`` with the ranges of the points where it runs (None when
    a condition it runs under is not a conjunction of single-variable bounds)."""
    if isinstance(e, E.BufferLoad):
        yield e, ranges
        for i in e.indices:
            yield from _accesses(i, ranges)
    elif isinstance(e, E.Select) or (isinstance(e, E.Call) and e.op == "if_then_else"):
        cond, then, other = (
            (e.condition, e.true_value, e.false_value) if isinstance(e, E.Select) else e.args
        )
        yield from _accesses(cond, ranges)
        yield from _accesses(then, narrow(cond, ranges))
        yield from _accesses(other, narrow(E.Not(cond), ranges))
    elif isinstance(e, E.And):
        yield from _accesses(e.a, ranges)
        yield from _accesses(e.b, narrow(e.a, ranges))
    elif isinstance(e, E.Or):
        yield from _accesses(e.a, ranges)
        yield from _accesses(e.b, narrow(E.Not(e.a), ranges))
    elif isinstance(e, E.Reduce):
        yield from _accesses(e.condition, ranges)
        where = narrow(e.condition, ranges)
        sources = e.source if isinstance(e.source, tuple) else (e.source,)
        for s in sources:
            yield from _accesses(s, where)
    elif isinstance(e, E.PrimExpr):
        for child in _children(e):
            yield from _accesses(child, ranges)


_FLIP = {E.LT: E.GT, E.LE: E.GE, E.GT: E.LT, E.GE: E.LE, E.EQ: E.EQ}
_NEGATE = {E.LT: E.GE, E.LE: E.GT, E.GT: E.LE, E.GE: E.LT}


def _comparison(e: E.PrimExpr) -> type | None:
    """Which of LT, LE, GT, GE, EQ ``e`` is (subclasses, e.g. of ``==``, included)."""
    return next((op for op in _FLIP if isinstance(e, op)), None)


def narrow(cond: E.PrimExpr, ranges: Ranges | None) -> Ranges | None:
    """``ranges`` narrowed to the points where ``cond`` holds, when ``cond`` is a
    conjunction of comparisons of a variable with a constant (then exactly those
    points; an empty range where it never holds); else None."""
    if ranges is None:
        return None
    if isinstance(cond, E.IntImm):
        return ranges if cond.value else dict.fromkeys(ranges, (1, 0)) or None
    if isinstance(cond, E.And):
        return narrow(cond.b, narrow(cond.a, ranges))
    if isinstance(cond, E.Not) and _comparison(cond.a) in _NEGATE:
        cond = _NEGATE[_comparison(cond.a)](cond.a.a, cond.a.b)
    op = _comparison(cond)
    if op is None:
        return None
    a, b = cond.a, cond.b
    if isinstance(a, E.IntImm) and isinstance(b, E.Var):
        a, b, op = b, a, _FLIP[op]
    if not (isinstance(a, E.Var) and isinstance(b, E.IntImm) and a in ranges):
        return None
    lo, hi = ranges[a]
    c = b.value
    if op is E.LT:
        hi = min(hi, c - 1)
    elif op is E.LE:
        hi = min(hi, c)
    elif op is E.GT:
        lo = max(lo, c + 1)
    elif op is E.GE:
        lo = max(lo, c)
    else:
        lo, hi = max(lo, c), min(hi, c)
    return {**ranges, a: (lo, hi)}


def _children(e: E.PrimExpr) -> list[Any]:
    out = []
    for name in getattr(type(e), "__dataclass_fields__", {}):
        v = getattr(e, name)
        if isinstance(v, E.PrimExpr):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, E.PrimExpr))
    return out


def _has_load(e: E.PrimExpr) -> bool:
    return any(True for _ in _accesses(e, {}))


def _check_index(
    buf: Buffer,
    indices: tuple,
    kind: str,
    where: str,
    ranges: Mapping[E.Var, tuple[int, int]],
) -> AccessViolation | None:
    if any(lo > hi for lo, hi in ranges.values()):
        return None  # a condition that never holds: the access never runs
    for d, (idx, extent) in enumerate(zip(indices, buf.shape)):
        if not isinstance(extent, E.IntImm) or _has_load(idx):
            continue
        free = collect_vars(idx)
        if any(v not in ranges for v in free) or len(free) > _MAX_WITNESS_VARS:
            continue
        ana = Analyzer()
        for v in free:
            lo, hi = ranges[v]
            ana.bind(v, Range(E.const(lo, v.dtype), E.const(hi - lo + 1, v.dtype)))
        bound = ana.const_int_bound(idx)
        if bound.min_value >= 0 and bound.max_value < extent.value:
            continue
        witness = _witness(idx, free, ranges, extent.value)
        if witness is None:
            continue
        lo, hi = witness
        return AccessViolation(kind, buf, tuple(indices), d, lo, hi, where)
    return None


def _witness(idx: E.PrimExpr, free: set[E.Var], ranges, extent: int) -> tuple[int, int] | None:
    """The index's range over the corners of the box, if some corner is out of range."""
    vs = sorted(free, key=lambda v: v.name)
    values = []
    for corner in itertools.product(*((ranges[v][0], ranges[v][1]) for v in vs)):
        try:
            values.append(int(evaluate(idx, dict(zip(vs, corner)))))
        except (ArithmeticError, TypeError, ValueError):
            return None
    lo, hi = min(values), max(values)
    return (lo, hi) if lo < 0 or hi >= extent else None


def check_expr_accesses(
    exprs: list[E.PrimExpr],
    ranges: Mapping[E.Var, tuple[int, int]],
    where: str,
) -> list[AccessViolation]:
    """Provably out-of-bounds loads in ``exprs`` (variables over ``ranges``; a load under
    a condition over the points where it holds, when that is known: :func:`narrow`)."""
    out = []
    for e in exprs:
        for load, where_runs in _accesses(e, ranges):
            if where_runs is not None:
                v = _check_index(load.buffer, load.indices, "reads", where, where_runs)
                if v is not None:
                    out.append(v)
    return out


# ----------------------------------------------------------------------------- statements


def _const_range(r_min: E.PrimExpr, extent: E.PrimExpr) -> tuple[int, int] | None:
    if isinstance(r_min, E.IntImm) and isinstance(extent, E.IntImm) and extent.value > 0:
        return r_min.value, r_min.value + extent.value - 1
    return None


class _Walker:
    def __init__(self, fname: str):
        self.ranges: dict[E.Var, tuple[int, int]] = {}
        self.where = f"function {fname}"
        self.found: list[AccessViolation] = []
        self.node: Any = None

    def _bind(self, v: E.Var, r: tuple[int, int] | None) -> Callable[[], None]:
        if r is not None:
            self.ranges[v] = r
        return lambda: self.ranges.pop(v, None)

    def stmt(self, s: Any, guarded: bool) -> None:
        if isinstance(s, SeqStmt):
            for x in s.seq:
                self.stmt(x, guarded)
        elif isinstance(s, For):
            undo = self._bind(s.loop_var, _const_range(s.min, s.extent))
            self.stmt(s.body, guarded)
            undo()
        elif isinstance(s, BlockRealize):
            # under a predicate the bindings do not reach every point of the domain
            pred = s.predicate
            trivial = isinstance(pred, E.IntImm) and pred.value == 1
            self.block(s.block, guarded or not trivial)
        elif isinstance(s, Block):
            self.block(s, guarded)
        elif isinstance(s, IfThenElse):
            self.exprs([s.condition], guarded)
            self.branch(s.then_case, s.condition, guarded)
            if s.else_case is not None:
                self.branch(s.else_case, E.Not(s.condition), guarded)
        elif isinstance(s, Allocate):
            self.stmt(s.body, guarded)
        elif isinstance(s, BufferStore):
            self.exprs([s.value, *s.indices], guarded)
            if not guarded:
                v = _check_index(s.buffer, s.indices, "writes", self.where, self.ranges)
                if v is not None:
                    self.found.append(replace(v, node=self.node))
        elif isinstance(s, Evaluate) and isinstance(s.value, E.PrimExpr):
            self.exprs([s.value], guarded)

    def branch(self, s: Any, cond: E.PrimExpr, guarded: bool) -> None:
        """``s``, run where ``cond`` holds: checked over the narrowed ranges if known."""
        narrowed = None if guarded else narrow(cond, self.ranges)
        if narrowed is None:
            self.stmt(s, True)
            return
        saved, self.ranges = self.ranges, dict(narrowed)
        self.stmt(s, False)
        self.ranges = saved

    def block(self, b: Block, guarded: bool) -> None:
        saved, where, node = self.ranges, self.where, self.node
        # a block sees only its own iteration variables (and loops inside it)
        self.ranges = {}
        for iv in b.iter_vars:
            self._bind(iv.var, _const_range(iv.dom.min, iv.dom.extent))
        self.where, self.node = f"block '{b.name_hint}'", b
        if b.init is not None:
            self.stmt(b.init, guarded)
        self.stmt(b.body, guarded)
        self.ranges, self.where, self.node = saved, where, node

    def exprs(self, exprs: list[E.PrimExpr], guarded: bool) -> None:
        if guarded:
            return
        self.found.extend(
            replace(v, node=self.node) for v in check_expr_accesses(exprs, self.ranges, self.where)
        )


def find_out_of_bounds(func: PrimFunc, name: str = "main") -> list[AccessViolation]:
    """Loads and stores of ``func`` whose index provably leaves the buffer's shape."""
    w = _Walker(name)
    w.stmt(func.body, False)
    return w.found
