"""The schedule's view of the IR: fast lookups of blocks and loops, and replacement.

The IR is immutable, so a primitive builds new statements and asks the state to
``replace`` old ones; their ancestors are rebuilt (found through the parent links of
the index, so only those paths are walked), everything else is shared. Blocks are
found by their unique name, loops by their loop variable (a loop keeps its variable
when only its body changes). The index is rebuilt lazily after each replacement.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator
from typing import Any

from ..tir import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    For,
    IRModule,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
)
from ..tir.functor import Mutator, replace_fields
from .error import BlockNotFoundError, LoopNotFoundError, ScheduleError


class _FuncIndex:
    """Parent links and name/var lookups for one PrimFunc."""

    def __init__(self, func: PrimFunc):
        self.func = func
        self.parent: dict[int, Stmt] = {}
        self.blocks: dict[str, BlockRealize] = {}
        self.loops: dict[Var, For] = {}
        self._walk(func.body, None)

    def _walk(self, node: Stmt, parent: Stmt | None) -> None:
        if parent is not None:
            self.parent[id(node)] = parent
        if isinstance(node, BlockRealize):
            name = node.block.name_hint
            if name in self.blocks:
                raise ScheduleError(
                    f"block names must be unique in a function, but {name!r} appears twice"
                )
            self.blocks[name] = node
            self.parent[id(node.block)] = node
            if node.block.init is not None:
                self._walk(node.block.init, node.block)
            self._walk(node.block.body, node.block)
            return
        if isinstance(node, For):
            self.loops[node.loop_var] = node
        for child in child_stmts(node):
            self._walk(child, node)


def child_stmts(node: Stmt) -> list[Stmt]:
    """The statements directly inside ``node`` (a Block's init first, then its body)."""
    kind = type(node)
    if kind is For:
        return [node.body]
    if kind is SeqStmt:
        return list(node.seq)
    if kind is BlockRealize:
        return [node.block]
    if kind is Block:
        return [node.body] if node.init is None else [node.init, node.body]
    if kind is BufferStore:
        return []
    out = []
    for name in _field_names(kind):
        v = getattr(node, name)
        if isinstance(v, Stmt):
            out.append(v)
        elif isinstance(v, tuple) and v and isinstance(v[0], Stmt):
            out.extend(v)
    return out


@functools.cache
def _field_names(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(kind))


class _Replacer(Mutator):
    """Rebuilds the statements on the paths from the root to the replaced ones (``paths``:
    their ids); every other subtree is shared as it is."""

    def __init__(self, mapping: dict[int, Stmt | None], paths: set[int]):
        self.mapping = mapping
        self.paths = paths

    def visit(self, node):
        if isinstance(node, Stmt):
            if id(node) in self.mapping:
                return self.mapping[id(node)]
            if id(node) not in self.paths:
                return node
        if isinstance(node, tuple) and node and isinstance(node[0], Stmt):
            out = []
            changed = False
            for x in node:
                y = self.visit(x)
                changed |= y is not x
                if y is not None:
                    out.append(y)
            return tuple(out) if changed else node
        if isinstance(node, (Stmt, PrimFunc)):
            return super().visit(node)
        return node  # expressions and buffers are never replaced here

    def visit_SeqStmt(self, node: SeqStmt):
        new = self.generic_visit(node)
        if isinstance(new, SeqStmt):
            if len(new.seq) == 1:
                return new.seq[0]
            if not new.seq:
                raise ScheduleError("a primitive tried to remove every statement of a scope")
        return new


def _rebuilt(node: Stmt, mapping: dict[int, Stmt | None], paths: set[int]) -> Stmt | None:
    """``node`` with the statements of ``mapping`` (by id) replaced: what :class:`_Replacer`
    gives, by a direct walk down the ``paths`` for the statements that hold others."""
    key = id(node)
    if key in mapping:
        return mapping[key]
    if key not in paths:
        return node
    kind = type(node)
    if kind is For:
        body = _rebuilt(node.body, mapping, paths)
        return node if body is node.body else node.with_body(body)
    if kind is Allocate:
        body = _rebuilt(node.body, mapping, paths)
        return node if body is node.body else replace_fields(node, body=body)
    if kind is SeqStmt:
        out = []
        changed = False
        for x in node.seq:
            y = _rebuilt(x, mapping, paths)
            changed = changed or y is not x
            if y is not None:
                out.append(y)
        new = SeqStmt(tuple(out)) if changed else node
        if len(new.seq) == 1:
            return new.seq[0]
        if not new.seq:
            raise ScheduleError("a primitive tried to remove every statement of a scope")
        return new
    if kind is BlockRealize:
        block = _rebuilt(node.block, mapping, paths)
        return node if block is node.block else replace_fields(node, block=block)
    if kind is Block:
        body = _rebuilt(node.body, mapping, paths)
        init = node.init if node.init is None else _rebuilt(node.init, mapping, paths)
        if body is node.body and init is node.init:
            return node
        return replace_fields(node, body=body, init=init)
    return _Replacer(mapping, paths).visit(node)


class ScheduleState:
    """The current IRModule of a schedule plus cached indices for lookups.

    Copies are cheap: the module is immutable, per-function indices are shared until a
    function changes, and memos of analyses are shared outright.
    """

    def __init__(self, mod: IRModule):
        self.mod = mod
        self._index: dict[str, _FuncIndex] = {}
        self._memos: dict[str, Any] = {}
        for name in mod.functions:  # validates unique block names up front
            self.index(name)

    def copy(self) -> ScheduleState:
        new = ScheduleState.__new__(ScheduleState)
        new.mod = self.mod
        new._index = dict(self._index)
        new._memos = self._memos
        return new

    def memo(self, name: str, factory: Callable[[], Any]) -> Any:
        """The memo ``name`` of an analysis (made by ``factory`` on first use).

        A memo may only hold results that are pure functions of immutable IR nodes
        (keyed by their identity and holding them alive), so copies of the state, and
        states that later diverge, share it safely.
        """
        memo = self._memos.get(name)
        if memo is None:
            memo = self._memos[name] = factory()
        return memo

    def func(self, func_name: str) -> PrimFunc:
        return self.mod[func_name]

    def index(self, func_name: str) -> _FuncIndex:
        idx = self._index.get(func_name)
        if idx is None or idx.func is not self.mod[func_name]:
            idx = _FuncIndex(self.mod[func_name])
            self._index[func_name] = idx
        return idx

    # lookups --------------------------------------------------------------------------
    def block_realize(self, func_name: str, name: str) -> BlockRealize:
        idx = self.index(func_name)
        try:
            return idx.blocks[name]
        except KeyError:
            raise BlockNotFoundError(
                f"no block named {name!r} in function {func_name!r}; blocks are: "
                f"{', '.join(repr(n) for n in idx.blocks)}"
            ) from None

    def loop(self, func_name: str, loop_var: Var) -> For:
        try:
            return self.index(func_name).loops[loop_var]
        except KeyError:
            raise LoopNotFoundError(
                f"the loop {loop_var.name} no longer exists in function {func_name!r} "
                "(a previous primitive replaced or removed it)"
            ) from None

    def parent(self, func_name: str, node: Stmt) -> Stmt | None:
        return self.index(func_name).parent.get(id(node))

    def ancestors(self, func_name: str, node: Stmt) -> Iterator[Stmt]:
        """Enclosing statements, innermost first."""
        parents = self.index(func_name).parent
        parent = parents.get(id(node))
        while parent is not None:
            yield parent
            parent = parents.get(id(parent))

    def scope_realize(self, func_name: str, node: Stmt) -> BlockRealize | None:
        """The BlockRealize of the block that encloses ``node`` (its scope block)."""
        for anc in self.ancestors(func_name, node):
            if isinstance(anc, Block):
                return self.parent(func_name, anc)
        return None

    def loops_above(self, func_name: str, node: Stmt) -> list[For]:
        """Loops between the enclosing scope block and ``node``, outermost first."""
        loops = []
        for anc in self.ancestors(func_name, node):
            if isinstance(anc, Block):
                break
            if isinstance(anc, For):
                loops.append(anc)
        return loops[::-1]

    def child_block_realizes(self, node: Stmt) -> list[BlockRealize]:
        """Blocks directly under ``node``, not nested in another block, in program order."""
        out: list[BlockRealize] = []

        def walk(s: Stmt) -> None:
            if isinstance(s, BlockRealize):
                out.append(s)
                return
            for c in child_stmts(s):
                walk(c)

        start = node.block if isinstance(node, BlockRealize) else node
        for c in child_stmts(start) if isinstance(start, (Block, For)) else [start]:
            walk(c)
        return out

    # updates --------------------------------------------------------------------------
    def replace(self, func_name: str, mapping: dict[Stmt, Stmt | None]) -> None:
        """Replace statements (by identity) in ``func_name``; ``None`` removes from a SeqStmt."""
        func = self.mod[func_name]
        parent = self.index(func_name).parent
        paths: set[int] = set()
        for old in mapping:
            p = parent.get(id(old))
            while p is not None and id(p) not in paths:
                paths.add(id(p))
                p = parent.get(id(p))
        new_body = _rebuilt(func.body, {id(k): v for k, v in mapping.items()}, paths)
        if new_body is func.body:
            return
        self.set_func(func_name, func.with_body(new_body))

    def set_func(self, func_name: str, func: PrimFunc) -> None:
        self.mod = self.mod.with_function(func_name, func)
        self._index.pop(func_name, None)
        self.index(func_name)
