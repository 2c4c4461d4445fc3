"""Matrix products: matmul, batch_matmul, dense."""

from __future__ import annotations

from ..tensor import Tensor, compute, reduce_axis
from ..tensor import sum as te_sum
from ._util import check_tensor, layout_free, to_dtype
from .elemwise import bias_add


def _suffix(transpose_a: bool, transpose_b: bool) -> str:
    return ("T" if transpose_a else "N") + ("T" if transpose_b else "N")


def matmul(
    A: Tensor,
    B: Tensor,
    transpose_a: bool = False,
    transpose_b: bool = False,
    out_dtype: str | None = None,
    name: str | None = None,
) -> Tensor:
    """``op(A) @ op(B)`` for 2-D tensors, ``op`` transposing when asked.

    ``out_dtype`` casts both operands before multiplying (e.g. int8 inputs, int32
    accumulation).
    """
    check_tensor(A, "matmul", "A", ndim=2)
    check_tensor(B, "matmul", "B", ndim=2)
    (M, K) = A.shape[::-1] if transpose_a else A.shape
    (K2, N) = B.shape[::-1] if transpose_b else B.shape
    if K != K2:
        raise ValueError(
            f"matmul: reduction sizes differ: A {A.shape} (transpose_a={transpose_a}) and "
            f"B {B.shape} (transpose_b={transpose_b})"
        )
    k = reduce_axis((0, K), name="k")

    def body(i, j):
        a = A[k, i] if transpose_a else A[i, k]
        b = B[j, k] if transpose_b else B[k, j]
        return te_sum(to_dtype(a, out_dtype) * to_dtype(b, out_dtype), axis=k)

    name = name or "T_matmul_" + _suffix(transpose_a, transpose_b)
    return compute((M, N), body, name=name, tag="matmul")


def batch_matmul(
    A: Tensor,
    B: Tensor,
    transpose_a: bool = False,
    transpose_b: bool = False,
    out_dtype: str | None = None,
    name: str | None = None,
) -> Tensor:
    """Batched ``op(A) @ op(B)`` of 3-D tensors; a batch of 1 broadcasts.

    Unlike TVM's ``topi.nn.batch_matmul``, ``transpose_b`` defaults to False (numpy's
    ``A @ B``).
    """
    check_tensor(A, "batch_matmul", "A", ndim=3)
    check_tensor(B, "batch_matmul", "B", ndim=3)
    ba, bb = A.shape[0], B.shape[0]
    if ba != bb and 1 not in (ba, bb):
        raise ValueError(f"batch_matmul: batch sizes of A {A.shape} and B {B.shape} differ")
    M, K = (A.shape[2], A.shape[1]) if transpose_a else A.shape[1:]
    K2, N = (B.shape[2], B.shape[1]) if transpose_b else B.shape[1:]
    if K != K2:
        raise ValueError(
            f"batch_matmul: reduction sizes differ: A {A.shape} (transpose_a={transpose_a}) "
            f"and B {B.shape} (transpose_b={transpose_b})"
        )
    k = reduce_axis((0, K), name="k")

    def body(b, i, j):
        a_b = 0 if ba == 1 else b
        b_b = 0 if bb == 1 else b
        a = A[a_b, k, i] if transpose_a else A[a_b, i, k]
        w = B[b_b, j, k] if transpose_b else B[b_b, k, j]
        return te_sum(to_dtype(a, out_dtype) * to_dtype(w, out_dtype), axis=k)

    name = name or "T_batch_matmul_" + _suffix(transpose_a, transpose_b)
    return compute((max(ba, bb), M, N), body, name=name, tag="batch_matmul")


def dense(
    X: Tensor,
    W: Tensor,
    bias: Tensor | None = None,
    out_dtype: str | None = None,
    name: str = "T_dense",
) -> Tensor:
    """``X @ W.T (+ bias)`` with ``W`` of shape ``[out, in]`` as in TVM; bias is its own block."""
    check_tensor(X, "dense", "X", ndim=2)
    check_tensor(W, "dense", "W", ndim=2)
    if X.shape[1] != W.shape[1]:
        raise ValueError(
            f"dense: X {X.shape} has {X.shape[1]} input features but W {W.shape} (out, in) "
            f"expects {W.shape[1]}"
        )
    k = reduce_axis((0, X.shape[1]), name="k")
    out = compute(
        (X.shape[0], W.shape[0]),
        lambda i, j: te_sum(to_dtype(X[i, k], out_dtype) * to_dtype(W[j, k], out_dtype), axis=k),
        name=name,
        tag="dense",
        attrs=layout_free(W),
    )
    return out if bias is None else bias_add(out, bias, axis=-1)
