"""Statement surgery shared by the primitives.

* :class:`StmtEditor`: several edits of one tree (insert a statement, add an
  allocation, swap a buffer...) applied in a single pass, ready for one commit;
* positions: a statement's index in its parent's body, where a new statement goes;
* removal: the statement to delete when a block leaves its loops, and deleting it;
* builders: copy nests (``dst[v] = src[v]`` blocks), unique block names.

Nothing here commits to the schedule state; primitives pass the results to
``ScheduleState.replace``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from ..tir import (
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    For,
    ForKind,
    IterType,
    IterVar,
    Range,
    SeqStmt,
    Stmt,
    Var,
)
from ..tir.arith import Analyzer
from ..tir.expr import const
from ..tir.functor import Mutator, substitute
from ..tir.names import unique_name
from .analysis import lowest_common_ancestor
from .error import ScheduleError
from .state import ScheduleState

# ----------------------------------------------------------------------------- children


def stmt_children(stmt: Stmt) -> list[Stmt]:
    """The statements of a body, flattened one level (a SeqStmt's items)."""
    return list(stmt.seq) if isinstance(stmt, SeqStmt) else [stmt]


def body_children(node: For | Block) -> list[Stmt]:
    """The statements of a loop's or block's body."""
    return stmt_children(node.body)


def with_children(node: For | Block, children: Sequence[Stmt]) -> For | Block:
    """``node`` with its body replaced by ``children`` (a SeqStmt when several)."""
    body = children[0] if len(children) == 1 else SeqStmt(tuple(children))
    return dataclasses.replace(node, body=body)


def enclosing_loop_or_block(state: ScheduleState, fname: str, node: Stmt) -> For | Block:
    """``node`` itself if it is a loop or block, else its nearest such ancestor."""
    if isinstance(node, (For, Block)):
        return node
    for anc in state.ancestors(fname, node):
        if isinstance(anc, (For, Block)):
            return anc
    raise ScheduleError("internal error: statement outside any block")


def child_index(state: ScheduleState, fname: str, parent: For | Block, node: Stmt) -> int:
    """Position, among ``parent``'s body statements, of the one holding ``node``."""
    chain = [node, *state.ancestors(fname, node)]
    for k, child in enumerate(body_children(parent)):
        if any(c is child for c in chain):
            return k
    raise ScheduleError("internal error: the statement is not under the given parent")


def insertion_point(
    state: ScheduleState, fname: str, scope: BlockRealize, nodes: Sequence[Stmt]
) -> For | Block:
    """The innermost loop or block holding all ``nodes`` (the scope block for one node)."""
    if len(nodes) < 2:
        return scope.block
    lca = lowest_common_ancestor(state, fname, list(nodes))
    if lca is None or isinstance(lca, BlockRealize):
        return scope.block
    return enclosing_loop_or_block(state, fname, lca)


# ----------------------------------------------------------------------------- multi-edits


class StmtEditor(Mutator):
    """Apply several edits to one tree in a single pass.

    Each edit is keyed by the identity of an original statement and receives that
    statement rebuilt with its own descendants already edited, so edits may nest
    (a scope block, a loop inside it, a block inside that loop).
    """

    def __init__(self):
        self.edits: dict[int, list[Callable[[Stmt], Stmt]]] = {}

    def add(self, node: Stmt, fn: Callable[[Stmt], Stmt]) -> StmtEditor:
        self.edits.setdefault(id(node), []).append(fn)
        return self

    def visit(self, node):
        if isinstance(node, tuple):
            if node and isinstance(node[0], Stmt):
                return super().visit(node)
            return node
        if not isinstance(node, Stmt):
            return node
        fns = self.edits.get(id(node))
        new = super().visit(node)
        for fn in fns or ():
            new = fn(new)
        return new

    def run(self, root: Stmt) -> Stmt:
        return self.visit(root)


def insert_child(index: int, stmt: Stmt) -> Callable[[Stmt], Stmt]:
    """An edit that inserts ``stmt`` at ``index`` of a loop's or block's body."""

    def fn(node: Stmt) -> Stmt:
        kids = body_children(node)  # type: ignore[arg-type]
        return with_children(node, kids[:index] + [stmt] + kids[index:])  # type: ignore

    return fn


def add_alloc(buffer: Buffer) -> Callable[[Stmt], Stmt]:
    """An edit that adds ``buffer`` to a block's ``alloc_buffers``."""

    def fn(block: Stmt) -> Stmt:
        return dataclasses.replace(block, alloc_buffers=(*block.alloc_buffers, buffer))

    return fn


def replace_buffer(old: Buffer, new: Buffer) -> Callable[[Stmt], Stmt]:
    """An edit that makes a statement use ``new`` wherever it used ``old``."""
    return lambda node: substitute(node, {}, {old: new})


# ----------------------------------------------------------------------------- removal


def removal_target(state: ScheduleState, fname: str, realize: BlockRealize) -> Stmt:
    """The statement to delete when ``realize`` leaves its place: its highest enclosing
    loop (below the scope block) that holds nothing but this block, else the block."""
    target: Stmt = realize
    for anc in state.ancestors(fname, realize):
        if not isinstance(anc, For):
            break
        blocks = state.child_block_realizes(anc)
        if len(blocks) != 1 or blocks[0] is not realize:
            break
        target = anc
    return target


class _Remover(Mutator):
    """Drops ``target`` from the SeqStmt holding it; only statements are walked."""

    def __init__(self, target: Stmt):
        self.target = target
        self.done = False

    def visit(self, node):
        if isinstance(node, tuple) and node and isinstance(node[0], Stmt):
            kept = []
            for x in node:
                if x is self.target:
                    self.done = True
                    continue
                kept.append(self.visit(x))
            same = len(kept) == len(node) and all(a is b for a, b in zip(kept, node))
            return node if same else tuple(kept)
        if isinstance(node, Stmt):
            if node is self.target:
                raise ScheduleError(
                    "cannot remove the block: it is the whole body of its enclosing loop or "
                    "block, which would become empty"
                )
            return super().visit(node)
        return node

    def visit_SeqStmt(self, node: SeqStmt):
        new = self.generic_visit(node)
        if new is not node:
            if not new.seq:
                raise ScheduleError("removing the block would leave an empty scope")
            if len(new.seq) == 1:
                return new.seq[0]
        return new


def remove_stmt(root: Stmt, target: Stmt) -> Stmt:
    """``root`` without ``target``, which must sit in a SeqStmt; a sequence left with one
    statement becomes that statement.

    Raises:
        ScheduleError: ``target`` is the only statement of its loop or block body.
    """
    if root is target:
        raise ScheduleError("removing the block would leave an empty scope")
    rm = _Remover(target)
    new = rm.visit(root)
    if not rm.done:
        raise ScheduleError("internal error: the statement to remove is not under the root")
    return new


# ----------------------------------------------------------------------------- builders


def unique_block_name(state: ScheduleState, fname: str, base: str) -> str:
    """``base``, or ``base_1``, ``base_2``... whichever no block of the function uses."""
    return unique_name(base, state.index(fname).blocks)


def copy_nest(src: Buffer, dst: Buffer, region: Sequence[Range], name: str, ana: Analyzer) -> Stmt:
    """Loops ``ax0, ax1, ...`` over ``region`` around a block ``dst[v] = src[v]``."""
    loop_vars = [Var(f"ax{d}", r.extent.dtype) for d, r in enumerate(region)]
    iter_vars = [
        IterVar(Var(f"v{d}", s.dtype), Range(const(0, s.dtype), s), IterType.DATA_PAR)
        for d, s in enumerate(src.shape)
    ]
    idx = tuple(iv.var for iv in iter_vars)
    point = tuple(Range(v, const(1, v.dtype)) for v in idx)
    block = Block(
        iter_vars=tuple(iter_vars),
        reads=(BufferRegion(src, point),),
        writes=(BufferRegion(dst, point),),
        name_hint=name,
        body=BufferStore(dst, src.load(idx), idx),
    )
    values = [ana.simplify(r.min + lv) for r, lv in zip(region, loop_vars)]
    stmt: Stmt = BlockRealize(tuple(values), const(True), block)
    for lv, r in zip(reversed(loop_vars), reversed(region)):
        stmt = For(lv, const(0, lv.dtype), r.extent, ForKind.SERIAL, stmt)
    return stmt
