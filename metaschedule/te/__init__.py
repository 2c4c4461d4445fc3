"""Tensor expressions (TVM's ``tvm.te``): placeholder, compute, reductions, create_prim_func.

Example::

    A = te.placeholder((128, 128), name="A")
    B = te.placeholder((128, 128), name="B")
    k = te.reduce_axis((0, 128), name="k")
    C = te.compute((128, 128), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    func = te.create_prim_func([A, B, C])
"""

from ..tir.expr import cast, const
from ..tir.op import (
    abs,
    all,
    any,
    ceil,
    cos,
    erf,
    exp,
    exp2,
    fabs,
    floor,
    floordiv,
    floormod,
    if_then_else,
    log,
    log2,
    max_value,
    min_value,
    pow,
    round,
    rsqrt,
    sigmoid,
    sin,
    sqrt,
    tanh,
    trunc,
)
from . import ops
from .create_prim_func import create_prim_func
from .tensor import (
    ComputeOp,
    Operation,
    PlaceholderOp,
    Reducer,
    Tensor,
    comm_reducer,
    compute,
    max,
    min,
    placeholder,
    reduce_axis,
    sum,
    var,
)

__all__ = [
    "ComputeOp",
    "Operation",
    "PlaceholderOp",
    "Reducer",
    "Tensor",
    "abs",
    "all",
    "any",
    "cast",
    "ceil",
    "comm_reducer",
    "compute",
    "const",
    "cos",
    "create_prim_func",
    "erf",
    "exp",
    "exp2",
    "fabs",
    "floor",
    "floordiv",
    "floormod",
    "if_then_else",
    "log",
    "log2",
    "max",
    "max_value",
    "min",
    "min_value",
    "ops",
    "placeholder",
    "pow",
    "reduce_axis",
    "round",
    "rsqrt",
    "sigmoid",
    "sin",
    "sqrt",
    "sum",
    "tanh",
    "trunc",
    "var",
]
