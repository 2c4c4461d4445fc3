"""Pass: replace blocks by plain statements.

A ``BlockRealize`` becomes the block's body with every iteration variable replaced
by its bound value; a predicate that is not trivially true becomes an ``IfThenElse``.
``init`` and ``alloc_buffers`` must have been lowered already (``lower_init``,
``lower_alloc_buffers``). Read/write regions and block annotations are dropped.

Before::

    for i in range(10):
        with block("B"):                 # predicate: i < 9
            v = axis.spatial(9, i)
            B[v] = A[v] + 1.0

After::

    for i in range(10):
        if i < 9:
            B[i] = A[i] + 1.0
"""

from __future__ import annotations

from ..expr import IntImm
from ..function import PrimFunc
from ..functor import Mutator, substitute
from ..stmt import Block, BlockRealize, BufferStore, IfThenElse, Stmt


class _ConvertBlocks(Mutator):
    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        block = realize.block
        _check_lowered(block)
        vmap = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values)}
        body = self.visit(substitute(block.body, vmap))
        pred = realize.predicate
        if isinstance(pred, IntImm) and pred.value:
            return body
        return IfThenElse(pred, body)

    def visit_Block(self, block: Block) -> Stmt:
        raise ValueError(f"block {block.name_hint} appears outside a BlockRealize")

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        return store  # no block inside: its expressions need no walk


def _check_lowered(block: Block) -> None:
    if block.init is not None:
        raise ValueError(
            f"block {block.name_hint} still has an init statement; run lower_init first"
        )
    if block.alloc_buffers:
        raise ValueError(
            f"block {block.name_hint} still allocates "
            f"{', '.join(b.name for b in block.alloc_buffers)}; run lower_alloc_buffers first"
        )


def convert_blocks(func: PrimFunc) -> PrimFunc:
    """Inline every block into its surrounding loops (see the module docstring)."""
    return func.with_body(_ConvertBlocks().visit(func.body))
