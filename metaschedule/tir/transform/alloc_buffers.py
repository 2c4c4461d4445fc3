"""Pass: turn a block's ``alloc_buffers`` into ``Allocate`` statements at the block.

Before::

    with block("root"):
        T = alloc_buffer((128,))
        <body>

After::

    with block("root"):
        allocate T[128]:
            <body>

Where the allocation finally lives is decided later by ``plan_allocations``.
"""

from __future__ import annotations

from ..function import PrimFunc
from ..functor import Mutator, replace_fields
from ..stmt import Allocate, Block, BufferStore


class _LowerAllocBuffers(Mutator):
    def visit_BufferStore(self, store: BufferStore) -> BufferStore:
        return store  # no block inside: its expressions need no walk

    def visit_Block(self, block: Block) -> Block:
        block = self.generic_visit(block)
        if not block.alloc_buffers:
            return block
        body = block.body
        for buf in reversed(block.alloc_buffers):
            body = Allocate(buf, body)
        return replace_fields(block, body=body, alloc_buffers=())


def lower_alloc_buffers(func: PrimFunc) -> PrimFunc:
    """Move every block's ``alloc_buffers`` into ``Allocate`` nodes wrapping its body."""
    return func.with_body(_LowerAllocBuffers().visit(func.body))
