"""``AddRFactor``: parallelise a reduction with too little spatial work via rfactor."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from ..schedule import ScheduleError
from ..tir import For, IntImm, IterType
from .analysis import (
    TILING_STRUCTURE_KEY,
    cumulative_lengths,
    fork,
    is_reduction,
    is_trivial_binding,
    loop_kinds,
    needs_multi_level_tiling,
    num_cores_of,
    realize_of,
)
from .base import ScheduleRule
from .random_compute_location import RANDOM_COMPUTE_PRODUCER_KEY

if TYPE_CHECKING:
    from ..schedule import BlockRV, LoopRV, Schedule

__all__ = ["AddRFactor", "needs_rfactor_or_cross_thread_reduction"]


class AddRFactor(ScheduleRule):
    """Factor a reduction so that its partial results can be computed in parallel (as
    TVM's AddRFactor).

    A reduction block with trivially bound, perfectly nested loops qualifies when it has
    little spatial parallelism: for a block MultiLevelTiling would tile, when the spatial
    loops are shorter than the reduction and at most ``num_cores * max_jobs_per_core``;
    for any other reduction, when the reduction is longer than ``num_cores``. The rule
    moves the reduction loops innermost, fuses them, splits the fused loop in two
    (``sample_perfect_tile``), and returns one design space per split loop with
    ``rfactor`` applied to it (the write-back block annotated
    ``meta_schedule.random_compute_producer`` so RandomComputeLocation places the rfactor
    block), plus the unfactored schedule.

    Args:
        max_jobs_per_core: parallel jobs per core; with the target's core count it bounds
            the parallelism considered enough (-1: no bound).
        max_innermost_factor: the largest inner factor of the split (None: no limit).
    """

    def __init__(self, max_jobs_per_core: int = 16, max_innermost_factor: int | None = None):
        if (
            isinstance(max_jobs_per_core, bool)
            or not isinstance(max_jobs_per_core, int)
            or (max_jobs_per_core < 1 and max_jobs_per_core != -1)
        ):
            raise ValueError(
                f"max_jobs_per_core must be a positive int or -1, got {max_jobs_per_core!r}"
            )
        if max_innermost_factor is not None and int(max_innermost_factor) < 1:
            raise ValueError(
                f"max_innermost_factor must be None or >= 1, got {max_innermost_factor!r}"
            )
        self.max_jobs_per_core = max_jobs_per_core
        self.max_innermost_factor = (
            None if max_innermost_factor is None else int(max_innermost_factor)
        )
        self.max_parallel_basic: int | None = None
        self.max_parallel_extent: int | None = None

    def _initialize_with_tune_context(self, context: Any) -> None:
        cores = num_cores_of(context)
        if cores is not None:
            self.max_parallel_basic = cores
            self.max_parallel_extent = (
                -1 if self.max_jobs_per_core == -1 else cores * self.max_jobs_per_core
            )

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if self.max_parallel_basic is None:
            raise ValueError(
                "AddRFactor needs the target's core count: initialise it with a TuneContext "
                "that has a target (PostOrderApply does this)"
            )
        if not self._needs_rfactor(sch, block):
            return [sch]
        original = fork(sch)
        fused, num_spatial = self._reorder_and_fuse(sch, block)
        extent = sch.get(fused).extent
        limit = self.max_innermost_factor or (extent.value if isinstance(extent, IntImm) else 1)
        factors = sch.sample_perfect_tile(fused, n=2, max_innermost_factor=limit)
        splits = sch.split(fused, factors)
        out = []
        for loop in splits:
            new = fork(sch)
            try:
                new.rfactor(loop, num_spatial)
            except ScheduleError:
                continue
            new.annotate(block, RANDOM_COMPUTE_PRODUCER_KEY, 1)
            out.append(new)
        out.append(original)
        return out

    def _needs_rfactor(self, sch: Schedule, block: BlockRV) -> bool:
        assert self.max_parallel_extent is not None and self.max_parallel_basic is not None
        return needs_rfactor_or_cross_thread_reduction(
            sch, block, self.max_parallel_extent, self.max_parallel_basic
        )

    @staticmethod
    def _reorder_and_fuse(sch: Schedule, block: BlockRV) -> tuple[LoopRV, int]:
        """Move the reduction loops innermost and fuse them; returns the fused loop and the
        number of spatial loops."""
        fname, _realize = realize_of(sch, block)
        loops = sch.get_loops(block)
        nodes: list[For] = [sch.get(lp) for lp in loops]
        kinds = loop_kinds(sch, fname, nodes)
        spatial = [lp for lp, k in zip(loops, kinds) if k == IterType.DATA_PAR]
        reduction = [lp for lp, k in zip(loops, kinds) if k == IterType.COMM_REDUCE]
        order = spatial + reduction
        if any(a is not b for a, b in zip(order, loops)):
            sch.reorder(*order)
        fused = sch.fuse(*reduction) if len(reduction) > 1 else reduction[0]
        return fused, len(spatial)

    def __repr__(self) -> str:
        return (
            f"AddRFactor(max_jobs_per_core={self.max_jobs_per_core}, "
            f"max_innermost_factor={self.max_innermost_factor})"
        )


def needs_rfactor_or_cross_thread_reduction(
    sch: Schedule, block: BlockRV, max_parallel_extent: int, max_parallel_basic: int
) -> bool:
    """TVM's NeedsRFactorOrCrossThreadReduction: a trivially bound reduction in a perfect
    nest of spatial and reduction loops, whose reduction is long enough to split (more
    than ``max_parallel_basic``), unless multi-level tiling has enough spatial parallelism
    (spatial >= reduction, or above ``max_parallel_extent``; -1: no limit)."""
    fname, realize = realize_of(sch, block)
    b = realize.block
    if not b.writes or sch.state.scope_realize(fname, realize) is None:
        return False
    if not is_reduction(sch, fname, realize) or not is_trivial_binding(sch, fname, realize):
        return False
    if TILING_STRUCTURE_KEY in b.annotations:
        return False
    loops = sch.state.loops_above(fname, realize)
    kinds = loop_kinds(sch, fname, loops)
    if any(k not in (IterType.DATA_PAR, IterType.COMM_REDUCE) for k in kinds):
        return False
    if IterType.COMM_REDUCE not in kinds:
        return False
    for outer, inner in itertools.pairwise(loops):  # a perfect nest down to the block
        if outer.body is not inner:
            return False
    if not loops or loops[-1].body is not realize:
        return False
    space, reduce = cumulative_lengths(sch, fname, realize)
    if space == -1 or reduce == -1:
        return False
    if needs_multi_level_tiling(sch, fname, realize):
        # enough spatial parallelism already: tile instead
        too_much = max_parallel_extent != -1 and space > max_parallel_extent
        return not (space >= reduce or too_much)
    return reduce > 1 and reduce > max_parallel_basic
