"""Tensor intrinsics (TVM's ``tir.tensor_intrin``): ``TensorIntrin.register`` /
``TensorIntrin.get``, the calls an implementation makes (:mod:`.calls`), and the built-in
integer dot products (:mod:`.dot_product`) under TVM's names. Their C text is in
:mod:`metaschedule.codegen.c_intrin`, which also says which ones a target can run
(``usable_tensor_intrins``)."""

from .base import TensorIntrin
from .calls import address_of, buffer_stride, register_extern_call
from .dot_product import (
    DOT_PRODUCTS,
    ARM_DOT_4x4_i8_NEON_INTRIN,
    ARM_DOT_4x4_i8_SDOT_INTRIN,
    ARM_DOT_4x4_u8_HDOT_INTRIN,
    ARM_DOT_4x4_u8_UDOT_INTRIN,
    AVX2_DOT_8x4_INTRIN,
    AVX512_DOT_16x4_INTRIN,
    AVXVNNI_DOT_8x4_INTRIN,
    VNNI_DOT_16x4_INTRIN,
)

__all__ = [
    "ARM_DOT_4x4_i8_NEON_INTRIN",
    "ARM_DOT_4x4_i8_SDOT_INTRIN",
    "ARM_DOT_4x4_u8_HDOT_INTRIN",
    "ARM_DOT_4x4_u8_UDOT_INTRIN",
    "AVX2_DOT_8x4_INTRIN",
    "AVX512_DOT_16x4_INTRIN",
    "AVXVNNI_DOT_8x4_INTRIN",
    "DOT_PRODUCTS",
    "TensorIntrin",
    "VNNI_DOT_16x4_INTRIN",
    "address_of",
    "buffer_stride",
    "register_extern_call",
]
