"""``RewriteParallelVectorizeUnroll``: turn the root block's ``meta_schedule.*`` hints into
parallel, vectorized and auto-unrolled loops.

The ``ParallelVectorizeUnroll`` schedule rule only *annotates* the root block of a
function; the loop structure is not final until the other rules and the sampled
decisions are applied. This postprocessor reads the hints off the root and rewrites
every block directly under it (TVM's semantics, with the differences noted on the
class)::

    # root: meta_schedule.parallel=16, meta_schedule.vectorize=16,
    #       meta_schedule.unroll_explicit=16
    for i0, j0, i1, j1, k, j2 in T.grid(8, 2, 4, 2, 32, 8):
        C[...] += A[...] * B[...]
  ->
    for i0_j0_fused in T.parallel(16, pragma_auto_unroll_max_step=16, pragma_unroll_explicit=1):
        for i1, j1, k in T.grid(4, 2, 32):
            for j2 in T.vectorized(8):
                C[...] += A[...] * B[...]

and removes the hints, so each schedule it returns is a concrete program.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..schedule import ScheduleError
from ..schedule.analysis import data_par_loops
from ..tir import BlockRealize, BufferRegion, For, ForKind, IntImm, IterType, SeqStmt
from ..tir.expr import PrimExpr, Var, const, is_const_int
from ..tir.functor import collect_vars, substitute
from ..tir.transform.affine import Affine, affine
from .base import Postproc

if TYPE_CHECKING:
    from ..schedule import BlockRV, LoopRV, Schedule

__all__ = ["RewriteParallelVectorizeUnroll"]

PARALLEL = "meta_schedule.parallel"
VECTORIZE = "meta_schedule.vectorize"
UNROLL_EXPLICIT = "meta_schedule.unroll_explicit"
UNROLL_IMPLICIT = "meta_schedule.unroll_implicit"
_KEYS = (PARALLEL, VECTORIZE, UNROLL_EXPLICIT, UNROLL_IMPLICIT)


@dataclass(frozen=True)
class Plan:
    """The hints of a root block, and per child block how many loops each rewrite takes.

    ``None`` means the hint is absent; a loop count of 0 means nothing to rewrite.
    """

    max_parallel_extent: int | None = None
    max_vectorize_extent: int | None = None
    unroll_explicit: int | None = None
    unroll_implicit: int | None = None
    num_parallel_loops: int = 0
    num_vectorize_loops: int = 0


class RewriteParallelVectorizeUnroll(Postproc):
    """Apply the parallel/vectorize/unroll hints of each function's root block.

    For each block directly under an annotated root block:

    * ``meta_schedule.parallel = P``: fuse the outermost serial data-parallel loops
      until their extents multiply to at least ``P`` (or a loop with several children
      or a non-constant extent ends the run) and make the fused loop ``parallel``;
    * ``meta_schedule.vectorize = V``: fuse the innermost serial data-parallel loops
      whose extents multiply to at most ``V`` and whose accesses stay contiguous when
      fused, and ``vectorize`` the fused loop. When every loop of the block qualifies
      for both, they are fused into one loop, split by ``V`` (at most the fused
      extent), the outer part parallelised and the inner vectorized. Vectorizing is
      preferred where the two would take the same loop;
    * ``meta_schedule.unroll_explicit = S`` / ``unroll_implicit = S``: annotate the
      block's outermost loop with ``pragma_auto_unroll_max_step = S`` and
      ``pragma_unroll_explicit = 1`` / ``0``; as TVM, not for ``S = 0`` and not for a
      block whose iter vars are all data-parallel (nothing to gain from unrolling it).

    Then the hints are removed from the root. Every step is a recorded schedule
    primitive, so the trace replays. Returns False if a ``fuse`` or ``split`` is
    rejected (the planning only picks loops they accept, so this is not expected).

    Raises:
        ValueError, TypeError: malformed hints (not an int; both unroll keys), before
            anything changes: a schedule rule wrote them wrong.

    Differences from TVM, on purpose: the parallel run stops at the first product
    that reaches ``P`` (TVM goes on while the product equals ``P``), which is the
    plan :class:`~metaschedule.mutator.MutateParallel` enumerates; the split factor of
    the fused parallel-and-vectorized loop is at most its extent (no predicated tail
    beyond the data), and a parallel loop of extent 1 is left serial. Where our
    ``parallel``/``vectorize`` primitive rejects a loop that TVM's loop analysis would
    accept (a dependence between iterations through a buffer), the loop is left as
    it is and the schedule kept: it computes the same numbers, only slower.
    """

    def apply(self, sch: Schedule) -> bool:
        for fname, func in list(sch.mod.items()):
            body = func.body
            if not isinstance(body, BlockRealize):
                continue
            plan = _parse(body.block.annotations)
            if plan is None:
                continue
            root = sch.get_block(body.block.name_hint, fname)
            for key in _KEYS:
                if key in body.block.annotations:
                    sch.unannotate(root, key)
            try:
                for block in sch.get_child_blocks(root):
                    _rewrite_block(sch, block, plan)
            except ScheduleError:  # a fuse or split the planning did not foresee
                return False
        return True


# ----------------------------------------------------------------------------- parsing


def _int_value(key: str, value: Any) -> int:
    if isinstance(value, IntImm):
        value = value.value
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"RewriteParallelVectorizeUnroll: annotation {key!r} must be an int, got {value!r}"
        )
    return value


def _parse(annotations: dict[str, Any]) -> Plan | None:
    """The hints of a root block, or None when it has none."""
    if not any(k in annotations for k in _KEYS):
        return None
    values = {k: _int_value(k, annotations[k]) for k in _KEYS if k in annotations}
    if UNROLL_EXPLICIT in values and UNROLL_IMPLICIT in values:
        raise ValueError(
            f"RewriteParallelVectorizeUnroll: a root block has both {UNROLL_EXPLICIT!r} and "
            f"{UNROLL_IMPLICIT!r}; expected at most one"
        )
    return Plan(
        max_parallel_extent=values.get(PARALLEL),
        max_vectorize_extent=values.get(VECTORIZE),
        unroll_explicit=values.get(UNROLL_EXPLICIT),
        unroll_implicit=values.get(UNROLL_IMPLICIT),
    )


# ----------------------------------------------------------------------------- planning


def _rewritable(loop: For) -> bool:
    """A serial, unannotated loop from 0 with a constant extent (one fuse/parallel can take)."""
    return (
        loop.kind is ForKind.SERIAL
        and not loop.annotations
        and isinstance(loop.extent, IntImm)
        and isinstance(loop.min, IntImm)
        and loop.min.value == 0
    )


def _single_child(loop: For) -> bool:
    return not (isinstance(loop.body, SeqStmt) and len(loop.body.seq) > 1)


def _flat_offset(mins: tuple[PrimExpr, ...], shape: tuple[PrimExpr, ...]) -> PrimExpr | None:
    """The row-major element offset of an access at ``mins``; None if a stride is symbolic."""
    offset: PrimExpr = const(0, "int32")
    stride = 1
    for d in range(len(shape) - 1, -1, -1):
        idx = mins[d]
        offset = offset + (idx if stride == 1 else idx * const(stride, idx.dtype))
        if d > 0:
            if not isinstance(shape[d], IntImm):
                return None
            stride *= shape[d].value
    return offset


def _composed_offset(
    access: BufferRegion, bindings: dict[Var, PrimExpr], bound: dict[Var, Affine]
) -> Affine | None:
    """The affine form of the row-major offset of ``access`` at its minimum with the block's
    ``bindings`` substituted (what ``affine`` makes of :func:`_flat_offset` of the
    substituted minimums), composed from the forms of the bindings (remembered in
    ``bound``); None when a minimum is not a sum of variables or a stride is symbolic."""
    shape = access.buffer.shape
    out = Affine.constant(0)
    stride = 1
    for d in range(len(shape) - 1, -1, -1):
        form = affine(access.region[d].min)
        if any(type(atom) is not Var for _, atom in form.terms.values()):
            return None
        part = Affine.constant(form.const)
        for coef, var in form.terms.values():
            value = bindings.get(var)
            if value is None:
                part = part + affine(var).scale(coef)
                continue
            hit = bound.get(var)
            if hit is None:
                hit = bound[var] = affine(value)
            part = part + hit.scale(coef)
        out = out + part.scale(stride)
        if d > 0:
            if not isinstance(shape[d], IntImm):
                return None
            stride *= shape[d].value
    return out


def _contiguous_inner_loops(realize: BlockRealize, loops: list[For]) -> int:
    """How many innermost loops can be fused into one loop with contiguous accesses.

    For each access of the block, each loop's stride is its coefficient in the
    flattened offset (None where it enters non-linearly). Going outwards, unused loops
    (stride 0) and unit loops are free; the first used loop may have any stride only if it is the
    innermost one, else it needs stride 1; each further used loop needs the stride of
    the previous used loop times that loop's extent (TVM's rule).
    """
    block = realize.block
    bindings = {iv.var: v for iv, v in zip(block.iter_vars, realize.iter_values)}
    bound: dict[Var, Affine] = {}  # the forms of the bindings, each made once
    best = len(loops)
    for access in (*block.reads, *block.writes):
        form = _composed_offset(access, bindings, bound)
        if form is None:
            mins = tuple(substitute(r.min, bindings) for r in access.region)
            offset = _flat_offset(mins, access.buffer.shape)
            if offset is None:
                return 0
            form = affine(offset)
        # variables inside non-linear atoms (f // 8, A[i], ...) have no stride
        nonlinear = set().union(
            *(collect_vars(atom) for _, atom in form.terms.values() if not isinstance(atom, Var))
        )
        strides = [None if lp.loop_var in nonlinear else form.coef(lp.loop_var) for lp in loops]
        fusible, prev = 0, None
        for i in range(len(loops) - 1, -1, -1):
            s = strides[i]
            if s == 0 or is_const_int(loops[i].extent, 1):  # a unit loop moves nothing
                fusible += 1
            elif prev is None:
                if s != 1 and fusible != 0:
                    break
                fusible += 1
                prev = i
            else:
                want = strides[prev]
                if s is None or want is None or s != want * loops[prev].extent.value:
                    break
                fusible += 1
                prev = i
        best = min(best, fusible)
    return best


def plan_block(sch: Schedule, fname: str, realize: BlockRealize, plan: Plan) -> Plan:
    """How many outer loops to parallelise and inner loops to vectorize for one block."""
    if plan.max_parallel_extent is None and plan.max_vectorize_extent is None:
        return plan
    loops = sch.state.loops_above(fname, realize)
    n = len(loops)
    if n == 0:
        return plan
    spatial = data_par_loops(loops)
    n_rewritable = sum(
        1 for lp, sp in zip(loops, spatial) if sp and _rewritable(lp) and _single_child(lp)
    )
    num_par = num_vec = -1
    if plan.max_parallel_extent is not None:
        num_par, prod = 0, 1
        for i, (lp, sp) in enumerate(zip(loops, spatial)):
            if not sp or not _rewritable(lp):
                break
            num_par, prod = i + 1, prod * lp.extent.value
            if prod >= plan.max_parallel_extent or not _single_child(lp):
                break
        if prod == 1:
            num_par = -1
    max_fusible = _contiguous_inner_loops(realize, loops) if plan.max_vectorize_extent else 0
    if plan.max_vectorize_extent is not None:
        num_vec, prod = 0, 1
        for i, (lp, sp) in enumerate(zip(reversed(loops), reversed(spatial))):
            if i >= max_fusible or not sp or not _rewritable(lp) or not _single_child(lp):
                break
            prod *= lp.extent.value
            if prod > plan.max_vectorize_extent:
                break
            num_vec = i + 1
        if prod == 1:
            num_vec = -1
    if num_par != -1 and num_vec != -1:
        if n_rewritable == n and max_fusible == n:
            num_par = num_vec = n  # fuse everything, split, parallel outside, vector inside
        else:
            num_par = min(num_par, n - num_vec)
    return replace(plan, num_parallel_loops=max(num_par, 0), num_vectorize_loops=max(num_vec, 0))


# ----------------------------------------------------------------------------- rewriting


def _rewrite_block(sch: Schedule, block: BlockRV, root_plan: Plan) -> None:
    loops = sch.get_loops(block)
    if not loops:
        return
    fname, realize = sch._block(block)
    plan = plan_block(sch, fname, realize, root_plan)
    n = len(loops)
    if plan.num_parallel_loops == n and plan.num_vectorize_loops == n:
        loops = _fuse_split_parallel_vectorize(sch, loops, plan.max_vectorize_extent or 1)
    else:
        if plan.num_parallel_loops > 0:
            loops = _parallel(sch, loops, plan.num_parallel_loops)
        if plan.num_vectorize_loops > 0:
            loops = _vectorize(sch, loops, plan.num_vectorize_loops)
    if any(iv.iter_type is not IterType.DATA_PAR for iv in realize.block.iter_vars):
        _unroll(sch, root_plan, loops[0])  # as TVM: pure spatial blocks are not unrolled


def _fuse(sch: Schedule, loops: list[LoopRV]) -> LoopRV:
    return loops[0] if len(loops) == 1 else sch.fuse(*loops)


def _try(sch: Schedule, primitive, loop: LoopRV) -> None:
    """Apply ``parallel``/``vectorize``; a rejection leaves the loop serial (see the class)."""
    try:
        primitive(loop)
    except ScheduleError:
        pass


def _extent(sch: Schedule, loop: LoopRV) -> int:
    return sch.get(loop).extent.value


def _fuse_split_parallel_vectorize(
    sch: Schedule, loops: list[LoopRV], vector_len: int
) -> list[LoopRV]:
    fused = _fuse(sch, loops)
    total = _extent(sch, fused)
    outer, inner = sch.split(fused, [None, min(vector_len, total)])
    if _extent(sch, outer) > 1:
        _try(sch, sch.parallel, outer)
    _try(sch, sch.vectorize, inner)
    return [outer] * (len(loops) - 1) + [inner]


def _parallel(sch: Schedule, loops: list[LoopRV], n: int) -> list[LoopRV]:
    fused = _fuse(sch, loops[:n])
    if _extent(sch, fused) > 1:
        _try(sch, sch.parallel, fused)
    return [fused] * n + loops[n:]


def _vectorize(sch: Schedule, loops: list[LoopRV], n: int) -> list[LoopRV]:
    fused = _fuse(sch, loops[-n:])
    _try(sch, sch.vectorize, fused)
    return loops[:-n] + [fused] * n


def _unroll(sch: Schedule, plan: Plan, loop: LoopRV) -> None:
    explicit = plan.unroll_explicit is not None
    max_step = plan.unroll_explicit if explicit else plan.unroll_implicit
    if max_step is None or max_step <= 0:
        return
    sch.annotate(loop, "pragma_auto_unroll_max_step", int(max_step))
    sch.annotate(loop, "pragma_unroll_explicit", int(explicit))
