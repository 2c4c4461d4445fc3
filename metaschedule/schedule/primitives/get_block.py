"""Lookup primitives: blocks by name, loops of a block, producers and consumers."""

from __future__ import annotations

from ...tir import Buffer
from ..analysis import consumers, producers, scope_blocks
from ..base import ScheduleBase
from ..instruction import InstructionKind, register_inst_kind
from ..rv import BlockRV, LoopRV


def _buffers(regions) -> set[Buffer]:
    return {r.buffer for r in regions}


class GetBlockMixin(ScheduleBase):
    def get_block(self, name: str, func_name: str = "main") -> BlockRV:
        """The block called ``name`` in function ``func_name``.

        As in TVM the default is "main"; a module whose only function has another
        name is looked up in that function.
        """
        if func_name == "main" and "main" not in self.mod and len(self.mod) == 1:
            func_name = next(iter(self.mod))
        fname = self._func_name_for_lookup(func_name)
        realize = self.state.block_realize(fname, name)
        rv = self._new_block_rv(fname, realize)
        self._record("GetBlock", [], [name, fname], [rv])
        return rv

    def get_loops(self, block_or_loop: BlockRV | LoopRV) -> list[LoopRV]:
        """Loops above the block (or loop, inclusive) up to its scope block, outermost first."""
        if isinstance(block_or_loop, LoopRV):
            fname, node = self._loop(block_or_loop)
            loops = self.state.loops_above(fname, node) + [node]
        else:
            fname, node = self._block(block_or_loop)
            loops = self.state.loops_above(fname, node)
        out = [self._new_loop_rv(fname, lp) for lp in loops]
        self._record("GetLoops", [block_or_loop], [], out)
        return out

    def get_child_blocks(self, block_or_loop: BlockRV | LoopRV) -> list[BlockRV]:
        """Blocks directly under a block or loop (not nested inside another block)."""
        if isinstance(block_or_loop, LoopRV):
            fname, node = self._loop(block_or_loop)
        else:
            fname, node = self._block(block_or_loop)
        out = [self._new_block_rv(fname, r) for r in self.state.child_block_realizes(node)]
        self._record("GetChildBlocks", [block_or_loop], [], out)
        return out

    def get_producers(self, block: BlockRV) -> list[BlockRV]:
        """Blocks in the same scope, before ``block``, that write a buffer it reads."""
        fname, realize = self._block(block)
        found = producers(scope_blocks(self.state, fname, realize, "get_producers"), realize)
        out = [self._new_block_rv(fname, r) for r in found]
        self._record("GetProducers", [block], [], out)
        return out

    def get_consumers(self, block: BlockRV) -> list[BlockRV]:
        """Blocks in the same scope, after ``block``, that read a buffer it writes."""
        fname, realize = self._block(block)
        found = consumers(scope_blocks(self.state, fname, realize, "get_consumers"), realize)
        out = [self._new_block_rv(fname, r) for r in found]
        self._record("GetConsumers", [block], [], out)
        return out

    def get_output_blocks(self, scope_block: BlockRV) -> list[BlockRV]:
        """Blocks under ``scope_block`` that write a buffer not allocated inside the scope."""
        fname, scope = self._block(scope_block)
        local = set(scope.block.alloc_buffers)
        out = [
            self._new_block_rv(fname, r)
            for r in self.state.child_block_realizes(scope)
            if _buffers(r.block.writes) - local
        ]
        self._record("GetOutputBlocks", [scope_block], [], out)
        return out


for _kind in (
    InstructionKind("GetBlock", "get_block", attrs=("name", "func_name"), is_pure=True),
    InstructionKind(
        "GetLoops", "get_loops", inputs=("block_or_loop",), is_pure=True, returns_list=True
    ),
    InstructionKind(
        "GetChildBlocks",
        "get_child_blocks",
        inputs=("block_or_loop",),
        is_pure=True,
        returns_list=True,
    ),
    InstructionKind(
        "GetProducers", "get_producers", inputs=("block",), is_pure=True, returns_list=True
    ),
    InstructionKind(
        "GetConsumers", "get_consumers", inputs=("block",), is_pure=True, returns_list=True
    ),
    InstructionKind(
        "GetOutputBlocks",
        "get_output_blocks",
        inputs=("scope_block",),
        is_pure=True,
        returns_list=True,
    ),
):
    register_inst_kind(_kind)
