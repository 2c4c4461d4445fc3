"""The walk of a lowered function: every store with the loops above it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...tir import expr as E
from ...tir.stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    SeqStmt,
    Stmt,
)
from ...tir.transform.affine import affine

__all__ = ["Loop", "LoopNestWalker", "Store", "const_int", "unroll_of_blocks"]

UNROLL_KEYS = (
    "pragma_auto_unroll_max_step",
    "meta_schedule.unroll_explicit",
    "meta_schedule.unroll_implicit",
)


@dataclass(frozen=True)
class Loop:
    var: E.Var
    extent: int
    kind: ForKind
    thread: str | None
    unroll_step: int
    node: For


@dataclass
class Store:
    store: BufferStore
    loops: tuple[Loop, ...]
    extents: tuple[int, ...]  # effective extents (pinned loops count 1)
    allocs: dict[Any, int]  # buffer -> number of loops outside its Allocate


def const_int(e: Any, default: int = 1) -> int:
    if isinstance(e, int):
        return e
    if isinstance(e, E.IntImm):
        return e.value
    return default


def _pins(cond: E.PrimExpr, loops: dict[E.Var, Loop]) -> set[E.Var]:
    """Loop variables fixed to one value by ``cond``.

    Understood: conjunctions of ``v == c``, and ``sum(coef * v) == 0`` with positive
    coefficients over loops starting at 0 (the lowered init of a split reduction).
    """
    if isinstance(cond, E.And):
        return _pins(cond.a, loops) | _pins(cond.b, loops)
    if not isinstance(cond, E.EQ):
        return set()
    for v, c in ((cond.a, cond.b), (cond.b, cond.a)):
        if type(c) is not E.IntImm:
            continue
        if type(v) is E.Var:
            return {v} if v in loops else set()
        if c.value == 0:
            form = affine(v)
            atoms = [(coef, atom) for coef, atom in form.terms.values()]
            if (
                form.const == 0
                and atoms
                and all(
                    coef > 0
                    and type(atom) is E.Var
                    and atom in loops
                    and const_int(loops[atom].node.min, -1) == 0
                    for coef, atom in atoms
                )
            ):
                return {atom for _, atom in atoms}
    return set()


class LoopNestWalker:
    """Collects :class:`Store` records of a lowered body (``walk(body)``, then ``stores``)."""

    def __init__(self) -> None:
        self.loops: list[Loop] = []
        self.pinned: list[E.Var] = []
        self.allocs: dict[Any, int] = {}
        self.stores: list[Store] = []

    def walk(self, s: Stmt) -> None:
        t = type(s)
        if t is For:
            ann = s.annotations
            step = max((const_int(ann.get(k), 0) for k in UNROLL_KEYS), default=0)
            self.loops.append(
                Loop(s.loop_var, max(1, const_int(s.extent)), s.kind, s.thread_binding, step, s)
            )
            self.walk(s.body)
            self.loops.pop()
        elif t is SeqStmt:
            for x in s.seq:
                self.walk(x)
        elif t is BufferStore:
            pinned = set(self.pinned)
            ext = tuple(1 if lp.var in pinned else lp.extent for lp in self.loops)
            self.stores.append(Store(s, tuple(self.loops), ext, dict(self.allocs)))
        elif t is IfThenElse:
            pins = _pins(s.condition, {lp.var: lp for lp in self.loops})
            self.pinned.extend(pins)
            self.walk(s.then_case)
            del self.pinned[len(self.pinned) - len(pins) :]
            if s.else_case is not None:
                self.walk(s.else_case)
        elif t is Allocate:
            self.allocs[s.buffer] = len(self.loops)
            self.walk(s.body)
            del self.allocs[s.buffer]
        elif t is BlockRealize:
            self.walk(s.block.body)
        elif t is Block:
            self.walk(s.body)


def unroll_of_blocks(s: Stmt) -> int:
    """The largest unroll annotation on the blocks of an unlowered body."""
    best = 0
    stack = [s]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is BlockRealize:
            x = x.block
            t = Block
        if t is Block:
            best = max([best] + [const_int(x.annotations.get(k), 0) for k in UNROLL_KEYS])
            stack.append(x.body)
            if x.init is not None:
                stack.append(x.init)
        elif t is For or t is Allocate:
            stack.append(x.body)
        elif t is SeqStmt:
            stack.extend(x.seq)
        elif t is IfThenElse:
            stack.append(x.then_case)
            if x.else_case is not None:
                stack.append(x.else_case)
    return best
