"""Pass: turn a block's ``init`` into a guarded statement before its body.

Before::

    with block("C"):            # v_k is a reduction iter var over [0, 128)
        with init():
            C[v_i, v_j] = 0.0
        C[v_i, v_j] += A[v_i, v_k] * B[v_k, v_j]

After::

    with block("C"):
        if v_k == 0:
            C[v_i, v_j] = 0.0
        C[v_i, v_j] += A[v_i, v_k] * B[v_k, v_j]

A block without reduction iter vars runs its init unconditionally.
"""

from __future__ import annotations

from ..expr import EQ, cast, logical_and
from ..function import PrimFunc
from ..functor import Mutator, replace_fields
from ..stmt import Block, BufferStore, IfThenElse, IterType, seq


class _LowerInit(Mutator):
    def visit_BufferStore(self, store: BufferStore) -> BufferStore:
        return store  # no block inside: its expressions need no walk

    def visit_Block(self, block: Block) -> Block:
        block = self.generic_visit(block)
        if block.init is None:
            return block
        conds = [
            EQ(iv.var, cast(iv.var.dtype, iv.dom.min))
            for iv in block.iter_vars
            if iv.iter_type == IterType.COMM_REDUCE
        ]
        init = IfThenElse(logical_and(*conds), block.init) if conds else block.init
        return replace_fields(block, body=seq(init, block.body), init=None)


def lower_init(func: PrimFunc) -> PrimFunc:
    """Replace every block ``init`` by ``if all(reduction vars == their min): init``."""
    return func.with_body(_LowerInit().visit(func.body))
