"""The analytic prior's estimate of one store (:func:`store_cycles`): vector work, the
register tile and its operand loads, L1 accesses, cache traffic and the parallel speed-up,
combined as the package docstring (:mod:`metaschedule.cost_model.prior`) says.
"""

from __future__ import annotations

import math

from ...codegen.plan import FunctionPlan
from ...feature_extractor.features.loop_nest import Store
from ...feature_extractor.features.ops import count_store
from ...tir.stmt import ForKind
from .access import (
    IndexForms,
    IndexMemo,
    buffer_stats,
    first_strides,
    flat_strides,
    padding_guards,
    renumbered,
)
from .cache import cache_traffic, region_set_conflicts, set_conflicts
from .loads import invariant_loads, shared_loads
from .machine import Machine
from .tiles import planned_row, planned_tile

__all__ = ["OPERAND_REGISTERS", "PARTIAL_OVERLAP", "store_cycles"]


# op kinds of ``count_store`` (layout.OP_NAMES): 7 float, 7 int, bool, select
_F_MAD, _F_ADD, _F_MUL, _F_DIV, _F_CMP, _F_MATH, _F_OTHER = range(7)


_BOOL, _SELECT = 14, 15


#: cycles (per lane-chunk) of one op of each float kind, then bool and select
_OP_CYCLES = {
    _F_MAD: 0.5,
    _F_ADD: 0.5,
    _F_MUL: 0.5,
    _F_DIV: 4.0,
    _F_CMP: 0.5,
    _F_MATH: 12.0,
    _F_OTHER: 2.0,
    _BOOL: 0.5,
    _SELECT: 0.5,
}


#: vector registers a register tile leaves to its operands (the shared loads and the
#: broadcast): the accumulators beyond the rest spill, each costing a reload and a
#: store per update. GCC spills only those, on AVX2 as on AVX-512 (read in the assembly
#: of a 28-accumulator conv2d tile on 16 registers: 11 kept, 17 updated through the
#: stack; of a 56-accumulator one on 32: 29 kept). The prior used to price a tile
#: beyond the register file as wholly spilled, 4 reloads and stores per update of every
#: accumulator (from a 49-vector tile of 16 lanes on 32 registers measured 9.6x slower
#: on a Zen 5); that ranked AVX2 tiles of 17-32 accumulators, the fastest measured on a
#: Zen 4 (prior_rank.py, -mcpu=haswell: c2d, tbg, dns, matmul-256, cbr), near the
#: bottom: mean rank correlation 0.67 then, 0.83 now (AVX-512 0.75 -> 0.77).
OPERAND_REGISTERS = 4


#: the times of a store's compute, L1 accesses and cache traffic overlap only in part:
#: the largest counts whole and this share of the others adds to it. With the largest
#: alone, the FMA bound of 16-lane vectors on a 256-bit datapath (one per cycle) hid
#: every memory term of sampled 1024^3 matmul schedules: those that ran 10 to 36 ms were
#: all estimated at that bound (rank correlation 0.27 over 138 measured ones).
PARTIAL_OVERLAP = 0.5


def store_cycles(
    st: Store,
    m: Machine,
    tiles: list[float] | None = None,
    versioned: bool = False,
    simplified: IndexMemo | None = None,
    plan: FunctionPlan | None = None,
) -> float:
    """Estimated cycles of one store; ``tiles`` (if given) gets the vectors of its
    register tile, when it has one. ``versioned``: the code generator gives the
    function's guarded accumulations an unguarded copy for the interior
    (:mod:`~metaschedule.codegen.c_versioning`), whose padding guards then cost nothing.
    ``simplified``: a memo of simplified indices to use and fill (:class:`~.access.IndexForms`).
    ``plan``: the code generator's plan of the loops the store is in (its register tiles
    and vectorized rows; None: neither)."""
    ext = st.extents
    n = len(ext)
    total = float(math.prod(ext))
    if total <= 0:
        return 0.0
    pos = {lp.var: j for j, lp in enumerate(st.loops)}
    ops, loads = count_store(st.store)
    form = IndexForms(st, pos, simplified)
    store_lin = [form(i) for i in st.store.indices]
    accesses = [(ld.buffer, [form(i) for i in ld.indices]) for ld in loads]
    is_update = any(ld.buffer is st.store.buffer for ld in loads)
    # where a serial row over the reduction, made vector code by the code generator
    # (c_vector.vectorize_outputs), runs: its loops are walked as emitted, the row innermost
    row_at = planned_row(st, plan) if is_update and plan is not None else -1
    store_flat = flat_strides(st.store.buffer, store_lin, n)
    flats = [flat_strides(b, lin, n) for b, lin in accesses]
    moving = [j for j in range(n) if ext[j] > 1]
    inner = moving[-1] if moving else -1

    # vector chunks per element of the innermost loop
    vec_loop = inner if inner >= 0 and st.loops[inner].kind is ForKind.VECTORIZED else -1
    strides = [abs(f[inner]) if inner >= 0 else 0.0 for f in flats]
    store_stride = abs(store_flat[inner]) if inner >= 0 else 0.0
    if vec_loop >= 0:
        v = ext[vec_loop]
        # chunks of the native width, then a tail of halving power-of-two widths (28
        # lanes of 16: 16, 8, 4), as the code generator writes them (c_vector)
        per_elem = (v // m.lanes + bin(v % m.lanes).count("1")) / v
        # a gathered operand costs a scalar load per lane; a scattered store: scalar body
        if store_stride not in (0.0, 1.0):
            per_elem = 1.0
    elif inner >= 0 and store_stride == 1.0 and all(s in (0.0, 1.0) for s in strides):
        per_elem = 2.0 / m.lanes  # the compiler's own vectorization, at best half as good
    else:
        per_elem = 1.0
    chunks = total * per_elem  # executions of the (vector) body

    if is_update and versioned:
        bools, selects = padding_guards(st.store.value)
        ops[_BOOL] -= bools
        ops[_SELECT] -= selects
    op_cycles = sum(_OP_CYCLES.get(k, 0.0) * c for k, c in enumerate(ops) if k < 7 or k >= 14)
    compute = chunks * max(op_cycles, 0.5)

    # the register tile of a reduction, as the code generator planned it (c_accumulate)
    store_loops = {j for j in moving if store_flat[j] != 0}
    tiled = None
    if is_update and plan is not None:
        tiled = planned_tile(st, plan, store_loops, vec_loop, per_elem)
    stats = buffer_stats(st, store_lin, accesses, m)
    if tiled is not None:
        start, tile, tile_per_elem = tiled
        if tile_per_elem != per_elem:
            # tile loops merged into the vector loop (MERGE_CONTIGUOUS): the region runs
            # the merged loop's chunks
            per_elem = tile_per_elem
            compute *= tile_per_elem / (chunks / total)
            chunks = total * per_elem
        tile_points = float(math.prod(ext[j] for j in tile))
        # a tile split to fit (SPLIT_LARGE_TILES): its outer loops run around the region
        split_out = [j for j in range(start, n) if j in store_loops and j not in tile]
        tile_vectors = tile_points * (per_elem if vec_loop in tile else 1.0)
        sweeps = total / tile_points
        if tiles is not None:
            tiles.append(tile_vectors)
        # operand loads per sweep: the distinct elements the tile's loops reach (the
        # updates of one step share them), a vector per lanes when contiguous
        only_tile = tuple(e if j in tile else 1 for j, e in enumerate(ext))
        tile_stats = buffer_stats(st, store_lin, accesses, m, only_tile)
        load_cycles = conflict_cycles = 0.0
        for s, lin in zip(tile_stats, first_strides(st, store_lin, accesses, tile_stats)):
            if s.buffer is st.store.buffer:
                continue
            contiguous = vec_loop >= 0 and lin is not None and abs(lin[vec_loop]) == 1.0
            distinct = s.footprint[0]
            load_cycles += (distinct * per_elem if contiguous else distinct) / m.loads_per_cycle
            if lin is not None:
                conflict_cycles += set_conflicts(s, lin, tile, ext, m)
        operand_loads = sweeps * load_cycles
        # one update of every accumulator per sweep, in chains of the sweeps of one entry
        # into the tile's region; the out-of-order window overlaps the chains of the
        # next entries when an entry's work is short (a 3x3 window: 9 sweeps)
        entries = float(math.prod(ext[:start])) * math.prod(ext[j] for j in split_out)
        shared = shared_loads(st, accesses, m, tiled, split_out, vec_loop, tile_vectors)
        straight = (0, 0.0)  # region loops written out step by step, values they keep
        if shared is not None:
            operand_loads = min(operand_loads, shared[0])
            straight = shared[1:]
        if not split_out:  # (a split tile's outer loops are C loops around its region)
            hoisted = invariant_loads(
                st,
                store_lin,
                accesses,
                m,
                tiled,
                vec_loop,
                per_elem,
                tile_vectors,
                straight,
                row_at,
            )
            operand_loads = max(0.0, operand_loads - hoisted)
        l1 = operand_loads + sweeps * conflict_cycles
        per_entry = sweeps / max(1.0, entries) * tile_vectors * 2.0  # FMAs and loads
        overlap = min(max(1.0, m.reorder_window / max(per_entry, 1.0)), max(1.0, entries))
        latency = sweeps * m.fma_latency / overlap
        compute = max(compute, latency, sweeps * tile_vectors / m.fma_ports)
        # registers the tile takes: a scalar tile along a contiguous innermost loop is
        # vectorized by the C compiler (per_elem below 1 there too)
        registers = tile_points * per_elem if inner in tile else tile_vectors
        # the accumulators beyond the registers the operands leave (all but
        # OPERAND_REGISTERS) spill: GCC keeps the others in registers and reloads (as
        # the FMA's memory operand) and stores each spilled one at every update
        spill = max(0.0, registers - (m.vector_registers - OPERAND_REGISTERS))
        l1 += sweeps * spill * (1.0 / m.loads_per_cycle + 1.0 / m.stores_per_cycle)
        # the tile is loaded before and stored after the region, once per entry into it
        l1 += entries * tile_vectors * (1.0 / m.loads_per_cycle + 1.0 / m.stores_per_cycle)
        region = [j for j in range(start, n) if ext[j] > 1 and j not in split_out]
        l1 += entries * region_set_conflicts(
            [(st.store.buffer, store_lin), *accesses], region, ext, m
        )
    else:
        l1 = 0.0
        for stride in strides:
            l1 += chunks / m.loads_per_cycle if stride in (0.0, 1.0) else total / m.loads_per_cycle
        l1 += chunks / m.stores_per_cycle
        if is_update and inner >= 0 and inner not in store_loops:
            # the innermost loop updates one element: a memory round trip per update
            compute = max(compute, chunks * m.memory_round_trip)

    resident = (st.store.buffer, tiled[0]) if tiled is not None else None
    split = (
        [j for j in range(tiled[0], n) if j in store_loops and j not in tiled[1]] if tiled else []
    )
    if split and tiled is not None:  # a split tile has a plan
        # a split tile's outer loops run around its region (c_accumulate emits them
        # outside the reduction loops): the caches see the loops in that order, and an
        # operand panel the region sweeps is swept again for each of their iterations
        start = tiled[0]
        order = [*range(start), *split, *(j for j in range(start, n) if j not in split)]
        new = {j: i for i, j in enumerate(order)}
        store_lin = [renumbered(f, new) for f in store_lin]
        accesses = [(b, [renumbered(f, new) for f in lin]) for b, lin in accesses]
        ext = tuple(ext[j] for j in order)
        stats = buffer_stats(st, store_lin, accesses, m, ext)
        resident = (st.store.buffer, new[start])
    traffic = cache_traffic(stats, ext, m, first_strides(st, store_lin, accesses, stats), resident)
    cycles = max(compute, l1, traffic)
    cycles += PARTIAL_OVERLAP * (compute + l1 + traffic - cycles)

    # parallel speed-up and fork/join cost
    par = [j for j, lp in enumerate(st.loops) if lp.kind is ForKind.PARALLEL]
    if par:
        jobs = float(math.prod(ext[j] for j in par))
        rounds = math.ceil(jobs / m.cores)
        speedup = jobs / rounds if rounds else 1.0
        entries = float(math.prod(ext[: par[0]]))
        return cycles / max(1.0, speedup) + entries * m.fork_join_cycles
    return cycles
