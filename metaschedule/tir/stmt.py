"""Statements of the tensor IR: loops, blocks, stores, control flow.

The block-level form follows TensorIR: a :class:`Block` declares iteration
variables with domains and kinds, the buffer regions it reads and writes, an
optional ``init`` (for reductions) and a body; a :class:`BlockRealize` binds the
iteration variables to expressions of the enclosing loops. After lowering, blocks
are gone and only loops, stores, allocations and conditionals remain.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from .buffer import Buffer
from .expr import IntImm, Node, PrimExpr, Var, const, convert


class Stmt(Node):
    __slots__ = ()


@dataclass(frozen=True, eq=False, repr=False)
class Range(Node):
    """The half-open interval ``[min, min + extent)``."""

    min: PrimExpr
    extent: PrimExpr

    def __post_init__(self):
        object.__setattr__(self, "min", convert(self.min))
        object.__setattr__(self, "extent", convert(self.extent))

    @staticmethod
    def from_min_extent(min_value, extent) -> Range:
        return Range(convert(min_value), convert(extent))


class IterType(enum.IntEnum):
    """Kinds of block iteration variables (values match TVM's IterVarType)."""

    DATA_PAR = 0
    THREAD_INDEX = 1
    COMM_REDUCE = 2
    ORDERED = 3
    OPAQUE = 4


@dataclass(frozen=True, eq=False, repr=False)
class IterVar(Node):
    """An iteration variable with its domain and kind (data-parallel or reduction)."""

    var: Var
    dom: Range
    iter_type: IterType = IterType.DATA_PAR
    thread_tag: str = ""

    def __post_init__(self):
        if type(self.iter_type) is not IterType:  # IterType(x) is slow even for members
            object.__setattr__(self, "iter_type", IterType(self.iter_type))

    def as_expr(self) -> Var:
        return self.var

    # let IterVars be used directly in te.compute expressions
    def __getattr__(self, name):
        if name.startswith("__") or name in ("var", "dom", "iter_type", "thread_tag"):
            raise AttributeError(name)
        return getattr(self.var, name)

    def _bin(op):  # noqa: N805
        def f(self, other):
            return getattr(self.var, op)(other)

        return f

    for _op in (
        "__add__",
        "__radd__",
        "__sub__",
        "__rsub__",
        "__mul__",
        "__rmul__",
        "__floordiv__",
        "__rfloordiv__",
        "__mod__",
        "__rmod__",
        "__lt__",
        "__le__",
        "__gt__",
        "__ge__",
        "__neg__",
        "__truediv__",
        "__rtruediv__",
    ):
        locals()[_op] = _bin(_op)
    del _op, _bin
    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False, repr=False)
class BufferRegion(Node):
    """A rectangular region of a buffer: one :class:`Range` per dimension."""

    buffer: Buffer
    region: tuple[Range, ...]

    def __post_init__(self):
        object.__setattr__(self, "region", tuple(self.region))
        if len(self.region) != len(self.buffer.shape):
            raise ValueError(
                f"region of buffer {self.buffer.name} has {len(self.region)} ranges for "
                f"{len(self.buffer.shape)} dimensions"
            )

    @staticmethod
    def full_region(buffer: Buffer) -> BufferRegion:
        return BufferRegion(buffer, tuple(Range(const(0, s.dtype), s) for s in buffer.shape))


@dataclass(frozen=True, eq=False, repr=False)
class BufferStore(Stmt):
    """``buffer[indices] = value``."""

    buffer: Buffer
    value: PrimExpr
    indices: tuple[PrimExpr, ...]

    def __post_init__(self):
        indices = tuple([convert(i) for i in self.indices])
        object.__setattr__(self, "indices", indices)
        value = convert(self.value, self.buffer.dtype)
        object.__setattr__(self, "value", value)
        if len(indices) != len(self.buffer.shape):
            raise IndexError(
                f"buffer {self.buffer.name} has {len(self.buffer.shape)} dimensions, "
                f"stored with {len(indices)} indices"
            )
        if value.dtype != self.buffer.dtype:
            raise TypeError(
                f"storing a {value.dtype} value into {self.buffer.dtype} buffer {self.buffer.name}"
            )


class ForKind(enum.Enum):
    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unroll"
    THREAD_BINDING = "thread_binding"


@dataclass(frozen=True, eq=False, repr=False)
class For(Stmt):
    """``for loop_var in range(min, min + extent): body``.

    ``thread_binding`` names the GPU thread axis ("threadIdx.x", ...) when ``kind`` is
    THREAD_BINDING. ``annotations`` are free-form hints (e.g.
    ``pragma_auto_unroll_max_step``).
    """

    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: ForKind
    body: Stmt
    thread_binding: str | None = None
    annotations: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "min", convert(self.min, self.loop_var.dtype))
        object.__setattr__(self, "extent", convert(self.extent, self.loop_var.dtype))
        if type(self.kind) is not ForKind:  # ForKind(x) is slow even for members
            object.__setattr__(self, "kind", ForKind(self.kind))
        object.__setattr__(self, "annotations", dict(self.annotations))
        if (self.kind is ForKind.THREAD_BINDING) != (self.thread_binding is not None):
            raise ValueError("a thread_binding is given exactly when kind is THREAD_BINDING")

    def with_body(self, body: Stmt) -> For:
        """This loop around another ``body``: ``replace_fields(self, body=body)`` without
        checking the other fields again (schedule primitives rebuild every loop above the
        statements they change)."""
        new = object.__new__(For)
        new.__dict__.update(self.__dict__)
        object.__setattr__(new, "body", body)
        return new


@dataclass(frozen=True, eq=False, repr=False)
class SeqStmt(Stmt):
    seq: tuple[Stmt, ...]

    def __post_init__(self):
        object.__setattr__(self, "seq", tuple(self.seq))


@dataclass(frozen=True, eq=False, repr=False)
class IfThenElse(Stmt):
    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(frozen=True, eq=False, repr=False)
class Evaluate(Stmt):
    """Evaluate an expression for its side effects (a no-op for pure expressions)."""

    value: PrimExpr

    def __post_init__(self):
        object.__setattr__(self, "value", convert(self.value))


@dataclass(frozen=True, eq=False, repr=False)
class Allocate(Stmt):
    """Allocate ``buffer`` for the duration of ``body`` (lowered form of alloc_buffers)."""

    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, eq=False, repr=False)
class Block(Stmt):
    """A TensorIR block. See the module docstring."""

    iter_vars: tuple[IterVar, ...]
    reads: tuple[BufferRegion, ...]
    writes: tuple[BufferRegion, ...]
    name_hint: str
    body: Stmt
    init: Stmt | None = None
    alloc_buffers: tuple[Buffer, ...] = ()
    annotations: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        for name in ("iter_vars", "reads", "writes", "alloc_buffers"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "annotations", dict(self.annotations))


@dataclass(frozen=True, eq=False, repr=False)
class BlockRealize(Stmt):
    """Instantiates ``block`` with ``iter_values`` bound to its iter_vars, under ``predicate``."""

    iter_values: tuple[PrimExpr, ...]
    predicate: PrimExpr
    block: Block

    def __post_init__(self):
        object.__setattr__(self, "iter_values", tuple([convert(v) for v in self.iter_values]))
        object.__setattr__(self, "predicate", convert(self.predicate))
        if len(self.iter_values) != len(self.block.iter_vars):
            raise ValueError(
                f"block {self.block.name_hint} has {len(self.block.iter_vars)} iter_vars but "
                f"{len(self.iter_values)} bindings"
            )


def seq(*stmts: Stmt) -> Stmt:
    """A SeqStmt of ``stmts`` with nested sequences flattened; one statement stays itself."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, SeqStmt):
            flat.extend(s.seq)
        else:
            flat.append(s)
    if len(flat) == 1:
        return flat[0]
    return SeqStmt(tuple(flat))


def true() -> IntImm:
    return IntImm("bool", 1)
