"""Weight layouts for the default schedule: give a constant parameter of a PrimFunc a new
layout, recorded in ``attrs["layout_free_buffers"]`` so that
:func:`metaschedule.graph.build.prepack_weights` re-lays the weight out once, at compile
time (the counterpart of TVM's RewriteLayout for the untuned path).

A convolution vectorized over its output channels wants its OIHW kernel as
``[F // v, C, KH, KW, v]`` (OIHW{v}o): the ``v`` channels one vector step reads are
contiguous, and the loop over ``C, KH, KW`` walks the weight in order.
"""

from __future__ import annotations

from ..schedule.primitives.layout import IndexMap, _LayoutRewriter, _new_shape, as_index_map
from ..tir import Buffer
from ..tir.function import PrimFunc

LAYOUT_FREE = "layout_free_buffers"


def rewrite_param_layout(func: PrimFunc, index: int, index_map: IndexMap | object) -> PrimFunc:
    """``func`` with parameter ``index`` in the layout ``index_map`` (old indices -> new),
    every access rewritten, and the map recorded under ``attrs["layout_free_buffers"]``.

    Raises:
        IndexMapError: the map is not a bijective affine map of the parameter's indices.
        ValueError: the parameter already has a recorded layout.
    """
    old: Buffer = func.params[index]
    imap = as_index_map(index_map, len(old.shape))
    maps = dict(func.attrs.get(LAYOUT_FREE) or {})
    if index in maps:
        raise ValueError(f"rewrite_param_layout: parameter {index} ({old.name}) is already packed")
    new = Buffer(old.name, _new_shape(old, imap), old.dtype, old.scope)
    body = _LayoutRewriter(old, new, imap).visit(func.body)
    params = list(func.params)
    params[index] = new
    maps[index] = imap
    return PrimFunc(params, body, {**func.attrs, LAYOUT_FREE: maps})


def oihw_to_blocked(v: int) -> IndexMap:
    """``[F, C, KH, KW] -> [F // v, C, KH, KW, v]``."""
    return IndexMap.from_func(lambda f, c, y, x: (f // v, c, y, x, f % v), 4)
