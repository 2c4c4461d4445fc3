"""Where a block may be computed: the locations ``sample_compute_location`` draws from
and ``MutateComputeLocation`` moves between (-2 inline, -1 root, i >= 0 a loop)."""

from __future__ import annotations

from ...tir import BlockRealize, For
from ..analysis import (
    consumers,
    data_par_loops,
    lowest_common_ancestor,
    scope_blocks,
)
from ..state import ScheduleState
from .compute_at_plan import can_compute_at
from .compute_inline import can_compute_inline

__all__ = ["closest_compute_location", "compute_location_candidates"]


def _candidate_loops(state: ScheduleState, fname: str, realize: BlockRealize) -> list[For]:
    """The loops (outermost first) above the block's first consumer that may hold it: as
    in TVM, down to the lowest common ancestor of the consumers and no deeper than the
    last data-parallel one. Whether compute_at is legal there is not checked."""
    blocks = scope_blocks(state, fname, realize)
    cons = consumers(blocks, realize)
    if not cons:
        return []
    lca = lowest_common_ancestor(state, fname, cons)
    if not isinstance(lca, For):
        return []
    loops = state.loops_above(fname, cons[0])
    depth = next((i for i, lp in enumerate(loops) if lp is lca), None)
    if depth is None:
        return []
    chain = loops[: depth + 1]
    spatial = data_par_loops(chain)
    out = []
    for lp, ok in zip(chain, spatial):
        if not ok:
            break
        out.append(lp)
    return out


def compute_location_candidates(
    state: ScheduleState, fname: str, realize: BlockRealize
) -> list[tuple[int, For | None]]:
    """Legal locations as ``(decision, loop)``: -2 inline, -1 root, i >= 0 the i-th loop
    (outermost first) above the block's first consumer where compute_at is legal.

    As in TVM, only loops down to the lowest common ancestor of the consumers and no
    deeper than the last data-parallel one are considered.
    """
    out: list[tuple[int, For | None]] = []
    if can_compute_inline(state, fname, realize):
        out.append((-2, None))
    out.append((-1, None))
    for i, lp in enumerate(_candidate_loops(state, fname, realize)):
        if can_compute_at(state, fname, realize, lp):
            out.append((i, lp))
    return out


def closest_compute_location(
    state: ScheduleState, fname: str, realize: BlockRealize, decision: int
) -> tuple[int, For | None] | None:
    """The legal location with the largest decision <= ``decision`` (None if there is
    none): what :func:`compute_location_candidates` would give, checking only as many
    candidates as needed (a replayed decision is usually legal as it is)."""
    if decision >= 0:
        loops = _candidate_loops(state, fname, realize)
        for i in range(min(decision, len(loops) - 1), -1, -1):
            if can_compute_at(state, fname, realize, loops[i]):
                return i, loops[i]
    if decision >= -1:
        return -1, None
    if decision == -2 and can_compute_inline(state, fname, realize):
        return -2, None
    return None
