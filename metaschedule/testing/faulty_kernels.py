"""Kernels that go wrong on purpose: they crash, never finish, or do not compile.

They go through the real code generator and compiler, so measurement tests see the same
failures a bad schedule would cause.
"""

from __future__ import annotations

from ..tir.buffer import Buffer
from ..tir.expr import Call, IntImm, Var, const
from ..tir.function import PrimFunc
from ..tir.stmt import BufferStore, For, ForKind

__all__ = ["compile_error_kernel", "infinite_loop_kernel", "segfault_kernel"]


def segfault_kernel(n: int = 4) -> PrimFunc:
    """Stores far outside its buffer (2**40 elements away): a segmentation fault."""
    a = Buffer("A", (n,), "float32")
    i = Var("i", "int64")
    far = i + IntImm("int64", 2**40)
    body = For(
        i,
        IntImm("int64", 0),
        IntImm("int64", n),
        ForKind.SERIAL,
        BufferStore(a, const(1.0, "float32"), (far,)),
    )
    return PrimFunc((a,), body, {"global_symbol": "main"})


def infinite_loop_kernel(n: int = 4) -> PrimFunc:
    """Accumulates into ``A[0]`` 2**62 times: it runs for centuries.

    Float additions do not reassociate without -ffast-math, so the compiler cannot
    shorten the loop.
    """
    a = Buffer("A", (n,), "float32")
    i = Var("i", "int64")
    zero = (IntImm("int64", 0),)
    body = For(
        i,
        IntImm("int64", 0),
        IntImm("int64", 2**62),
        ForKind.SERIAL,
        BufferStore(a, a.load(zero) + const(1.0, "float32"), zero),
    )
    return PrimFunc((a,), body, {"global_symbol": "main"})


def compile_error_kernel(n: int = 4) -> PrimFunc:
    """Calls ``pow`` with one argument: the C compiler rejects the generated code."""
    a = Buffer("A", (n,), "float32")
    i = Var("i", "int32")
    body = For(
        i, 0, n, ForKind.SERIAL, BufferStore(a, Call("float32", "pow", (a.load((i,)),)), (i,))
    )
    return PrimFunc((a,), body, {"global_symbol": "main"})
