"""Cache stages: ``cache_read`` and ``cache_write``.

A cache stage is a block that copies a buffer into a new buffer of another storage
scope (``local``, ``shared``), or back. Its loop nest covers the region the producer
writes (the whole buffer when the producer sits at the top of the scope);
``compute_at``/``reverse_compute_at`` then move it next to its consumer and shrink it,
and lowering compacts the allocation.

The helpers at the top (statement surgery with several edits in one commit, copy
nests, unique names) are shared with the other primitives of this group
(layout, reduction, blockize).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from ...tir import (
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    IterType,
    IterVar,
    Max,
    Min,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Var,
)
from ...tir.arith import Analyzer
from ...tir.expr import const
from ...tir.functor import Mutator, substitute
from ..analysis import (
    analyzer_for_loops,
    lowest_common_ancestor,
    readers_in_scope,
    relax_region,
    writers_in_scope,
)
from ..base import ScheduleBase, atomic
from ..error import ScheduleError
from ..instruction import InstructionKind, register_inst_kind
from ..rv import BlockRV
from ..state import ScheduleState

#: storage scopes a cache stage or ``set_scope`` may use
STORAGE_SCOPES = ("global", "local", "shared")


class BufferIndexError(ScheduleError):
    """A buffer index is outside a block's reads or writes."""


class StorageScopeError(ScheduleError):
    """An unknown storage scope."""


class CacheStageError(ScheduleError):
    """The dataflow around the cached buffer does not admit a cache stage."""


# ----------------------------------------------------------------------------- helpers


def check_storage_scope(scope: object, primitive: str) -> str:
    if not isinstance(scope, str) or scope not in STORAGE_SCOPES:
        raise StorageScopeError(
            f"{primitive}: storage scope {scope!r} is not one of {', '.join(STORAGE_SCOPES)}"
        )
    return scope


def nth_buffer(block: Block, index: int, kind: str, primitive: str) -> Buffer:
    """The buffer of ``block``'s ``index``-th read (kind "read") or write region."""
    regions = block.reads if kind == "read" else block.writes
    if isinstance(index, bool) or not isinstance(index, int):
        raise BufferIndexError(f"{primitive}: the {kind} buffer index must be an int, got "
                               f"{index!r}")
    if not 0 <= index < len(regions):
        names = [r.buffer.name for r in regions]
        raise BufferIndexError(
            f"{primitive}: {kind} buffer index {index} is out of range for block "
            f"{block.name_hint!r}, which has {len(regions)} {kind} buffer(s) {names}"
        )
    return regions[index].buffer


def unique_block_name(state: ScheduleState, fname: str, base: str) -> str:
    """``base``, or ``base_1``, ``base_2``... whichever no block of the function uses."""
    taken = state.index(fname).blocks
    if base not in taken:
        return base
    k = 1
    while f"{base}_{k}" in taken:
        k += 1
    return f"{base}_{k}"


def allocation_site(func: PrimFunc, buffer: Buffer) -> Block | None:
    """The block whose ``alloc_buffers`` holds ``buffer`` (None for parameters)."""
    found: list[Block] = []

    def walk(s: Stmt) -> None:
        if isinstance(s, BlockRealize):
            if any(b is buffer for b in s.block.alloc_buffers):
                found.append(s.block)
            walk(s.block.body)
            if s.block.init is not None:
                walk(s.block.init)
        elif isinstance(s, For):
            walk(s.body)
        elif isinstance(s, SeqStmt):
            for c in s.seq:
                walk(c)
        elif isinstance(s, IfThenElse):
            walk(s.then_case)
            if s.else_case is not None:
                walk(s.else_case)

    walk(func.body)
    return found[0] if found else None


def body_children(node: For | Block) -> list[Stmt]:
    return list(node.body.seq) if isinstance(node.body, SeqStmt) else [node.body]


def with_children(node: For | Block, children: Sequence[Stmt]) -> For | Block:
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


def insertion_point(state: ScheduleState, fname: str, scope: BlockRealize,
                    nodes: Sequence[Stmt]) -> For | Block:
    """The innermost loop or block holding all ``nodes`` (the scope block for one node)."""
    if len(nodes) < 2:
        return scope.block
    lca = lowest_common_ancestor(state, fname, list(nodes))
    if lca is None or isinstance(lca, BlockRealize):
        return scope.block
    return enclosing_loop_or_block(state, fname, lca)


def loops_below(state: ScheduleState, fname: str, top: For | Block, realize: BlockRealize
                ) -> tuple[list[For], list[For]]:
    """The loops above ``realize`` split into (above-or-at ``top``, strictly below ``top``)."""
    loops = state.loops_above(fname, realize)
    if isinstance(top, Block):
        return [], loops
    k = next(i for i, lp in enumerate(loops) if lp is top)
    return loops[: k + 1], loops[k + 1:]


def clamp_region(region: BufferRegion, ana: Analyzer) -> BufferRegion:
    """Intersect ``region`` with the buffer's bounds (relaxation may overshoot)."""
    out = []
    for rng, dim in zip(region.region, region.buffer.shape):
        lo, hi = rng.min, ana.simplify(rng.min + rng.extent)
        lo_ok, hi_ok = ana.can_prove(lo >= 0), ana.can_prove(hi <= dim)
        if lo_ok and hi_ok:
            out.append(rng)
            continue
        lo = lo if lo_ok else ana.simplify(Max(lo, const(0, lo.dtype)))
        hi = hi if hi_ok else ana.simplify(Min(hi, dim))
        out.append(Range(lo, ana.simplify(hi - lo)))
    return BufferRegion(region.buffer, tuple(out))


def copy_nest(src: Buffer, dst: Buffer, region: Sequence[Range], name: str,
              ana: Analyzer) -> Stmt:
    """Loops ``ax0, ax1, ...`` over ``region`` around a block ``dst[v] = src[v]``."""
    loop_vars = [Var(f"ax{d}", r.extent.dtype) for d, r in enumerate(region)]
    iter_vars = [IterVar(Var(f"v{d}", s.dtype), Range(const(0, s.dtype), s), IterType.DATA_PAR)
                 for d, s in enumerate(src.shape)]
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
    def fn(block: Stmt) -> Stmt:
        return dataclasses.replace(block, alloc_buffers=(*block.alloc_buffers, buffer))

    return fn


def replace_buffer(old: Buffer, new: Buffer) -> Callable[[Stmt], Stmt]:
    return lambda node: substitute(node, {}, {old: new})


# ----------------------------------------------------------------------------- the mixin


class CacheMixin(ScheduleBase):
    def _scope_of(self, fname: str, realize: BlockRealize, primitive: str) -> BlockRealize:
        scope = self.state.scope_realize(fname, realize)
        if scope is None:
            raise ScheduleError(f"{primitive}: block {realize.block.name_hint!r} is the root "
                                "block; it has no scope to cache in")
        return scope

    def _consumer_list(self, fname: str, siblings: list[BlockRealize], buffer: Buffer,
                       consumer_blocks, primitive: str) -> list[BlockRealize] | None:
        """The given consumers as realizes (None when none were given)."""
        if not consumer_blocks:
            return None
        out = []
        for rv in consumer_blocks:
            f, r = self._block(rv)
            name = r.block.name_hint
            if f != fname or not any(s is r for s in siblings):
                raise CacheStageError(f"{primitive}: consumer block {name!r} is not in the same "
                                      "scope as the cached block")
            if not any(x.buffer is buffer for x in r.block.reads):
                raise CacheStageError(f"{primitive}: consumer block {name!r} does not read "
                                      f"buffer {buffer.name!r}")
            if not any(x is r for x in out):
                out.append(r)
        return out

    def _check_after(self, fname: str, loc: For | Block, anchor: BlockRealize,
                     later: Sequence[BlockRealize], primitive: str, what: str) -> int:
        k = child_index(self.state, fname, loc, anchor)
        for r in later:
            if child_index(self.state, fname, loc, r) <= k:
                raise CacheStageError(
                    f"{primitive}: block {r.block.name_hint!r} reads buffer {what} before (or in "
                    f"the same loop body as) block {anchor.block.name_hint!r} writes it")
        return k

    def _relaxed_write(self, fname: str, realize: BlockRealize, buffer: Buffer,
                       loc: For | Block) -> tuple[list[Range], Analyzer]:
        outer, inner = loops_below(self.state, fname, loc, realize)
        ana = analyzer_for_loops(outer)
        regions = [w for w in realize.block.writes if w.buffer is buffer]
        relaxed = relax_region(regions, realize, inner, ana)
        merged = relaxed[0]
        for r in relaxed[1:]:  # several write regions of one buffer: their bounding box
            merged = BufferRegion(buffer, tuple(
                Range(ana.simplify(Min(a.min, b.min)), ana.simplify(
                    Max(a.min + a.extent, b.min + b.extent) - Min(a.min, b.min)))
                for a, b in zip(merged.region, r.region)))
        return list(clamp_region(merged, ana).region), ana

    @atomic
    def cache_read(self, block: BlockRV, read_buffer_index: int, storage_scope: str,
                   consumer_blocks: list[BlockRV] | None = None) -> BlockRV:
        """Copy a read buffer into a new ``storage_scope`` buffer and read that instead::

            for i in range(8):                 A_local = alloc_buffer((8,), scope="local")
                B[i] = A[i] + 1        ->      for ax0 in range(8):
                                                   A_local[ax0] = A[ax0]   # block "A_local"
                                               for i in range(8):
                                                   B[i] = A_local[i] + 1

        The copy block ``<buffer>_<scope>`` sits right after the buffer's producer (at the
        start of the scope for an input, copying the region the scope block reads). ``consumer_blocks`` limits the readers that are
        redirected; by default (None or empty, as in TVM) every reader in the scope is.

        Raises:
            ScheduleError: a bad index or scope, several writers of the buffer, a consumer
                outside the scope or not reading the buffer, or a reader before the producer.
        """
        fname, realize = self._block(block)
        idx = self._int(read_buffer_index)
        scope_name = check_storage_scope(storage_scope, "cache_read")
        buf = nth_buffer(realize.block, idx, "read", "cache_read")
        scope = self._scope_of(fname, realize, "cache_read")
        siblings = self.state.child_block_realizes(scope)
        writers = writers_in_scope(siblings, buf)
        if len(writers) > 1:
            raise CacheStageError(
                f"cache_read: buffer {buf.name!r} is written by several blocks of the scope "
                f"({', '.join(repr(w.block.name_hint) for w in writers)}); expected at most one")
        producer = writers[0] if writers else None
        if producer is realize:
            raise CacheStageError(
                f"cache_read: block {realize.block.name_hint!r} both writes and reads buffer "
                f"{buf.name!r}; a cache of it cannot be read there")
        given = self._consumer_list(fname, siblings, buf, consumer_blocks, "cache_read")
        consumers = given if given is not None else [
            r for r in readers_in_scope(siblings, buf) if r is not producer]
        if producer is not None and any(c is producer for c in consumers):
            raise CacheStageError(
                f"cache_read: block {producer.block.name_hint!r} both writes and reads buffer "
                f"{buf.name!r}; a cache of it cannot be read there")
        name = unique_block_name(self.state, fname, f"{buf.name}_{scope_name}")
        cache = Buffer(name, buf.shape, buf.dtype, scope_name)
        if producer is None:  # an input of the scope: copy what the scope block reads
            loc: For | Block = scope.block
            pos = 0
            scope_read = [r for r in scope.block.reads if r.buffer is buf]
            region = list((scope_read[0] if len(scope_read) == 1
                           else BufferRegion.full_region(buf)).region)
            ana = Analyzer()
            for iv in scope.block.iter_vars:
                ana.bind(iv.var, iv.dom)
        else:
            loc = insertion_point(self.state, fname, scope, [producer, *consumers])
            pos = self._check_after(fname, loc, producer, consumers, "cache_read",
                                    repr(buf.name)) + 1
            region, ana = self._relaxed_write(fname, producer, buf, loc)
        nest = copy_nest(buf, cache, region, name, ana)
        edit = StmtEditor().add(loc, insert_child(pos, nest)).add(scope.block, add_alloc(cache))
        for c in consumers:
            edit.add(c, replace_buffer(buf, cache))
        self.state.replace(fname, {scope.block: edit.run(scope.block)})
        out = self._new_block_rv(fname, name)
        self._record("CacheRead", [block, *(consumer_blocks or [])], [idx, scope_name], [out])
        return out

    @atomic
    def cache_write(self, block: BlockRV, write_buffer_index: int, storage_scope: str,
                    consumer_blocks: list[BlockRV] | None = None) -> BlockRV:
        """Make ``block`` write a new ``storage_scope`` buffer and copy it back after::

            for i in range(8):                 B_local = alloc_buffer((8,), scope="local")
                B[i] = A[i] + 1        ->      for i in range(8):
                                                   B_local[i] = A[i] + 1
                                               for ax0 in range(8):
                                                   B[ax0] = B_local[ax0]   # block "B_local"

        The block keeps its loops; the write-back block ``<buffer>_<scope>`` (returned)
        gets its own loop nest over the region the block writes, placed before the first
        reader. ``consumer_blocks`` are readers redirected to the cache (default: none).

        Raises:
            ScheduleError: a bad index or scope, another writer of the buffer in the scope,
                a consumer that does not read the buffer, or a reader before the block.
        """
        fname, realize = self._block(block)
        idx = self._int(write_buffer_index)
        scope_name = check_storage_scope(storage_scope, "cache_write")
        buf = nth_buffer(realize.block, idx, "write", "cache_write")
        scope = self._scope_of(fname, realize, "cache_write")
        siblings = self.state.child_block_realizes(scope)
        others = [w for w in writers_in_scope(siblings, buf) if w is not realize]
        if others:
            raise CacheStageError(
                f"cache_write: block {realize.block.name_hint!r} is not the only writer of "
                f"buffer {buf.name!r}: block {others[0].block.name_hint!r} writes it too")
        readers = [r for r in readers_in_scope(siblings, buf) if r is not realize]
        given = self._consumer_list(fname, siblings, buf, consumer_blocks, "cache_write") or []
        if any(g is realize for g in given):
            raise CacheStageError(f"cache_write: block {realize.block.name_hint!r} cannot be "
                                  "its own consumer")
        loc = insertion_point(self.state, fname, scope, [realize, *readers])
        pos = self._check_after(fname, loc, realize, readers, "cache_write",
                                repr(buf.name)) + 1
        region, ana = self._relaxed_write(fname, realize, buf, loc)
        name = unique_block_name(self.state, fname, f"{buf.name}_{scope_name}")
        cache = Buffer(name, buf.shape, buf.dtype, scope_name)
        nest = copy_nest(cache, buf, region, name, ana)
        edit = StmtEditor().add(loc, insert_child(pos, nest)).add(scope.block, add_alloc(cache))
        for r in [realize, *given]:
            edit.add(r, replace_buffer(buf, cache))
        self.state.replace(fname, {scope.block: edit.run(scope.block)})
        out = self._new_block_rv(fname, name)
        self._record("CacheWrite", [block, *(consumer_blocks or [])], [idx, scope_name], [out])
        return out


register_inst_kind(InstructionKind("CacheRead", "cache_read",
                                   inputs=("block", "consumer_blocks[]"),
                                   attrs=("read_buffer_index", "storage_scope")))
register_inst_kind(InstructionKind("CacheWrite", "cache_write",
                                   inputs=("block", "consumer_blocks[]"),
                                   attrs=("write_buffer_index", "storage_scope")))


__all__ = [
    "STORAGE_SCOPES",
    "BufferIndexError",
    "CacheMixin",
    "CacheStageError",
    "StorageScopeError",
]
