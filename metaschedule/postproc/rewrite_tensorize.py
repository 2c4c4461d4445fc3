"""``RewriteTensorize``: tensorize the blocks ``MultiLevelTilingWithIntrin`` tiled.

``MultiLevelTilingWithIntrin`` leaves a block with the intrinsic's loops innermost and the
annotation ``meta_schedule.auto_tensorize = <intrinsic>``; ``RewriteReductionBlock`` splits
its init off (and marks the init block with the same key and ""). This postprocessor then
tensorizes the inner loops and, with ``vectorize_init_loop``, vectorizes the init block's
innermost loop (the intrinsic's lanes)::

    for i_0, j_0, k_0, j_1, k_1 in T.grid(8, 4, 16, 16, 4):  for i_0, j_0, k_0 in T.grid(8, 4, 16):
        with T.block("C"):                    ->             with T.block("C_o"):
            # auto_tensorize = "dot_16x4_vnni"                   T.ms_dot_16x4_vnni(...)
            C[..] += A[..] * B[..]

Both steps are schedule instructions, so the trace replays them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..schedule import ScheduleError
from ..schedule.state import child_stmts
from ..schedule_rule.analysis import AUTO_TENSORIZE_KEY
from ..schedule_rule.tile_with_tensor_intrin import intrin_loops
from ..tir import Block, Stmt
from ..tir.tensor_intrin import TensorIntrin
from .base import Postproc

if TYPE_CHECKING:
    from ..schedule import BlockRV, Schedule

__all__ = ["RewriteTensorize"]

_LOG = logging.getLogger(__name__)


class RewriteTensorize(Postproc):
    """Tensorize each block annotated ``meta_schedule.auto_tensorize`` (TVM's postproc).

    Args:
        vectorize_init_loop: also vectorize the innermost loop of each init block
            ``RewriteReductionBlock`` split off an auto-tensorized block.

    Never rejects a schedule: a block whose inner loops no longer match the intrinsic
    (another postprocessor changed them) keeps its loops, as in TVM, and computes the
    same numbers without the intrinsic.
    """

    def __init__(self, vectorize_init_loop: bool = False) -> None:
        self.vectorize_init_loop = bool(vectorize_init_loop)

    def apply(self, sch: Schedule) -> bool:
        jobs = [
            (fname, name, intrin)
            for fname in list(sch.mod.functions)
            for name, intrin in _annotated_blocks(sch.mod[fname].body)
        ]
        for fname, name, intrin in jobs:
            block = sch.get_block(name, fname)
            sch.unannotate(block, AUTO_TENSORIZE_KEY)
            if not intrin:
                if self.vectorize_init_loop:
                    _vectorize_innermost(sch, block)
                continue
            _tensorize_innermost(sch, block, intrin)
        return True

    def __repr__(self) -> str:
        return f"RewriteTensorize(vectorize_init_loop={self.vectorize_init_loop})"


def _annotated_blocks(body: Stmt) -> list[tuple[str, str]]:
    """(name, intrinsic) of the blocks with the annotation, in program order."""
    out: list[tuple[str, str]] = []
    stack = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, Block) and AUTO_TENSORIZE_KEY in node.annotations:
            out.append((node.name_hint, str(node.annotations[AUTO_TENSORIZE_KEY])))
        stack.extend(reversed(child_stmts(node)))
    return out


def _tensorize_innermost(sch: Schedule, block: BlockRV, name: str) -> None:
    intrin = TensorIntrin.get(name, allow_missing=True)
    n = len(intrin_loops(intrin) or []) if intrin is not None else 0
    loops = sch.get_loops(block)
    if n == 0 or len(loops) < n:
        _LOG.warning("RewriteTensorize: %s has no loop nest to tensorize", name)
        return
    try:
        sch.tensorize(loops[-n], name)
    except ScheduleError as err:  # TVM: a warning, the block keeps its loops
        _LOG.warning("RewriteTensorize: tensorize %s failed: %s", name, err)


def _vectorize_innermost(sch: Schedule, block: BlockRV) -> None:
    loops = sch.get_loops(block)
    if not loops:
        return
    try:
        sch.vectorize(loops[-1])
    except ScheduleError as err:
        _LOG.warning("RewriteTensorize: cannot vectorize the init loop: %s", err)
