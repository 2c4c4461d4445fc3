"""The schedule's view of the IR: fast lookups of blocks and loops, and replacement.

The IR is immutable, so a primitive builds new statements and asks the state to
``replace`` old ones; ancestors are rebuilt, everything else is shared. Blocks are
found by their unique name, loops by their loop variable (a loop keeps its variable
when only its body changes). The index is rebuilt lazily after each replacement.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator

from ..tir import Block, BlockRealize, For, IRModule, PrimFunc, SeqStmt, Stmt, Var
from ..tir.expr import Node
from ..tir.functor import Mutator
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
    out = []
    for f in dataclasses.fields(node):
        v = getattr(node, f.name)
        if isinstance(v, Stmt):
            out.append(v)
        elif isinstance(v, tuple) and v and isinstance(v[0], Stmt):
            out.extend(v)
    return out


class _Replacer(Mutator):
    def __init__(self, mapping: dict[int, Stmt | None]):
        self.mapping = mapping

    def visit(self, node):
        if isinstance(node, Stmt) and id(node) in self.mapping:
            return self.mapping[id(node)]
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


class ScheduleState:
    """The current IRModule of a schedule plus cached indices for lookups."""

    def __init__(self, mod: IRModule):
        self.mod = mod
        self._index: dict[str, _FuncIndex] = {}
        for name in mod.functions:  # validates unique block names up front
            self.index(name)

    def copy(self) -> "ScheduleState":
        new = ScheduleState.__new__(ScheduleState)
        new.mod = self.mod
        new._index = dict(self._index)
        return new

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
        parent = self.parent(func_name, node)
        while parent is not None:
            yield parent
            parent = self.parent(func_name, parent)

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

    def func_name_of_block(self, name: str) -> str:
        for fname in self.mod.functions:
            if name in self.index(fname).blocks:
                return fname
        raise BlockNotFoundError(f"no block named {name!r} in any function of the module")

    # updates --------------------------------------------------------------------------
    def replace(self, func_name: str, mapping: dict[Stmt, Stmt | None]) -> None:
        """Replace statements (by identity) in ``func_name``; ``None`` removes from a SeqStmt."""
        func = self.mod[func_name]
        new_body = _Replacer({id(k): v for k, v in mapping.items()}).visit(func.body)
        if new_body is func.body:
            return
        self.set_func(func_name, func.with_body(new_body))

    def set_func(self, func_name: str, func: PrimFunc) -> None:
        self.mod = self.mod.with_function(func_name, func)
        self._index.pop(func_name, None)
        self.index(func_name)


def is_node(x) -> bool:
    return isinstance(x, Node)
