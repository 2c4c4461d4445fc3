"""``matmul_nd``: numpy's ``matmul`` for tensors of any rank >= 2 (batch dims broadcast)."""

from __future__ import annotations

from ..tensor import Tensor, compute, reduce_axis
from ..tensor import sum as te_sum
from ._util import check_tensor
from .elemwise import broadcast_shape


def matmul_nd(A: Tensor, B: Tensor, transpose_b: bool = False, name: str = "T_matmul") -> Tensor:
    """``A @ B`` (or ``A @ B^T`` over the last two dims) with broadcast batch dimensions.

    ``B`` may be 2-D (a weight shared by every batch) or have its own batch dims.
    """
    check_tensor(A, "matmul_nd", "A")
    check_tensor(B, "matmul_nd", "B")
    if A.ndim < 2 or B.ndim < 2:
        raise ValueError(f"matmul_nd: both operands need 2+ dims, got {A.shape} and {B.shape}")
    M, K = A.shape[-2:]
    K2, N = (B.shape[-1], B.shape[-2]) if transpose_b else B.shape[-2:]
    if K != K2:
        raise ValueError(
            f"matmul_nd: reduction sizes differ: A {A.shape}, B {B.shape} "
            f"(transpose_b={transpose_b})"
        )
    batch = broadcast_shape(A.shape[:-2], B.shape[:-2], "matmul_nd")
    k = reduce_axis((0, K), name="k")

    def pick(t: Tensor, bidx: tuple) -> tuple:
        lead = len(bidx) - (t.ndim - 2)
        return tuple(0 if s == 1 else bidx[lead + d] for d, s in enumerate(t.shape[:-2]))

    def body(*idx):
        bidx, i, j = idx[:-2], idx[-2], idx[-1]
        b = B[(*pick(B, bidx), j, k.var)] if transpose_b else B[(*pick(B, bidx), k.var, j)]
        return te_sum(A[(*pick(A, bidx), i, k.var)] * b, axis=k)

    return compute((*batch, M, N), body, name=name, tag="matmul")
