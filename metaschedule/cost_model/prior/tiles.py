"""Where the C code generator keeps a reduction's output in registers, read from its plan
(:mod:`metaschedule.codegen.plan`): the register tile of a store (:func:`planned_tile`) and
the serial row over a reduction it made vector code (:func:`planned_row`).

The prior walks the loops the emitter writes (:func:`~metaschedule.codegen.plan.
emitted_loops`: rows vectorized over their outputs, fused vector loops split), so a
store's loops are the plan's own objects and the plan answers for them.
"""

from __future__ import annotations

import math

from ...codegen.plan import FunctionPlan
from ...feature_extractor.features.loop_nest import Store

__all__ = ["planned_row", "planned_tile"]


def planned_tile(
    st: Store, plan: FunctionPlan, store_loops: set[int], vec_loop: int, per_elem: float
) -> tuple[int, list[int], float] | None:
    """The register tile the code generator planned for the store
    (:class:`~metaschedule.codegen.c_accumulate.AccumulatorPlan`), or None: ``(start,
    tile, per_elem)``, the position of the loop the tile's region starts at, the
    positions of the loops the tile spans (those moving the stored element from
    ``start`` down, less the ones split out of a tile too large), and the vector chunks
    per element of the tile's vector loop ``vec_loop`` (its accumulators over its
    points: below ``per_elem`` when tile loops merged into the vector loop)."""
    ext = st.extents
    for j, lp in enumerate(st.loops):
        tile_plan = plan.tile_at(lp.node)
        if tile_plan is None or tile_plan is False:
            continue
        if tile_plan.buffer is not st.store.buffer:
            return None
        outer = {id(x) for x in tile_plan.outer}
        tile = [
            k for k in range(j, len(ext)) if k in store_loops and id(st.loops[k].node) not in outer
        ]
        points = math.prod(ext[k] for k in tile)
        tile_per_elem = per_elem
        if vec_loop in tile and points > 0:
            tile_per_elem = len(tile_plan.points) / points
        return j, tile, tile_per_elem
    return None


def planned_row(st: Store, plan: FunctionPlan) -> int:
    """The position among the store's loops where the code generator put the nest of a
    serial row it vectorized over its outputs (:func:`~metaschedule.codegen.c_vector.
    vectorize_outputs`: the loops below the row, then the row vectorized innermost), or
    -1 when the store is in no such row."""
    if not plan.rows:
        return -1
    tops = {id(nest) for _, nest in plan.rows}
    return next((j for j, lp in enumerate(st.loops) if id(lp.node) in tops), -1)
