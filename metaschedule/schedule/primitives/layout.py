"""Buffer layout and storage primitives: ``set_scope``, ``storage_align``, ``transform_layout``.

``transform_layout`` takes an :class:`IndexMap`: a function from a buffer's indices to
its new indices (``lambda i, j: (j, i)`` transposes, ``lambda i: (i // 4, i % 4)``
splits a dimension). It rewrites the buffer's shape and every access to it. Where we
differ from TVM on purpose: only buffers allocated inside the function can change
layout (TVM also rewrites parameters by changing the signature), and the map must be a
bijective affine map of the old indices (no padding).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...tir import (
    Block,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    PrimFunc,
    Range,
    Var,
)
from ...tir.arith import Analyzer
from ...tir.arith.iter_map import detect_iter_map
from ...tir.expr import IntImm, Node, PrimExpr, const, convert
from ...tir.functor import Mutator, substitute
from ...tir.serialize import from_json_dict, register_node, to_json_dict
from ..analysis import allocation_site, check_storage_scope, nth_buffer
from ..base import ScheduleBase, atomic
from ..error import BufferIndexError, IndexMapError, NonAllocatedBufferError, StorageAlignError
from ..instruction import InstructionKind, register_inst_kind
from ..rv import BlockRV

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


class _LayoutRewriter(Mutator):
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


# ----------------------------------------------------------------------------- the mixin


def _buffer_spec(block: Block, buffer: Any) -> tuple[str, int]:
    """Normalise ``buffer`` (("read"|"write", i), an int write index, or a name)."""
    if isinstance(buffer, str):
        for kind, regions in (("read", block.reads), ("write", block.writes)):
            for k, r in enumerate(regions):
                if r.buffer.name == buffer:
                    return kind, k
        names = sorted({r.buffer.name for r in (*block.reads, *block.writes)})
        raise BufferIndexError(
            f"transform_layout: block {block.name_hint!r} accesses no buffer "
            f"named {buffer!r}; it accesses {names}"
        )
    if isinstance(buffer, int) and not isinstance(buffer, bool):
        return "write", buffer
    if isinstance(buffer, (tuple, list)) and len(buffer) == 2 and buffer[0] in ("read", "write"):
        return buffer[0], buffer[1]
    raise BufferIndexError(
        f"transform_layout: expected ('read'|'write', index), an int write "
        f"index or a buffer name, got {buffer!r}"
    )


class LayoutMixin(ScheduleBase):
    def _allocated_buffer(
        self, fname: str, block: Block, index: int, kind: str, primitive: str
    ) -> tuple[Buffer, Block]:
        buf = nth_buffer(block, index, kind, primitive)
        site = allocation_site(self.state.func(fname), buf)
        if site is None:
            raise NonAllocatedBufferError(
                f"{primitive}: buffer {buf.name!r} (accessed by block {block.name_hint!r}) is a "
                f"parameter of function {fname!r}; only buffers allocated in the function "
                "(alloc_buffers of a block) can be changed"
            )
        return buf, site

    def _replace_func_buffer(self, fname: str, mutator: Mutator) -> None:
        func: PrimFunc = self.state.func(fname)
        self.state.set_func(fname, func.with_body(mutator.visit(func.body)))

    @atomic
    def set_scope(self, block: BlockRV, buffer_index: int, storage_scope: str) -> None:
        """Change the storage scope of a buffer the block writes (allocated in the function)::

            B = alloc_buffer((8,))          ->      B = alloc_buffer((8,), scope="shared")

        Raises:
            ScheduleError: a bad index or scope, or a parameter buffer.
        """
        fname, realize = self._block(block)
        idx = self._int(buffer_index)
        scope = check_storage_scope(storage_scope, "set_scope")
        buf, _ = self._allocated_buffer(fname, realize.block, idx, "write", "set_scope")
        if buf.scope != scope:
            func = self.state.func(fname)
            new = buf.with_scope(scope)
            self.state.set_func(fname, func.with_body(substitute(func.body, {}, {buf: new})))
        self._record("SetScope", [block], [idx, scope], [])

    @atomic
    def storage_align(
        self, block: BlockRV, buffer_index: int, axis: int, factor: int, offset: int
    ) -> None:
        """Ask that the stride of ``axis`` of a written buffer be ``factor * k + offset``.

        Recorded, as in TVM, in the block annotation ``buffer_dim_align``: one list per
        write buffer of ``[axis, factor, offset]`` triples. Code generation may ignore it::

            with block("B"):        ->      with block("B"):
                ...                             T.block_attr({"buffer_dim_align": [[[0, 32, 8]]]})

        Raises:
            ScheduleError: a bad index, a parameter buffer, an axis outside the buffer's
                dimensions, a factor < 1, or an offset outside [0, factor).
        """
        fname, realize = self._block(block)
        b = realize.block
        idx = self._int(buffer_index)
        axis, factor, offset = self._int(axis), self._int(factor), self._int(offset)
        buf, _ = self._allocated_buffer(fname, b, idx, "write", "storage_align")
        ndim = buf.ndim
        if not -ndim <= axis < ndim:
            raise StorageAlignError(
                f"storage_align: axis {axis} is out of range for buffer "
                f"{buf.name!r} of {ndim} dimensions (block {b.name_hint!r})"
            )
        axis %= ndim
        if factor < 1:
            raise StorageAlignError(
                f"storage_align: factor must be >= 1, got {factor} (buffer "
                f"{buf.name!r}, block {b.name_hint!r})"
            )
        if not 0 <= offset < factor:
            raise StorageAlignError(
                f"storage_align: offset must be in [0, {factor}), got "
                f"{offset} (buffer {buf.name!r}, block {b.name_hint!r})"
            )
        old = b.annotations.get("buffer_dim_align") or []
        table = [list(map(list, entry)) for entry in old]
        table += [[] for _ in range(len(b.writes) - len(table))]
        entry = [t for t in table[idx] if t[0] != axis] + [[axis, factor, offset]]
        table[idx] = sorted(entry)
        anns = {**b.annotations, "buffer_dim_align": table}
        self.state.replace(fname, {b: dataclasses.replace(b, annotations=anns)})
        self._record("StorageAlign", [block], [idx, axis, factor, offset], [])

    @atomic
    def transform_layout(
        self,
        block: BlockRV,
        buffer: tuple[str, int] | int | str,
        index_map: IndexMap | Callable[..., Any],
    ) -> None:
        """Give a buffer a new layout through ``index_map``, rewriting every access::

            B = alloc_buffer((4, 8))                    B = alloc_buffer((8, 4))
            B[i, j] = A[i, j]          -- (j, i) ->     B[j, i] = A[i, j]
            C[i, j] = B[i, j] + 1                       C[i, j] = B[j, i] + 1

        Args:
            block: a block accessing the buffer.
            buffer: ``("read" | "write", index)`` into the block's regions, an int (a write
                index), or the buffer's name.
            index_map: an :class:`IndexMap` or a function such as ``lambda i, j: (j, i)``.

        Raises:
            ScheduleError: a bad buffer, a parameter buffer, a map of the wrong arity, or a
                map that is not a bijective affine map with new indices starting at 0.
        """
        fname, realize = self._block(block)
        kind, idx = _buffer_spec(realize.block, buffer)
        idx = self._int(idx)
        buf, _ = self._allocated_buffer(fname, realize.block, idx, kind, "transform_layout")
        imap = as_index_map(index_map, buf.ndim)
        if len(imap.initial_indices) != buf.ndim:
            raise IndexMapError(
                f"transform_layout: {imap} takes {len(imap.initial_indices)} "
                f"indices, but buffer {buf.name!r} has {buf.ndim} dimensions"
            )
        new = Buffer(buf.name, _new_shape(buf, imap), buf.dtype, buf.scope)
        self._replace_func_buffer(fname, _LayoutRewriter(buf, new, imap))
        self._record("TransformLayout", [block], [[kind, idx], imap.as_json()], [])


register_inst_kind(
    InstructionKind(
        "SetScope", "set_scope", inputs=("block",), attrs=("buffer_index", "storage_scope")
    )
)
register_inst_kind(
    InstructionKind(
        "StorageAlign",
        "storage_align",
        inputs=("block",),
        attrs=("buffer_index", "axis", "factor", "offset"),
    )
)
register_inst_kind(
    InstructionKind(
        "TransformLayout", "transform_layout", inputs=("block",), attrs=("buffer", "index_map")
    )
)

__all__ = ["IndexMap", "LayoutMixin", "as_index_map"]
