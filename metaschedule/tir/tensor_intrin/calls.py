"""The calls a tensor intrinsic's implementation makes: C functions over buffer addresses.

An implementation's body is ``Evaluate(Call("int32", "<C function>", args))``, where
each argument is an ordinary expression or one of two helper calls:

* ``address_of(B[i, j])``: the address of an element (C's ``&B[i][j]``). It is a
  :class:`~metaschedule.tir.expr.Call` named ``"address_of"`` of dtype ``int64`` (the
  IR has no pointer type), so it prints (``T.address_of(B[i, j])``), hashes and
  round-trips through JSON like any other call.
* ``buffer_stride(B, axis)``: the distance, in elements, between consecutive indices
  of ``B`` along ``axis``. In an implementation's own buffer it is the row-major
  stride; :meth:`Schedule.tensorize` replaces it by the stride of the region the
  buffer is bound to, so one C function serves packed and strided operands. Every axis
  an implementation does not ask the stride of must be compact where it is bound.

The C text of each function lives with the code generator
(:mod:`metaschedule.codegen.c_intrin`); what it computes, for the reference interpreter,
is registered here with :func:`register_extern_call` as a Python function over
:class:`Pointer` and int arguments.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..buffer import Buffer
from ..expr import BufferLoad, Call, IntImm, PrimExpr, const

__all__ = [
    "ADDRESS_OF",
    "BUFFER_STRIDE",
    "Pointer",
    "address_of",
    "buffer_stride",
    "extern_call_reference",
    "is_address_of",
    "is_buffer_stride",
    "register_extern_call",
    "registered_extern_calls",
]

ADDRESS_OF = "address_of"
BUFFER_STRIDE = "buffer_stride"


def address_of(load: BufferLoad) -> Call:
    """The address of the element ``load`` reads (an ``int64``-typed call)."""
    if not isinstance(load, BufferLoad):
        raise TypeError(f"address_of takes a buffer element such as B[i, j], got {load!r}")
    return Call("int64", ADDRESS_OF, (load,))


def buffer_stride(buffer: Buffer, axis: int) -> Call:
    """The stride (in elements) of ``buffer`` along ``axis``; see the module docstring."""
    if not 0 <= axis < buffer.ndim:
        raise ValueError(f"buffer {buffer.name} has {buffer.ndim} axes, no axis {axis}")
    origin = BufferLoad(buffer, tuple(const(0, "int32") for _ in buffer.shape))
    return Call("int32", BUFFER_STRIDE, (origin, const(axis, "int32")))


def is_address_of(e: PrimExpr) -> bool:
    return isinstance(e, Call) and e.op == ADDRESS_OF


def is_buffer_stride(e: PrimExpr) -> bool:
    return isinstance(e, Call) and e.op == BUFFER_STRIDE


def stride_axis(e: Call) -> tuple[Buffer, int]:
    """The buffer and axis a ``buffer_stride`` call asks about."""
    load, axis = e.args
    if not isinstance(load, BufferLoad) or not isinstance(axis, IntImm):
        raise ValueError(f"malformed buffer_stride call {e}: expected (B[0, ...], axis)")
    return load.buffer, axis.value


def compact_stride(buffer: Buffer, axis: int) -> int:
    """The row-major stride of ``buffer`` along ``axis``."""
    return math.prod(buffer.static_shape()[axis + 1 :])


# ----------------------------------------------------------------------------- interpreter


@dataclass(frozen=True)
class Pointer:
    """An element address in the reference interpreter: a flat view of the array and an
    offset into it. ``view(n, stride)`` gives the ``n`` elements from there, ``stride``
    apart, as a writable numpy view."""

    flat: np.ndarray
    offset: int

    def view(self, n: int, stride: int = 1) -> np.ndarray:
        end = self.offset + (n - 1) * stride + 1
        if self.offset < 0 or end > self.flat.size:
            raise IndexError(
                f"an intrinsic reads {n} elements {stride} apart from offset {self.offset} "
                f"of a buffer of {self.flat.size} elements"
            )
        return self.flat[self.offset : end : stride]

    def rows(self, n: int, width: int, stride: int) -> np.ndarray:
        """``n`` rows of ``width`` contiguous elements, ``stride`` apart (a copy)."""
        return np.stack(
            [Pointer(self.flat, self.offset + r * stride).view(width) for r in range(n)]
        )


ExternFn = Callable[..., int]
_REFERENCES: dict[str, ExternFn] = {}


def register_extern_call(op: str, reference: ExternFn, *, override: bool = False) -> None:
    """Say what the C function ``op`` computes, for the reference interpreter:
    ``reference(*args)`` gets a :class:`Pointer` per ``address_of`` argument and a
    Python int per other argument, updates memory through the pointers and returns the
    call's int32 value."""
    if op in _REFERENCES and not override:
        raise ValueError(f"extern call {op!r} is already registered (pass override=True)")
    _REFERENCES[op] = reference


def extern_call_reference(op: str) -> ExternFn | None:
    return _REFERENCES.get(op)


def registered_extern_calls() -> list[str]:
    return sorted(_REFERENCES)
