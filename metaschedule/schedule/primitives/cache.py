"""Cache stages: ``cache_read`` and ``cache_write``.

A cache stage is a block that copies a buffer into a new buffer of another storage
scope (``local``, ``shared``), or back. Its loop nest covers the region the producer
writes (the whole buffer when the producer sits at the top of the scope);
``compute_at``/``reverse_compute_at`` then move it next to its consumer and shrink it,
and lowering compacts the allocation.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...tir import (
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    For,
    Max,
    Min,
    Range,
    Stmt,
)
from ...tir.arith import Analyzer
from ..analysis import (
    analyzer_for_loops,
    check_storage_scope,
    clamp_region,
    nth_buffer,
    readers_in_scope,
    relax_region,
    scope_of,
    writers_in_scope,
)
from ..base import ScheduleBase, atomic
from ..edit import (
    StmtEditor,
    add_alloc,
    child_index,
    copy_nest,
    insert_child,
    insertion_point,
    replace_buffer,
    unique_block_name,
)
from ..error import CacheStageError
from ..instruction import InstructionKind, register_inst_kind
from ..rv import BlockRV
from ..state import ScheduleState


def _loops_below(
    state: ScheduleState, fname: str, top: For | Block, realize: BlockRealize
) -> tuple[list[For], list[For]]:
    """The loops above ``realize`` split into (above-or-at ``top``, strictly below ``top``)."""
    loops = state.loops_above(fname, realize)
    if isinstance(top, Block):
        return [], loops
    k = next(i for i, lp in enumerate(loops) if lp is top)
    return loops[: k + 1], loops[k + 1 :]


# ----------------------------------------------------------------------------- the mixin


class CacheMixin(ScheduleBase):
    def _cache_target(self, block: BlockRV, index: int, storage_scope: str, kind: str):
        """Check the arguments of cache_read (kind "read") or cache_write ("write").

        Returns (function name, the block's realize, the index, the scope name, the cached
        buffer, the scope block's realize, the blocks of that scope).
        """
        primitive = f"cache_{kind}"
        fname, realize = self._block(block)
        idx = self._int(index)
        scope_name = check_storage_scope(storage_scope, primitive)
        buf = nth_buffer(realize.block, idx, kind, primitive)
        scope = scope_of(self.state, fname, realize, primitive)
        return fname, realize, idx, scope_name, buf, scope, self.state.child_block_realizes(scope)

    def _consumer_list(
        self,
        fname: str,
        siblings: list[BlockRealize],
        buffer: Buffer,
        consumer_blocks,
        primitive: str,
    ) -> list[BlockRealize] | None:
        """The given consumers as realizes (None when none were given)."""
        if not consumer_blocks:
            return None
        out = []
        for rv in consumer_blocks:
            f, r = self._block(rv)
            name = r.block.name_hint
            if f != fname or not any(s is r for s in siblings):
                raise CacheStageError(
                    f"{primitive}: consumer block {name!r} is not in the same "
                    "scope as the cached block"
                )
            if not any(x.buffer is buffer for x in r.block.reads):
                raise CacheStageError(
                    f"{primitive}: consumer block {name!r} does not read buffer {buffer.name!r}"
                )
            if not any(x is r for x in out):
                out.append(r)
        return out

    def _check_after(
        self,
        fname: str,
        loc: For | Block,
        anchor: BlockRealize,
        later: Sequence[BlockRealize],
        primitive: str,
        what: str,
    ) -> int:
        k = child_index(self.state, fname, loc, anchor)
        for r in later:
            if child_index(self.state, fname, loc, r) <= k:
                raise CacheStageError(
                    f"{primitive}: block {r.block.name_hint!r} reads buffer {what} before (or in "
                    f"the same loop body as) block {anchor.block.name_hint!r} writes it"
                )
        return k

    def _relaxed_write(
        self, fname: str, realize: BlockRealize, buffer: Buffer, loc: For | Block
    ) -> tuple[list[Range], Analyzer]:
        outer, inner = _loops_below(self.state, fname, loc, realize)
        ana = analyzer_for_loops(outer)
        regions = [w for w in realize.block.writes if w.buffer is buffer]
        relaxed = relax_region(regions, realize, inner, ana)
        merged = relaxed[0]
        for r in relaxed[1:]:  # several write regions of one buffer: their bounding box
            merged = BufferRegion(
                buffer,
                tuple(
                    Range(
                        ana.simplify(Min(a.min, b.min)),
                        ana.simplify(Max(a.min + a.extent, b.min + b.extent) - Min(a.min, b.min)),
                    )
                    for a, b in zip(merged.region, r.region)
                ),
            )
        return list(clamp_region(merged, ana).region), ana

    def _add_stage(
        self,
        fname: str,
        scope: BlockRealize,
        loc: For | Block,
        pos: int,
        nest: Stmt,
        buf: Buffer,
        cache: Buffer,
        redirect: Sequence[BlockRealize],
    ) -> BlockRV:
        """Insert ``nest`` at ``pos`` of ``loc``, allocate ``cache`` in the scope block and
        make the ``redirect`` blocks use it instead of ``buf``, in one commit."""
        edit = StmtEditor().add(loc, insert_child(pos, nest)).add(scope.block, add_alloc(cache))
        for r in redirect:
            edit.add(r, replace_buffer(buf, cache))
        self.state.replace(fname, {scope.block: edit.run(scope.block)})
        return self._new_block_rv(fname, cache.name)

    @atomic
    def cache_read(
        self,
        block: BlockRV,
        read_buffer_index: int,
        storage_scope: str,
        consumer_blocks: list[BlockRV] | None = None,
    ) -> BlockRV:
        """Copy a read buffer into a new ``storage_scope`` buffer and read that instead::

            for i in range(8):                 A_local = alloc_buffer((8,), scope="local")
                B[i] = A[i] + 1        ->      for ax0 in range(8):
                                                   A_local[ax0] = A[ax0]   # block "A_local"
                                               for i in range(8):
                                                   B[i] = A_local[i] + 1

        The copy block ``<buffer>_<scope>`` sits right after the buffer's producer (at the
        start of the scope for an input, copying the region the scope block reads).
        ``consumer_blocks`` limits the readers that are redirected; by default (None or
        empty, as in TVM) every reader in the scope is.

        Raises:
            ScheduleError: a bad index or scope, several writers of the buffer, a consumer
                outside the scope or not reading the buffer, or a reader before the producer.
        """
        fname, realize, idx, scope_name, buf, scope, siblings = self._cache_target(
            block, read_buffer_index, storage_scope, "read"
        )
        writers = writers_in_scope(siblings, buf)
        if len(writers) > 1:
            raise CacheStageError(
                f"cache_read: buffer {buf.name!r} is written by several blocks of the scope "
                f"({', '.join(repr(w.block.name_hint) for w in writers)}); expected at most one"
            )
        producer = writers[0] if writers else None
        if producer is realize:
            raise CacheStageError(
                f"cache_read: block {realize.block.name_hint!r} both writes and reads buffer "
                f"{buf.name!r}; a cache of it cannot be read there"
            )
        given = self._consumer_list(fname, siblings, buf, consumer_blocks, "cache_read")
        consumers = (
            given
            if given is not None
            else [r for r in readers_in_scope(siblings, buf) if r is not producer]
        )
        if producer is not None and any(c is producer for c in consumers):
            raise CacheStageError(
                f"cache_read: block {producer.block.name_hint!r} both writes and reads buffer "
                f"{buf.name!r}; a cache of it cannot be read there"
            )
        name = unique_block_name(self.state, fname, f"{buf.name}_{scope_name}")
        cache = Buffer(name, buf.shape, buf.dtype, scope_name)
        if producer is None:  # an input of the scope: copy what the scope block reads
            loc: For | Block = scope.block
            pos = 0
            scope_read = [r for r in scope.block.reads if r.buffer is buf]
            region = list(
                (scope_read[0] if len(scope_read) == 1 else BufferRegion.full_region(buf)).region
            )
            ana = Analyzer()
            for iv in scope.block.iter_vars:
                ana.bind(iv.var, iv.dom)
        else:
            loc = insertion_point(self.state, fname, scope, [producer, *consumers])
            pos = (
                self._check_after(fname, loc, producer, consumers, "cache_read", repr(buf.name)) + 1
            )
            region, ana = self._relaxed_write(fname, producer, buf, loc)
        nest = copy_nest(buf, cache, region, name, ana)
        out = self._add_stage(fname, scope, loc, pos, nest, buf, cache, consumers)
        self._record("CacheRead", [block, *(consumer_blocks or [])], [idx, scope_name], [out])
        return out

    @atomic
    def cache_write(
        self,
        block: BlockRV,
        write_buffer_index: int,
        storage_scope: str,
        consumer_blocks: list[BlockRV] | None = None,
    ) -> BlockRV:
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
        fname, realize, idx, scope_name, buf, scope, siblings = self._cache_target(
            block, write_buffer_index, storage_scope, "write"
        )
        others = [w for w in writers_in_scope(siblings, buf) if w is not realize]
        if others:
            raise CacheStageError(
                f"cache_write: block {realize.block.name_hint!r} is not the only writer of "
                f"buffer {buf.name!r}: block {others[0].block.name_hint!r} writes it too"
            )
        readers = [r for r in readers_in_scope(siblings, buf) if r is not realize]
        given = self._consumer_list(fname, siblings, buf, consumer_blocks, "cache_write") or []
        if any(g is realize for g in given):
            raise CacheStageError(
                f"cache_write: block {realize.block.name_hint!r} cannot be its own consumer"
            )
        loc = insertion_point(self.state, fname, scope, [realize, *readers])
        pos = self._check_after(fname, loc, realize, readers, "cache_write", repr(buf.name)) + 1
        region, ana = self._relaxed_write(fname, realize, buf, loc)
        name = unique_block_name(self.state, fname, f"{buf.name}_{scope_name}")
        cache = Buffer(name, buf.shape, buf.dtype, scope_name)
        nest = copy_nest(cache, buf, region, name, ana)
        out = self._add_stage(fname, scope, loc, pos, nest, buf, cache, [realize, *given])
        self._record("CacheWrite", [block, *(consumer_blocks or [])], [idx, scope_name], [out])
        return out


register_inst_kind(
    InstructionKind(
        "CacheRead",
        "cache_read",
        inputs=("block", "consumer_blocks[]"),
        attrs=("read_buffer_index", "storage_scope"),
    )
)
register_inst_kind(
    InstructionKind(
        "CacheWrite",
        "cache_write",
        inputs=("block", "consumer_blocks[]"),
        attrs=("write_buffer_index", "storage_scope"),
    )
)


__all__ = ["CacheMixin"]
