"""Whole-function analyses of TIR (TVM's ``tvm.tir.analysis``): the anchor block.

The anchor block is the block that does a module's main computation; databases compare
modules by it (``ModuleEquality("anchor-block")``) and :mod:`metaschedule.trace_apply`
moves a trace tuned on one module to another with the same anchor.
"""

from __future__ import annotations

from .expr import IntImm
from .function import IRModule, PrimFunc, as_module
from .functor import Visitor
from .stmt import Block, IterType

__all__ = ["block_work", "find_anchor_block"]


def block_work(block: Block) -> int:
    """The size of a block's iteration domain: how many times its body runs.

    A symbolic extent counts as 1 (unknown work), so such blocks rank low.
    """
    work = 1
    for iv in block.iter_vars:
        extent = iv.dom.extent
        work *= extent.value if isinstance(extent, IntImm) else 1
    return work


class _Blocks(Visitor):
    def __init__(self) -> None:
        self.blocks: list[Block] = []

    def visit_Block(self, block: Block) -> None:
        self.blocks.append(block)
        self.generic_visit(block)


def find_anchor_block(mod: IRModule | PrimFunc) -> Block | None:
    """The anchor block of a module: the block that does the most work.

    This is the one definition of "anchor block" in the project. Among all blocks except
    the opaque ``root`` blocks (no iteration variables), pick the one with the largest
    iteration domain (:func:`block_work`); on a tie prefer a block with a reduction
    (iteration variable of kind ``COMM_REDUCE``), then the first in program order. For a
    matmul followed by a ReLU this is the matmul block. ``None`` if there is no such block.
    """
    finder = _Blocks()
    for func in as_module(mod).functions.values():
        finder.visit(func.body)
    best: Block | None = None
    best_key: tuple[int, int] | None = None
    for block in finder.blocks:
        if not block.iter_vars:
            continue
        has_reduce = any(iv.iter_type == IterType.COMM_REDUCE for iv in block.iter_vars)
        key = (block_work(block), int(has_reduce))
        if best_key is None or key > best_key:
            best, best_key = block, key
    return best
