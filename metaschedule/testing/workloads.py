"""Small workloads and inputs shared by the tests: matmul factories and seeded arrays."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import te
from ..te import Tensor, ops
from ..tir import PrimExpr, PrimFunc

#: a reduction of ``te`` (``te.sum``, ``te.max``, ...): ``reducer(value, axis=...)``
Reducer = Callable[..., PrimExpr]


def matmul_tensors(
    n: int = 16, m: int = 12, k: int = 8, *, dtype: str = "float32", reducer: Reducer | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """``C[i, j] = sum(A[i, r] * B[r, j])`` over ``r < k`` as tensors ``(A, B, C)``.

    Args:
        n, m, k: rows of ``A`` and ``C``, columns of ``B`` and ``C``, the reduction's extent.
        dtype: of the placeholders ``A`` (``n x k``) and ``B`` (``k x m``).
        reducer: the reduction (default ``te.sum``); its axis is named ``k``.
    """
    a = te.placeholder((n, k), dtype, "A")
    b = te.placeholder((k, m), dtype, "B")
    r = te.reduce_axis((0, k), "k")
    red = reducer or te.sum
    c = te.compute((n, m), lambda i, j: red(a[i, r] * b[r, j], axis=r), name="C")
    return a, b, c


def matmul(
    n: int = 16, m: int = 12, k: int = 8, *, dtype: str = "float32", reducer: Reducer | None = None
) -> PrimFunc:
    """The PrimFunc of :func:`matmul_tensors`: params ``A, B, C``, one block ``C``."""
    return te.create_prim_func(list(matmul_tensors(n, m, k, dtype=dtype, reducer=reducer)))


def matmul_relu(n: int = 16, m: int = 12, k: int = 8, *, select: bool = False) -> PrimFunc:
    """:func:`matmul` (float32) followed by ``D = max(C, 0)``: params ``A, B, D``, blocks
    ``C`` and ``D``.

    Args:
        select: write the ReLU as ``if_then_else(C > 0, C, 0)`` instead of ``max``.
    """
    a, b, c = matmul_tensors(n, m, k)
    if select:
        d = te.compute((n, m), lambda i, j: te.if_then_else(c[i, j] > 0.0, c[i, j], 0.0), name="D")
    else:
        d = te.compute((n, m), lambda i, j: te.max(c[i, j], 0.0), name="D")
    return te.create_prim_func([a, b, d])


def op_matmul(n: int = 16, m: int = 12, k: int = 8, *, dtype: str = "float32") -> PrimFunc:
    """The library's ``te.ops.matmul`` of ``A`` (``n x k``) and ``B`` (``k x m``): one block
    ``T_matmul_NN``, as the operators the tuner sees are written."""
    a = te.placeholder((n, k), dtype, "A")
    b = te.placeholder((k, m), dtype, "B")
    return te.create_prim_func([a, b, ops.matmul(a, b)])


class RandomArrays:
    """Seeded standard-normal arrays: ``rand = RandomArrays(7)``, then ``rand(3, 4)``.

    Successive calls draw from one generator, so two arrays of a shape differ and a test
    module sees the same values on every run. ``seed=`` draws one array from a fresh
    generator instead, so that a test's inputs do not depend on the tests run before it.
    """

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, *shape: int, dtype: str = "float32", seed: int | None = None) -> np.ndarray:
        rng = self.rng if seed is None else np.random.default_rng(seed)
        return rng.standard_normal(shape).astype(dtype)


def matmul_chain_model(calls: int = 3) -> Any:
    """A model of two tasks (a ``Function`` of ``ms.graph``): ``x @ w0 -> relu -> ...
    (calls times) -> @ wout``, a task ``fused_matmul_relu`` of ``calls`` calls (4x16x16) and
    a task ``matmul`` of one call (4x16x32); built with onnx.helper."""
    from onnx import TensorProto, helper, numpy_helper  # local: onnx is an extra

    from ..graph import from_onnx  # local: the graph layer is above the tests' workloads

    rng = np.random.default_rng(0)
    inits, nodes, name = [], [], "x"
    for i in range(calls):
        w = (rng.standard_normal((16, 16)) * 0.3).astype("float32")
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes += [
            helper.make_node("MatMul", [name, f"w{i}"], [f"m{i}"]),
            helper.make_node("Relu", [f"m{i}"], [f"r{i}"]),
        ]
        name = f"r{i}"
    inits.append(numpy_helper.from_array(rng.standard_normal((16, 32)).astype("float32"), "wo"))
    nodes.append(helper.make_node("MatMul", [name, "wo"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])],
        inits,
    )
    return from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
