"""Index maps: a buffer's old indices -> its new ones, and the rewriting they drive.

An :class:`IndexMap` is a function of a buffer's indices (``lambda i, j: (j, i)``
transposes, ``lambda i: (i // 4, i % 4)`` splits a dimension); :class:`LayoutRewriter`
replaces a buffer by its re-laid-out copy in every access, and :func:`new_shape` is the
shape the map gives (checked bijective and affine). Shared by ``transform_layout``, the
pre-packed parameters (:mod:`.prepacked`) and the graph's weight layouts.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..tir import Buffer, BufferLoad, BufferRegion, BufferStore, Range, Var
from ..tir.arith import Analyzer
from ..tir.arith.iter_map import detect_iter_map
from ..tir.expr import (
    Add,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Node,
    PrimExpr,
    Sub,
    const,
    convert,
)
from ..tir.functor import Mutator, substitute
from ..tir.serialize import from_json_dict, register_node, to_json_dict
from .error import IndexMapError

# ----------------------------------------------------------------------------- IndexMap


@register_node
@dataclass(frozen=True, eq=False, repr=False)
class IndexMap(Node):
    """A map from ``initial_indices`` (variables) to ``final_indices`` (expressions of them)."""

    initial_indices: tuple[Var, ...]
    final_indices: tuple[PrimExpr, ...]

    def __post_init__(self):
        object.__setattr__(self, "initial_indices", tuple(self.initial_indices))
        object.__setattr__(self, "final_indices", tuple(convert(e) for e in self.final_indices))

    @staticmethod
    def from_func(
        func: Callable[..., Any], ndim: int | None = None, index_dtype: str = "int32"
    ) -> IndexMap:
        """Build the map from a Python function of the indices, e.g. ``lambda i, j: (j, i)``.

        ``ndim`` is the number of indices of a function taking ``*args`` (ignored otherwise).
        """
        params = list(inspect.signature(func).parameters.values())
        if any(p.kind is p.VAR_POSITIONAL for p in params):
            if ndim is None:
                raise ValueError("IndexMap.from_func: pass ndim for a function taking *args")
            names = [f"i{k}" for k in range(ndim)]
        else:
            names = [p.name for p in params]
        variables = tuple(Var(n, index_dtype) for n in names)
        out = func(*variables)
        if not isinstance(out, (tuple, list)):
            out = (out,)
        return IndexMap(variables, tuple(convert(e) for e in out))

    def map_indices(
        self, indices: Sequence[PrimExpr], ana: Analyzer | None = None
    ) -> tuple[PrimExpr, ...]:
        if len(indices) != len(self.initial_indices):
            raise IndexMapError(
                f"{self} maps {len(self.initial_indices)} indices, got {len(indices)}"
            )
        vmap = {v: convert(i) for v, i in zip(self.initial_indices, indices)}
        ana = ana or Analyzer()
        return tuple(ana.simplify(substitute(e, vmap)) for e in self.final_indices)

    def compose(self, then: IndexMap) -> IndexMap:
        """The map ``then(self(indices))``: this map first, then ``then``."""
        return IndexMap(self.initial_indices, then.map_indices(self.final_indices))

    def map_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """The shape of a buffer of ``shape`` in the new layout (checked bijective)."""
        buf = Buffer("buffer", tuple(const(int(s)) for s in shape), "float32")
        return tuple(int(s) for s in new_shape(buf, self))

    def map_ndarray(self, arr: np.ndarray) -> np.ndarray:
        """``arr`` in the new layout: ``out[self(i)] = arr[i]`` for every index ``i``.

        Raises:
            IndexMapError: the map is not a bijective affine map of ``arr``'s indices.
        """
        arr = np.asarray(arr)
        if arr.ndim != len(self.initial_indices):
            raise IndexMapError(
                f"{self} maps {len(self.initial_indices)} indices, got an "
                f"array of shape {arr.shape}"
            )
        shape = self.map_shape(arr.shape)
        grids = np.indices(arr.shape, dtype=np.int64)
        env = dict(zip(self.initial_indices, grids))
        dest = tuple(np.broadcast_to(_eval_index(e, env), arr.shape) for e in self.final_indices)
        out = np.empty(shape, arr.dtype)
        out[dest] = arr
        return out

    def as_json(self) -> dict:
        """A JSON-ready dict (how traces store the map)."""
        return to_json_dict(self)

    @staticmethod
    def from_json(data: dict) -> IndexMap:
        node = from_json_dict(data)
        if not isinstance(node, IndexMap):
            raise TypeError(f"expected a serialized IndexMap, got a {type(node).__name__}")
        return node

    def __str__(self) -> str:
        names = ", ".join(v.name for v in self.initial_indices)
        body = ", ".join(str(e) for e in self.final_indices)
        return f"IndexMap(lambda {names}: ({body}{',' if len(self.final_indices) == 1 else ''}))"

    __repr__ = __str__


def as_index_map(index_map: Any, ndim: int) -> IndexMap:
    if isinstance(index_map, IndexMap):
        return index_map
    if isinstance(index_map, dict):
        return IndexMap.from_json(index_map)
    if callable(index_map):
        return IndexMap.from_func(index_map, ndim)
    raise IndexMapError(
        f"transform_layout: expected an IndexMap or a function of the indices, "
        f"got {type(index_map).__name__}: {index_map!r}"
    )


# ----------------------------------------------------------------------------- rewriting


class LayoutRewriter(Mutator):
    """Replace ``old`` by ``new`` everywhere, mapping indices and regions through ``imap``."""

    def __init__(self, old: Buffer, new: Buffer, imap: IndexMap):
        self.old, self.new, self.imap = old, new, imap
        self.ana = Analyzer()

    def visit_buffer(self, buffer: Buffer) -> Buffer:
        return self.new if buffer is self.old else buffer

    def visit_BufferLoad(self, node: BufferLoad):
        if node.buffer is not self.old:
            return self.generic_visit(node)
        indices = self.visit(node.indices)
        return BufferLoad(self.new, self.imap.map_indices(indices, self.ana))

    def visit_BufferStore(self, node: BufferStore):
        if node.buffer is not self.old:
            return self.generic_visit(node)
        indices, value = self.visit(node.indices), self.visit(node.value)
        return BufferStore(self.new, value, self.imap.map_indices(indices, self.ana))

    def visit_BufferRegion(self, node: BufferRegion):
        if node.buffer is not self.old:
            return node
        if all(isinstance(r.extent, IntImm) and r.extent.value == 1 for r in node.region):
            idx = self.imap.map_indices([r.min for r in node.region], self.ana)
            return BufferRegion(self.new, tuple(Range(i, const(1, i.dtype)) for i in idx))
        offsets = [Var(f"t{d}", r.extent.dtype) for d, r in enumerate(node.region)]
        dom = {t: Range(const(0, t.dtype), r.extent) for t, r in zip(offsets, node.region)}
        points = [r.min + t for r, t in zip(node.region, offsets)]
        ranges = []
        for e in self.imap.map_indices(points, self.ana):
            s = self.ana.int_set(e, dom)
            if s.min is None or s.max is None:
                raise IndexMapError(
                    f"transform_layout: cannot bound {e} over the region "
                    f"{node} of buffer {self.old.name!r}"
                )
            ranges.append(Range(s.min, self.ana.simplify(s.max - s.min + 1)))
        return BufferRegion(self.new, tuple(ranges))


#: shapes :func:`new_shape` gave, by :func:`_shape_key` (the search re-lays out the same
#: weights with the same maps in many schedules, each time checking the map bijective)
_SHAPES: dict[tuple, tuple[PrimExpr, ...]] = {}
_MAX_SHAPES = 4096
_KEYED = {Add: "+", Sub: "-", Mul: "*", FloorDiv: "//", FloorMod: "%", Min: "min", Max: "max"}


def _shape_key(buf: Buffer, imap: IndexMap) -> tuple | None:
    """What :func:`new_shape` depends on, spelled with the map's variables by position:
    the buffer's constant shape and the map's integer arithmetic (None for anything else,
    e.g. a symbolic shape or a variable that is not one of the map's indices)."""
    if not all(isinstance(s, IntImm) for s in buf.shape):
        return None
    pos = {v: k for k, v in enumerate(imap.initial_indices)}

    def key(e: PrimExpr) -> Any:
        kind = type(e)
        if kind is IntImm:
            return (e.dtype, e.value)
        if kind is Var:
            k = pos.get(e)
            if k is None:
                raise KeyError(e)
            return k
        op = _KEYED.get(kind)
        if op is None:
            raise KeyError(e)
        return (op, e.dtype, key(e.a), key(e.b))

    try:
        final = tuple(key(e) for e in imap.final_indices)
    except KeyError:
        return None
    shape = tuple((s.dtype, s.value) for s in buf.shape)
    return shape, tuple(v.dtype for v in imap.initial_indices), final


def new_shape(buf: Buffer, imap: IndexMap) -> tuple[PrimExpr, ...]:
    """The shape of ``buf`` in the layout ``imap`` (checked: a bijective affine map whose
    new indices start at 0; ``IndexMapError`` otherwise)."""
    key = _shape_key(buf, imap)
    hit = _SHAPES.get(key) if key is not None else None
    if hit is not None:
        return hit
    shape = _new_shape(buf, imap)
    if key is not None and all(isinstance(s, IntImm) for s in shape):
        if len(_SHAPES) >= _MAX_SHAPES:
            _SHAPES.clear()
        _SHAPES[key] = shape
    return shape


def _new_shape(buf: Buffer, imap: IndexMap) -> tuple[PrimExpr, ...]:
    dom = {v: Range(const(0, s.dtype), s) for v, s in zip(imap.initial_indices, buf.shape)}
    res = detect_iter_map(imap.final_indices, dom, check_level="bijective")
    if not res.success:
        raise IndexMapError(
            f"transform_layout: {imap} is not a bijective affine map of the indices of buffer "
            f"{buf.name!r} (shape {[str(s) for s in buf.shape]}): {'; '.join(res.errors)}"
        )
    ana = Analyzer()
    shape = []
    for e in imap.final_indices:
        s = ana.int_set(e, dom)
        if s.min is None or s.max is None or not ana.can_prove_equal(s.min, 0):
            raise IndexMapError(
                f"transform_layout: the new index {e} of buffer {buf.name!r} ranges over "
                f"[{s.min}, {s.max}]; every new index must start at 0"
            )
        shape.append(ana.simplify(s.max + 1))
    return tuple(shape)


_NP_BINARY = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "FloorDiv": np.floor_divide,
    "FloorMod": np.mod,
    "Min": np.minimum,
    "Max": np.maximum,
}


def _eval_index(expr: PrimExpr, env: dict[Var, np.ndarray]) -> Any:
    """An integer index expression evaluated on numpy index grids."""
    if isinstance(expr, Var):
        return env[expr]
    if isinstance(expr, IntImm):
        return np.int64(expr.value)
    fn = _NP_BINARY.get(type(expr).__name__)
    if fn is None:
        raise IndexMapError(f"IndexMap.map_ndarray: cannot evaluate the index expression {expr}")
    return fn(_eval_index(expr.a, env), _eval_index(expr.b, env))
