"""Integer dot-product intrinsics: ``C[i] += sum_k A[k] * B[i, k]`` for ``lanes`` outputs
and ``reduce`` products each (TVM's names and descriptions).

Each intrinsic reads ``A`` (``reduce`` values, broadcast to every lane), ``B`` (``lanes``
rows of ``reduce`` values) and accumulates into ``C`` (``lanes`` values)::

    for i, k in T.grid(lanes, reduce):
        with T.block("update"):
            vi, vk = T.axis.remap("SR", [i, k])
            C[vi] = C[vi] + T.Cast(c, A[vk]) * T.Cast(c, B[vi, vk])

Its implementation calls one C function, ``(int32_t* c, const a_t* a, const b_t* b,
int32_t ldb)``: the rows of ``B`` may lie ``ldb`` elements apart (a packed layout, rows
``reduce`` apart, makes them one vector load); ``A``, ``C`` and each row of ``B`` must be
contiguous. The C text is in :mod:`metaschedule.codegen.c_intrin`.

Which are exact: VNNI's ``vpdpbusd`` and ARM's ``sdot``/``udot`` add the four 32-bit
products to each lane exactly (wrapping like the description's int32 sum). The AVX2 and
AVX512-BW sequences (``vpmaddubsw``, ``vpmaddwd``, add) first add products *in pairs*
into int16 with *saturation*: they equal the description only while every
``A[2m] * B[i, 2m] + A[2m+1] * B[i, 2m+1]`` lies in [-32768, 32767], e.g. when ``A`` is
below 128 (TVM documents the same limit of its AVX512 and AVX2 int8 schedules). The
interpreter's reference of those calls saturates as the hardware does, so a schedule
using them is checked against what the machine computes. ``dot_16x4_avx512_exact`` and
``dot_8x4_avx2_exact`` (not in TVM) compute the same on the same instruction sets exactly:
even and odd bytes widened to int16 in place (mask, shifts), two ``vpmaddwd``, two adds.

``dot_4x4_u8u8u32_udot`` accumulates into int32, not TVM's uint32 (the IR has no
uint32): the bits are the same, since 32-bit addition wraps alike.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..buffer import Buffer
from ..expr import Call, Var, cast, const
from ..function import PrimFunc
from ..stmt import (
    Block,
    BlockRealize,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IterType,
    IterVar,
    Range,
)
from .base import TensorIntrin
from .calls import Pointer, address_of, buffer_stride, register_extern_call

__all__ = [
    "ARM_DOT_4x4_i8_NEON_INTRIN",
    "ARM_DOT_4x4_i8_SDOT_INTRIN",
    "ARM_DOT_4x4_u8_HDOT_INTRIN",
    "ARM_DOT_4x4_u8_UDOT_INTRIN",
    "AVX512_DOT_16x4_INTRIN",
    "AVX2_DOT_8x4_INTRIN",
    "AVXVNNI_DOT_8x4_INTRIN",
    "DOT_PRODUCTS",
    "DotProduct",
    "VNNI_DOT_16x4_INTRIN",
    "dot_product_desc",
    "dot_product_impl",
]

# TVM's constant names (tir.tensor_intrin.x86 / arm_cpu), for scripts written against it
VNNI_DOT_16x4_INTRIN = "dot_16x4_vnni"
AVX512_DOT_16x4_INTRIN = "dot_16x4_avx512"
AVXVNNI_DOT_8x4_INTRIN = "dot_8x4_avxvnni"
AVX2_DOT_8x4_INTRIN = "dot_8x4_avx2"
ARM_DOT_4x4_i8_NEON_INTRIN = "dot_4x4_i8i8s32_neon"
ARM_DOT_4x4_i8_SDOT_INTRIN = "dot_4x4_i8i8s32_sdot"
ARM_DOT_4x4_u8_UDOT_INTRIN = "dot_4x4_u8u8u32_udot"
ARM_DOT_4x4_u8_HDOT_INTRIN = "dot_4x4_u8u8i32_hdot"


class DotProduct:
    """One dot-product intrinsic: its shape, dtypes and the C function implementing it."""

    def __init__(
        self,
        name: str,
        op: str,
        lanes: int,
        reduce: int,
        dtypes: tuple[str, str, str],
        saturating_pairs: bool = False,
    ):
        self.name, self.op, self.lanes, self.reduce = name, op, lanes, reduce
        self.a_dtype, self.b_dtype, self.c_dtype = dtypes
        self.saturating_pairs = saturating_pairs

    def buffers(self) -> tuple[Buffer, Buffer, Buffer]:
        return (
            Buffer("A", (self.reduce,), self.a_dtype),
            Buffer("B", (self.lanes, self.reduce), self.b_dtype),
            Buffer("C", (self.lanes,), self.c_dtype),
        )

    def reference(self, c: Pointer, a: Pointer, b: Pointer, ldb: int) -> int:
        """What the C function computes, on the interpreter's memory."""
        av = a.view(self.reduce).astype(np.int64)
        bv = b.rows(self.lanes, self.reduce, ldb).astype(np.int64)
        prods = av[None, :] * bv
        if self.saturating_pairs:  # vpmaddubsw: pairs summed into int16, saturating
            prods = np.clip(prods[:, 0::2] + prods[:, 1::2], -(2**15), 2**15 - 1)
        out = c.view(self.lanes)
        total = out.astype(np.int64) + prods.sum(axis=1)
        out[...] = ((total + 2**31) % 2**32 - 2**31).astype(out.dtype)
        return 0


def _root(params: tuple[Buffer, ...], body, writes: tuple[Buffer, ...]) -> PrimFunc:
    a, b, c = params
    root = Block(
        iter_vars=(),
        reads=tuple(BufferRegion.full_region(x) for x in (c, a, b)),
        writes=tuple(BufferRegion.full_region(x) for x in writes),
        name_hint="root",
        body=body,
    )
    return PrimFunc(params, BlockRealize((), const(True), root), {"tir.noalias": True})


def dot_product_desc(dp: DotProduct) -> PrimFunc:
    """The description: the loop nest of the module docstring."""
    a, b, c = dp.buffers()
    i, k = Var("i"), Var("k")
    vi, vk = Var("vi"), Var("vk")
    ivs = (
        IterVar(vi, Range(const(0), const(dp.lanes)), IterType.DATA_PAR),
        IterVar(vk, Range(const(0), const(dp.reduce)), IterType.COMM_REDUCE),
    )
    value = c[vi] + cast(dp.c_dtype, a[vk]) * cast(dp.c_dtype, b[vi, vk])
    update = Block(
        iter_vars=ivs,
        reads=(
            BufferRegion(c, (Range(vi, const(1)),)),
            BufferRegion(a, (Range(vk, const(1)),)),
            BufferRegion(b, (Range(vi, const(1)), Range(vk, const(1)))),
        ),
        writes=(BufferRegion(c, (Range(vi, const(1)),)),),
        name_hint="update",
        body=BufferStore(c, value, (vi,)),
    )
    nest = For(
        i,
        0,
        dp.lanes,
        ForKind.SERIAL,
        For(k, 0, dp.reduce, ForKind.SERIAL, BlockRealize((i, k), const(True), update)),
    )
    return _root((a, b, c), nest, (c,))


def dot_product_impl(dp: DotProduct) -> PrimFunc:
    """The implementation: one call of ``dp.op`` on the operands' addresses."""
    a, b, c = dp.buffers()
    call = Call(
        "int32",
        dp.op,
        (address_of(c[0]), address_of(a[0]), address_of(b[0, 0]), buffer_stride(b, 0)),
    )
    return _root((a, b, c), Evaluate(call), (c,))


_U8S8 = ("uint8", "int8", "int32")
_S8S8 = ("int8", "int8", "int32")
_U8U8 = ("uint8", "uint8", "int32")  # TVM: uint32 out, the same bits
#: The built-in dot products, by TVM's intrinsic names.
DOT_PRODUCTS: dict[str, DotProduct] = {
    dp.name: dp
    for dp in (
        # x86: u8 x s8 -> s32
        DotProduct("dot_16x4_vnni", "ms_dot_16x4_vnni", 16, 4, _U8S8),
        DotProduct("dot_16x4_avx512", "ms_dot_16x4_avx512", 16, 4, _U8S8, saturating_pairs=True),
        DotProduct("dot_8x4_avxvnni", "ms_dot_8x4_avxvnni", 8, 4, _U8S8),
        DotProduct("dot_8x4_avx2", "ms_dot_8x4_avx2", 8, 4, _U8S8, saturating_pairs=True),
        # ours: the same products exact, each pair of bytes as two int16 vpmaddwd
        DotProduct("dot_16x4_avx512_exact", "ms_dot_16x4_avx512_exact", 16, 4, _U8S8),
        DotProduct("dot_8x4_avx2_exact", "ms_dot_8x4_avx2_exact", 8, 4, _U8S8),
        # aarch64
        DotProduct("dot_4x4_i8i8s32_sdot", "ms_dot_4x4_i8i8s32_sdot", 4, 4, _S8S8),
        DotProduct("dot_4x4_u8u8u32_udot", "ms_dot_4x4_u8u8s32_udot", 4, 4, _U8U8),
        DotProduct("dot_4x4_u8u8i32_hdot", "ms_dot_4x4_u8u8s32_udot", 4, 4, _U8U8),
        DotProduct("dot_4x4_i8i8s32_neon", "ms_dot_4x4_i8i8s32_neon", 4, 4, _S8S8),
    )
}


def _register_builtins() -> None:
    refs: dict[str, Callable[..., int]] = {}
    for dp in DOT_PRODUCTS.values():
        TensorIntrin.register(dp.name, dot_product_desc(dp), dot_product_impl(dp))
        refs.setdefault(dp.op, dp.reference)
    for op, ref in refs.items():
        register_extern_call(op, ref)


_register_builtins()
