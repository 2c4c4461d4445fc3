"""Buffer layout and storage primitives: ``set_scope``, ``storage_align``, ``transform_layout``.

``transform_layout`` takes an :class:`IndexMap`: a function from a buffer's indices to
its new indices (``lambda i, j: (j, i)`` transposes, ``lambda i: (i // 4, i % 4)``
splits a dimension). It rewrites the buffer's shape and every access to it. As in TVM, a
parameter can change layout too (the function's signature changes); where we differ on
purpose: only a read-only parameter (a weight), recorded as pre-packed in
``attrs["prepacked_args"]`` (:mod:`..prepacked`) so that callers know how to re-lay out
their arrays, and the map must be a bijective affine map of the old indices (no padding).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ...tir import Block, Buffer, PrimFunc
from ...tir.functor import Mutator, substitute
from ..analysis import allocation_site, check_storage_scope, nth_buffer
from ..base import ScheduleBase, atomic
from ..error import BufferIndexError, IndexMapError, NonAllocatedBufferError, StorageAlignError
from ..index_map import IndexMap, LayoutRewriter, as_index_map, new_shape
from ..instruction import InstructionKind, register_inst_kind
from ..prepacked import rewrite_param_layout, written_buffers
from ..rv import BlockRV

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

        A read-only parameter (a weight ``W``) changes the function's signature: it then
        takes ``W`` pre-packed, and ``attrs["prepacked_args"]`` records the original shape
        and the map (composed with an earlier one), which ``ms.pack_weights`` applies.

        Args:
            block: a block accessing the buffer.
            buffer: ``("read" | "write", index)`` into the block's regions, an int (a write
                index), or the buffer's name.
            index_map: an :class:`IndexMap` or a function such as ``lambda i, j: (j, i)``.

        Raises:
            ScheduleError: a bad buffer, a parameter the function writes, a map of the
                wrong arity, or a map that is not a bijective affine map with new indices
                starting at 0.
        """
        fname, realize = self._block(block)
        kind, idx = _buffer_spec(realize.block, buffer)
        idx = self._int(idx)
        func = self.state.func(fname)
        buf = nth_buffer(realize.block, idx, kind, "transform_layout")
        param = next((j for j, p in enumerate(func.params) if p is buf), None)
        if param is None:
            buf, _ = self._allocated_buffer(fname, realize.block, idx, kind, "transform_layout")
        imap = as_index_map(index_map, buf.ndim)
        if len(imap.initial_indices) != buf.ndim:
            raise IndexMapError(
                f"transform_layout: {imap} takes {len(imap.initial_indices)} "
                f"indices, but buffer {buf.name!r} has {buf.ndim} dimensions"
            )
        if param is not None:
            if buf in written_buffers(func):
                raise NonAllocatedBufferError(
                    f"transform_layout: buffer {buf.name!r} (accessed by block "
                    f"{realize.block.name_hint!r}) is a parameter of function {fname!r} that the "
                    "function writes; only read-only parameters (weights, pre-packed by the "
                    "caller) and buffers allocated in the function can change layout"
                )
            new_shape(buf, imap)  # raises IndexMapError on a map that is not bijective
            self.state.set_func(fname, rewrite_param_layout(func, param, imap))
        else:
            new = Buffer(buf.name, new_shape(buf, imap), buf.dtype, buf.scope)
            self._replace_func_buffer(fname, LayoutRewriter(buf, new, imap))
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
