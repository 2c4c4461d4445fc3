"""Buffers: named, typed, row-major multi-dimensional arrays."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .dtype import check_dtype
from .expr import BufferLoad, IntImm, Node, PrimExpr, convert


@dataclass(frozen=True, eq=False, repr=False)
class Buffer(Node):
    """A dense row-major buffer. Compared by identity, like :class:`Var`.

    ``scope`` is the storage scope: "global" for function arguments and heap memory,
    "local" for per-thread (register-like) storage, "shared" for GPU shared memory.
    """

    name: str
    shape: tuple[PrimExpr, ...]
    dtype: str = "float32"
    scope: str = "global"

    def __post_init__(self):
        shape = tuple(
            convert(s, "int64" if isinstance(s, int) and s >= 2**31 else None) for s in self.shape
        )
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", check_dtype(self.dtype))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def static_shape(self) -> tuple[int, ...]:
        """The shape as Python ints; raises ``ValueError`` if a dimension is symbolic."""
        out = []
        for s in self.shape:
            if not isinstance(s, IntImm):
                raise ValueError(f"buffer {self.name} has a non-constant dimension {s}")
            out.append(s.value)
        return tuple(out)

    def numel(self) -> int:
        return math.prod(self.static_shape())

    def __getitem__(self, indices) -> BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return BufferLoad(self, tuple(convert(i) for i in indices))

    def load(self, indices) -> BufferLoad:
        return BufferLoad(self, tuple(convert(i) for i in indices))

    def with_scope(self, scope: str) -> Buffer:
        return Buffer(self.name, self.shape, self.dtype, scope)


def decl_buffer(
    shape, dtype: str = "float32", name: str = "buffer", scope: str = "global"
) -> Buffer:
    """Declare a new buffer (TVM's ``tir.decl_buffer``)."""
    if isinstance(shape, (int, PrimExpr)):
        shape = (shape,)
    return Buffer(name, tuple(shape), dtype, scope)
