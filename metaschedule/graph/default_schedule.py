"""The schedule a function gets when the database has none: inline, parallel, vectorize.

1. Inline every spatial block that is not an output into its consumers (padding,
   biases, activations before the last one), then try inlining the remaining spatial
   epilogues into their producers.
2. In a reduction block, move the innermost spatial loop inside the reduction loops
   when its accesses are contiguous along it (``i, j, k`` -> ``i, j0, k, j1`` for a
   matmul), splitting it to at most ``2 * vector lanes``.
3. Annotate the root with parallel/vectorize limits and let the
   ``RewriteParallelVectorizeUnroll`` postprocessor fuse and parallelise the outer spatial
   loops and vectorize the inner ones, as tuned schedules do.

Every step is a schedule primitive, so the result has a trace like a tuned schedule.
"""

from __future__ import annotations

from ..postproc.rewrite_parallel_vectorize_unroll import (
    PARALLEL, UNROLL_EXPLICIT, VECTORIZE, RewriteParallelVectorizeUnroll,
)
from ..schedule import Schedule, ScheduleError
from ..schedule_rule.analysis import realize_of
from ..target import Target
from ..tir import IterType
from ..tir.expr import Var
from ..tir.functor import collect_vars
from ..tir.function import PrimFunc


def _divisor_at_most(n: int, limit: int) -> int:
    for d in range(min(n, limit), 0, -1):
        if n % d == 0:
            return d
    return 1


def _only_last_index(var: Var, regions) -> bool:
    """``var`` appears in no index but the last of every region (and in some region)."""
    seen = False
    for r in regions:
        for d, rng in enumerate(r.region):
            if var in collect_vars(rng.min):
                if d != len(r.region) - 1:
                    return False
                seen = True
    return seen


def _inline(sch: Schedule, root) -> None:
    for block in reversed(sch.get_child_blocks(root)):
        try:
            sch.compute_inline(block)
        except ScheduleError:
            pass
    for block in sch.get_child_blocks(root):
        try:
            sch.reverse_compute_inline(block)
        except ScheduleError:
            pass


def _reorder_reduction(sch: Schedule, block, lanes: int) -> None:
    _, realize = realize_of(sch, block)
    blk = realize.block
    if all(iv.iter_type == IterType.DATA_PAR for iv in blk.iter_vars):
        return
    loops = sch.get_loops(block)
    kinds = []
    for lp, iv, val in zip(loops, blk.iter_vars, realize.iter_values):
        loop = sch.get(lp)
        if not isinstance(val, Var) or val is not loop.loop_var:
            return  # not the plain loop nest create_prim_func makes
        kinds.append(iv.iter_type)
    if len(kinds) != len(loops) or kinds[-1] == IterType.DATA_PAR:
        return
    spatial = [i for i, k in enumerate(kinds) if k == IterType.DATA_PAR]
    if not spatial or any(k != IterType.DATA_PAR for k in kinds[:spatial[-1]]):
        return
    last = spatial[-1]
    v = blk.iter_vars[last].var
    if not _only_last_index(v, blk.writes) or not all(
            _only_last_index(v, [r]) for r in blk.reads if v in
            {x for rng in r.region for x in collect_vars(rng.min)}):
        return
    extent = int(sch.get(loops[last]).extent.value)
    factor = _divisor_at_most(extent, 2 * lanes)
    reduce_loops = loops[last + 1:]
    if factor < extent:
        outer, inner = sch.split(loops[last], [None, factor])
        sch.reorder(outer, *reduce_loops, inner)
    else:
        sch.reorder(*reduce_loops, loops[last])


def default_schedule(func: PrimFunc, target: Target | str = "cpu") -> Schedule:
    """A parallel, vectorized schedule of ``func`` without search (see the module doc)."""
    target = target if isinstance(target, Target) else Target(target)
    sch = Schedule(func)
    root = sch.get_block("root")
    _inline(sch, root)
    lanes = target.vector_lanes("float32")
    for block in sch.get_child_blocks(root):
        try:
            _reorder_reduction(sch, block, lanes)
        except ScheduleError:
            pass
    cores = int(target.attrs.get("num_cores") or target.num_cores or 1)
    sch.annotate(root, PARALLEL, cores * 16)
    sch.annotate(root, VECTORIZE, 2 * lanes)
    sch.annotate(root, UNROLL_EXPLICIT, 16)
    sch.enter_postproc()
    RewriteParallelVectorizeUnroll().apply(sch)
    return sch
