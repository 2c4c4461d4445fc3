"""Where the C code generator keeps a reduction's output in registers, as the analytic
prior re-derives it from the lowered nest (:mod:`~metaschedule.codegen.c_accumulate`):
the register tile of a store (:func:`find_register_tile`: reduction loops hoisted,
contiguous loops merged into the vector loop, small tiles jammed, large ones split), and a
serial row over a reduction made vector code (:func:`vectorized_row`,
:func:`~metaschedule.codegen.c_vector.vectorize_outputs`).
"""

from __future__ import annotations

import math
from dataclasses import replace

# the code generator's switches are read at each call, as CodegenOptions.applied() sets them
from ...codegen import c_accumulate, c_vector
from ...codegen.c_accumulate import TileLimits
from ...feature_extractor.features.linear import LinearForm
from ...feature_extractor.features.loop_nest import Store
from ...tir import expr as E
from ...tir.dtype import is_bool, nbytes
from ...tir.functor import Visitor
from ...tir.stmt import ForKind
from .access import affine_in, flat_strides, renumbered
from .machine import Machine

__all__ = ["find_register_tile", "vectorized_row"]


def find_register_tile(
    st: Store,
    store_lin: list[LinearForm],
    accesses: list,
    store_loops: set[int],
    vec_loop: int,
    per_elem: float,
    lanes: int,
    limits: TileLimits,
    perfect: int = 0,
) -> tuple[int, list[int], float] | None:
    """Where the code generator keeps the stored tile in accumulators
    (:func:`~metaschedule.codegen.c_accumulate.plan_accumulators`): ``(start, tile,
    per_elem)``, the loop its region starts at, the loops of the tile and the vector
    chunks per element of its vector loop (with the tile loops merged into it), or None.

    As the code generator, from the outermost loop in: a serial reduction loop (it does
    not move the stored element) that heads a perfect nest whose tile (the loops below it
    that move the element, the reduction loops among them hoisted into the region when
    :data:`~metaschedule.codegen.c_accumulate.HOIST_INNER_REDUCTIONS`) holds at most
    ``Machine.limits.max_accumulators`` vectors. A larger tile
    with no fitting one deeper is split
    (:data:`~metaschedule.codegen.c_accumulate.SPLIT_LARGE_TILES`): its outermost scalar
    tile loops leave the tile until it fits, if at least
    ``min_split_accumulators`` vectors stay.
    A tile loop heading such a nest jams the tile loops down to the region into a
    vector tile (:data:`~metaschedule.codegen.c_accumulate.JAM_SMALL_TILES`) when the
    first tile that fits below it has fewer than ``min_split_accumulators`` vectors and
    the jammed one at most ``jam_accumulators``.
    ``perfect``: the outermost loop from which the nest is perfect (:func:`~.access.perfect_from`).
    """
    found = _tile_candidates(
        st, store_lin, accesses, store_loops, vec_loop, per_elem, lanes, perfect
    )
    most, fewest = limits.max_accumulators, limits.min_split_accumulators
    for i, (start, tile, vectors, merged, tile_per_elem, jam) in enumerate(found):
        if not jam and vectors <= most:
            return start, tile, tile_per_elem
        # the first tile below that fits as it is (never a jam)
        deeper = next((c for c in found[i + 1 :] if not c[5] and c[2] <= most), None)
        if jam:
            if vectors <= limits.jam_accumulators and deeper and deeper[2] < fewest:
                return start, tile, tile_per_elem
            continue
        if not c_accumulate.SPLIT_LARGE_TILES or deeper is not None:
            continue
        scalar = [j for j in tile if j != vec_loop and j not in merged]
        while scalar and vectors > most:
            vectors /= st.extents[scalar.pop(0)]
        if fewest <= vectors <= most:
            kept = [j for j in tile if j in scalar or j in merged or j == vec_loop]
            return start, kept, tile_per_elem
        return None
    return None


def _tile_candidates(
    st: Store,
    store_lin: list[LinearForm],
    accesses: list,
    store_loops: set[int],
    vec_loop: int,
    per_elem: float,
    lanes: int,
    perfect: int = 0,
) -> list[tuple[int, list[int], float, list[int], float, bool]]:
    """Every loop that could head a register tile, outermost first: ``(start, tile,
    vectors, merged, per_elem, jam)``, with the tile loops merged into the vector loop,
    the vector chunks per element of the merged loop, and whether ``start`` is a tile
    loop jammed into the tile (see :func:`find_register_tile`)."""
    ext, loops = st.extents, st.loops
    n = len(ext)
    serial = (ForKind.SERIAL, ForKind.UNROLLED)
    found: list[tuple[int, list[int], float, list[int], float, bool]] = []
    for start in range(perfect, n):  # a perfect nest from start down
        jam = start in store_loops
        if ext[start] == 1 or loops[start].kind not in serial:
            continue
        if jam and not (
            c_accumulate.JAM_SMALL_TILES
            and c_accumulate.HOIST_INNER_REDUCTIONS
            and vec_loop > start
        ):
            continue
        below = [j for j in range(start, n) if ext[j] > 1]
        if any(
            loops[j].kind not in serial and not (j == vec_loop and j == below[-1]) for j in below
        ):
            continue
        tile = [j for j in below if j in store_loops]
        reductions = [j for j in below if j not in store_loops]
        if jam and not reductions:
            continue
        first_tile = tile[0] if tile else n
        if not c_accumulate.HOIST_INNER_REDUCTIONS and any(j > first_tile for j in reductions):
            continue
        if not all(affine_in(store_lin, j) for j in tile):
            continue
        merged: list[int] = []
        tile_per_elem = per_elem
        if vec_loop in tile and per_elem < 1.0:
            merged = _merged_loops(st, [store_lin, *(lin for _, lin in accesses)], tile, vec_loop)
        if merged:
            extent = ext[vec_loop] * math.prod(ext[j] for j in merged)
            tile_per_elem = (extent // lanes + bin(extent % lanes).count("1")) / extent
        vectors = math.prod(ext[j] for j in tile) * (tile_per_elem if vec_loop in tile else 1.0)
        found.append((start, tile, vectors, merged, tile_per_elem, jam))
    return found


def _merged_loops(st: Store, lins: list[list[LinearForm]], tile: list[int], vec: int) -> list[int]:
    """The tile loops the code generator merges into the vector loop ``vec``
    (:func:`~metaschedule.codegen.c_accumulate.merge_contiguous`, with
    :data:`~metaschedule.codegen.c_accumulate.MERGE_CONTIGUOUS`): outermost first, a loop
    ``L`` whose every index moves by the merged loop's extent times what ``vec`` moves
    it (its points lie side by side along ``vec``), while neither appears outside the
    indices of the store's loads."""
    if not c_accumulate.MERGE_CONTIGUOUS or not all(affine_in(lin, vec) for lin in lins):
        return []
    ext = st.extents
    merged: list[int] = []
    extent = ext[vec]
    loose = _vars_outside_loads(st.store.value)
    if st.loops[vec].var in loose:
        return []
    rest = [j for j in tile if j != vec and ext[j] > 1 and st.loops[j].var not in loose]
    while True:
        for j in rest:
            if all(form.coef(j) == extent * form.coef(vec) for lin in lins for form in lin) and all(
                affine_in(lin, j) for lin in lins
            ):
                merged.append(j)
                extent *= ext[j]
                rest.remove(j)
                break
        else:
            return merged


def _vars_outside_loads(e: E.PrimExpr) -> set[E.Var]:
    """The variables of ``e`` outside the indices of its buffer loads."""
    found = _LooseVars()
    found.visit(e)
    return found.vars


class _LooseVars(Visitor):
    def __init__(self) -> None:
        self.vars: set[E.Var] = set()

    def visit_Var(self, node: E.Var) -> None:
        self.vars.add(node)

    def visit_BufferLoad(self, node: E.BufferLoad) -> None:
        pass  # its indices are checked as linear forms


def vectorized_row(
    st: Store, store_lin: list[LinearForm], accesses: list, perfect: int, m: Machine
) -> tuple[Store, list[LinearForm], list, int] | None:
    """The store as the code generator runs it when it makes a serial row over a
    reduction vector code (:func:`~metaschedule.codegen.c_vector.vectorize_outputs`,
    with :data:`~metaschedule.codegen.c_vector.VECTORIZE_OUTPUTS`): ``(store, store
    index forms, accesses, perfect)`` with the row's loop moved innermost and vectorized,
    or None when the code generator leaves the nest as it is.

    As the code generator: the row is the innermost serial loop moving the stored
    element (at least :data:`~metaschedule.codegen.c_vector.MIN_OUTPUT_LANES`
    iterations, one element per step), above a perfect nest of serial or unrolled loops
    of constant extents that holds a reduction and ends in the store; every load moves
    by 0 or 1 element per step of the row, the stored buffer is read at the stored
    element only, and the row fits ``Machine.limits.max_accumulators``
    vectors. The code generator tries a register tile first, from the outermost loop in:
    a tile starting above the row (:func:`find_register_tile`) keeps the nest as it is. The
    tile of the new nest is the row's vectors across the loops that were below it."""
    if not c_vector.VECTORIZE_OUTPUTS:
        return None
    loops, ext = st.loops, st.extents
    n = len(loops)
    buf = st.store.buffer
    store_flat = flat_strides(buf, store_lin, n)
    r = n - 1
    while r >= 0 and not (ext[r] > 1 and store_flat[r] != 0):
        r -= 1
    if r < perfect or r == n - 1 or loops[r].kind is not ForKind.SERIAL:
        return None
    if ext[r] < c_vector.MIN_OUTPUT_LANES or is_bool(buf.dtype):
        return None
    lanes = m.lanes * 4 // max(1, nbytes(buf.dtype))  # m.lanes: float32 lanes
    row = ext[r] // lanes + bin(ext[r] % lanes).count("1")
    if lanes < 2 or row > m.limits.max_accumulators:
        return None
    serial = (ForKind.SERIAL, ForKind.UNROLLED)
    for lp in loops[r:]:
        node = lp.node
        if type(node.min) is not E.IntImm or type(node.extent) is not E.IntImm:
            return None
    if any(lp.kind not in serial for lp in loops[r + 1 :]) or all(e == 1 for e in ext[r + 1 :]):
        return None  # not serial, or no reduction below the row
    if loops[-1].node.body is not st.store or store_flat[r] != 1 or not affine_in(store_lin, r):
        return None
    for b, lin in accesses:
        if b is buf:
            if lin != store_lin:
                return None  # another element of the stored buffer is read
        elif not affine_in(lin, r) or flat_strides(b, lin, n)[r] not in (0.0, 1.0):
            return None
    store_loops = {j for j in range(n) if ext[j] > 1 and store_flat[j] != 0}
    outer = find_register_tile(
        st, store_lin, accesses, store_loops, -1, 1.0, m.lanes, m.limits, perfect
    )
    if outer is not None and outer[0] < r:
        return None  # a register tile from a loop above the row
    order = [*range(r), *range(r + 1, n), r]
    new = {j: i for i, j in enumerate(order)}
    rows = replace(loops[r], kind=ForKind.VECTORIZED)
    moved = Store(
        st.store,
        tuple(rows if j == r else loops[j] for j in order),
        tuple(ext[j] for j in order),
        st.allocs,
    )
    return (
        moved,
        [renumbered(f, new) for f in store_lin],
        [(b, [renumbered(f, new) for f in lin]) for b, lin in accesses],
        r,  # the loops below the row nest perfectly, and the row in them
    )
