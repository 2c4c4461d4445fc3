"""Buffers and dataflow within a scope: a block's n-th read or write buffer, where a
buffer is allocated, the writers and readers of a buffer, a block's producers and
consumers (siblings under the same scope block, in program order).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ...tir import (
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    For,
    PrimFunc,
)
from ...tir.functor import Visitor
from ..error import (
    BufferIndexError,
    ScheduleError,
    StorageScopeError,
)
from ..state import ScheduleState

# ----------------------------------------------------------------------------- buffers


#: storage scopes a cache stage or ``set_scope`` may use
STORAGE_SCOPES = ("global", "local", "shared")


def check_storage_scope(scope: object, primitive: str) -> str:
    """``scope`` if it is one of :data:`STORAGE_SCOPES`, else a StorageScopeError."""
    if not isinstance(scope, str) or scope not in STORAGE_SCOPES:
        raise StorageScopeError(
            f"{primitive}: storage scope {scope!r} is not one of {', '.join(STORAGE_SCOPES)}"
        )
    return scope


def nth_buffer(block: Block, index: int, kind: str, primitive: str) -> Buffer:
    """The buffer of ``block``'s ``index``-th read (kind "read") or write region."""
    regions = block.reads if kind == "read" else block.writes
    if isinstance(index, bool) or not isinstance(index, int):
        raise BufferIndexError(
            f"{primitive}: the {kind} buffer index must be an int, got {index!r}"
        )
    if not 0 <= index < len(regions):
        names = [r.buffer.name for r in regions]
        raise BufferIndexError(
            f"{primitive}: {kind} buffer index {index} is out of range for block "
            f"{block.name_hint!r}, which has {len(regions)} {kind} buffer(s) {names}"
        )
    return regions[index].buffer


def allocation_site(func: PrimFunc, buffer: Buffer) -> Block | None:
    """The block whose ``alloc_buffers`` holds ``buffer`` (None for parameters)."""
    found: list[Block] = []

    class _Find(Visitor):
        def visit_Block(self, block: Block) -> None:
            if any(b is buffer for b in block.alloc_buffers):
                found.append(block)
            self.visit(block.init)
            self.visit(block.body)

        def visit_BlockRealize(self, realize: BlockRealize) -> None:
            self.visit(realize.block)

        def visit_For(self, loop: For) -> None:
            self.visit(loop.body)

        def visit_BufferStore(self, store) -> None:
            pass  # no statements below

    _Find().visit(func.body)
    return found[0] if found else None


# ----------------------------------------------------------------------------- dataflow


def buffers_of(regions: Iterable[BufferRegion]) -> list[Buffer]:
    out: list[Buffer] = []
    for r in regions:
        if r.buffer not in out:
            out.append(r.buffer)
    return out


def scope_of(
    state: ScheduleState, fname: str, realize: BlockRealize, primitive: str = ""
) -> BlockRealize:
    """The BlockRealize of ``realize``'s scope block; a ScheduleError for the root block."""
    scope = state.scope_realize(fname, realize)
    if scope is None:
        where = f"{primitive}: " if primitive else ""
        raise ScheduleError(
            f"{where}block {realize.block.name_hint!r} is the root block; it "
            "has no scope to work in"
        )
    return scope


def scope_blocks(
    state: ScheduleState, fname: str, realize: BlockRealize, primitive: str = ""
) -> list[BlockRealize]:
    """The blocks of ``realize``'s scope (its siblings and itself), in program order."""
    return state.child_block_realizes(scope_of(state, fname, realize, primitive))


def writers_in_scope(blocks: Sequence[BlockRealize], buffer: Buffer) -> list[BlockRealize]:
    return [r for r in blocks if any(w.buffer is buffer for w in r.block.writes)]


def readers_in_scope(blocks: Sequence[BlockRealize], buffer: Buffer) -> list[BlockRealize]:
    return [r for r in blocks if any(w.buffer is buffer for w in r.block.reads)]


def producers(blocks: Sequence[BlockRealize], realize: BlockRealize) -> list[BlockRealize]:
    """Blocks before ``realize`` in ``blocks`` that write a buffer it reads."""
    reads = set(buffers_of(realize.block.reads))
    out = []
    for r in blocks:
        if r is realize:
            break
        if reads & set(buffers_of(r.block.writes)):
            out.append(r)
    return out


def consumers(blocks: Sequence[BlockRealize], realize: BlockRealize) -> list[BlockRealize]:
    """Blocks after ``realize`` in ``blocks`` that read a buffer it writes."""
    writes = set(buffers_of(realize.block.writes))
    idx = next(i for i, r in enumerate(blocks) if r is realize)
    return [r for r in blocks[idx + 1 :] if writes & set(buffers_of(r.block.reads))]
