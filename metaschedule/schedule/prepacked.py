"""Pre-packed parameters: a read-only parameter (a weight) the function takes in another
layout than its original one, re-laid out once, ahead of time, by the caller.

A function records them in ``attrs["prepacked_args"]`` (:data:`~metaschedule.tir.function.
PREPACKED_ARGS`): ``{param index: {"original_shape": [...], "index_map": ...}}``, the
map going from the original indices to the packed ones, stored in its JSON form
(``IndexMap.as_json``: plain data, so that structural equality and the JSON round trip of
functions need nothing special; :func:`prepacked_args` reads it back). ``transform_layout`` of a
parameter and the ``RewriteLayout`` postprocessor write it; ``ArgInfo``, the runtime
Module, :func:`metaschedule.pack_weights` and the graph's ``prepack_weights`` read it.

The parameters that *may* be packed are TVM's ``attrs["layout_free_buffers"]`` (a list of
indices), a separate attribute.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..tir import Buffer, BufferStore, PrimFunc
from ..tir.function import LAYOUT_FREE_BUFFERS, PREPACKED_ARGS
from ..tir.functor import Visitor
from .index_map import IndexMap, LayoutRewriter, as_index_map, new_shape

__all__ = [
    "PackedArg",
    "layout_free_params",
    "prepacked_args",
    "rewrite_param_layout",
    "written_buffers",
]


@dataclass(frozen=True)
class PackedArg:
    """One pre-packed parameter: its original shape and the map original -> packed."""

    original_shape: tuple[int, ...]
    index_map: IndexMap

    def pack(self, arr: np.ndarray) -> np.ndarray:
        """``arr`` (in the original shape) re-laid out as the function takes it."""
        arr = np.asarray(arr)
        if tuple(arr.shape) != self.original_shape:
            raise ValueError(
                f"expected an array of the original shape {self.original_shape}, "
                f"got {tuple(arr.shape)}"
            )
        return np.ascontiguousarray(self.index_map.map_ndarray(arr))


def prepacked_args(func: PrimFunc) -> dict[int, PackedArg]:
    """The pre-packed parameters of ``func`` by index (empty when there are none)."""
    out: dict[int, PackedArg] = {}
    for k, entry in (func.attrs.get(PREPACKED_ARGS) or {}).items():
        imap = entry["index_map"]
        if isinstance(imap, dict):
            imap = IndexMap.from_json(imap)
        out[int(k)] = PackedArg(tuple(int(s) for s in entry["original_shape"]), imap)
    return out


def layout_free_params(func: PrimFunc) -> list[int]:
    """TVM's ``layout_free_buffers``: the parameter indices that may be re-laid out."""
    return sorted(int(j) for j in func.attrs.get(LAYOUT_FREE_BUFFERS) or ())


#: ``written_buffers`` of recent functions: id(func) -> (func, buffers); functions are
#: immutable, and the layout rewrite asks about the same function several times
_WRITTEN: dict[int, tuple[PrimFunc, frozenset[Buffer]]] = {}


def written_buffers(func: PrimFunc) -> frozenset[Buffer]:
    """The buffers some statement of ``func`` stores to."""
    hit = _WRITTEN.get(id(func))
    if hit is not None and hit[0] is func:
        return hit[1]
    found = _written_buffers(func)
    if len(_WRITTEN) >= 16:
        _WRITTEN.clear()
    _WRITTEN[id(func)] = (func, found)
    return found


def _written_buffers(func: PrimFunc) -> frozenset[Buffer]:
    found: set[Buffer] = set()

    class _Stores(Visitor):
        def visit_BufferStore(self, node: BufferStore) -> None:
            found.add(node.buffer)
            self.generic_visit(node)

    _Stores().visit(func.body)
    return frozenset(found)


def rewrite_param_layout(func: PrimFunc, index: int, index_map: IndexMap | object) -> PrimFunc:
    """``func`` taking parameter ``index`` in the layout ``index_map`` (its current indices
    -> new ones), every access rewritten, the map recorded in ``attrs["prepacked_args"]``
    (composed with an earlier map of the same parameter).

    Raises:
        IndexMapError: the map is not a bijective affine map of the parameter's indices.
        ValueError: the parameter is written by the function (an output cannot be packed).
    """
    old: Buffer = func.params[index]
    if old in written_buffers(func):
        raise ValueError(
            f"parameter {index} ({old.name}) is written by the function; only read-only "
            "parameters (weights) can be pre-packed"
        )
    imap = as_index_map(index_map, len(old.shape))
    new = Buffer(old.name, new_shape(old, imap), old.dtype, old.scope)
    body = LayoutRewriter(old, new, imap).visit(func.body)
    params = list(func.params)
    params[index] = new
    packed = dict(func.attrs.get(PREPACKED_ARGS) or {})
    earlier = prepacked_args(func).get(index)
    if earlier is None:
        entry = {"original_shape": [int(s) for s in old.shape], "index_map": imap.as_json()}
    else:
        entry = {
            "original_shape": list(earlier.original_shape),
            "index_map": earlier.index_map.compose(imap).as_json(),
        }
    packed[index] = entry
    return PrimFunc(params, body, {**func.attrs, PREPACKED_ARGS: packed})
