"""Element-wise, broadcast and layout operators of the graph IR."""

from __future__ import annotations

import math

import numpy as np

from ..te import ops as T
from ..te.ops import activation as A
from ..te.ops import indexing as X
from ..tir import op as _op
from .op import Pattern, register

_SQRT1_2 = 1 / math.sqrt(2.0)


def _erf(x: np.ndarray) -> np.ndarray:
    # numpy has no erf; math.erf is exact to float64
    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype)


_UNARY = {
    "relu": (T.relu, lambda x: np.maximum(x, 0).astype(x.dtype)),
    "sigmoid": (T.sigmoid, lambda x: (1 / (1 + np.exp(-x))).astype(x.dtype)),
    "tanh": (T.tanh, np.tanh),
    "exp": (T.exp, np.exp),
    "erf": (A.erf, _erf),
    "sqrt": (A.sqrt, np.sqrt),
    "negative": (A.negative, np.negative),
    "gelu": (A.gelu_erf, lambda x: (x * 0.5 * (1 + _erf(x * _SQRT1_2))).astype(x.dtype)),
    "gelu_tanh": (
        T.gelu,
        lambda x: (0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))).astype(
            x.dtype
        ),
    ),
    "hard_swish": (A.hard_swish, lambda x: (x * np.clip(x / 6 + 0.5, 0, 1)).astype(x.dtype)),
}
for _name, (_lower, _ref) in _UNARY.items():
    register(
        _name, Pattern.ELEMWISE, lambda a, at, f=_lower: f(a[0]), lambda a, at, f=_ref: f(a[0])
    )

register(
    "clip",
    Pattern.ELEMWISE,
    lambda a, at: A.clip(a[0], at.get("min"), at.get("max")),
    lambda a, at: np.clip(a[0], at.get("min"), at.get("max")).astype(a[0].dtype),
)
register(
    "hard_sigmoid",
    Pattern.ELEMWISE,
    lambda a, at: A.hard_sigmoid(a[0], at["alpha"], at["beta"]),
    lambda a, at: np.clip(a[0] * at["alpha"] + at["beta"], 0, 1).astype(a[0].dtype),
)
register(
    "cast",
    Pattern.ELEMWISE,
    lambda a, at: X.cast(a[0], at["dtype"]),
    lambda a, at: a[0].astype(at["dtype"]),
)


def _np_binary(f):
    def ref(a, at):
        x, y = a
        out = f(x, y)
        return np.asarray(out).astype(np.result_type(x, y) if f is not np.true_divide else x.dtype)

    return ref


def _int_div(x, y):
    if np.issubdtype(np.result_type(x, y), np.integer):
        return np.trunc(x / y).astype(np.result_type(x, y))
    return x / y


_BINARY = {
    "add": (T.add, np.add),
    "subtract": (T.subtract, np.subtract),
    "multiply": (T.multiply, np.multiply),
    "divide": (T.divide, _int_div),
    "maximum": (T.maximum, np.maximum),
    "minimum": (T.minimum, np.minimum),
    "power": (A.power, np.power),
}
for _name, (_lower, _ref) in _BINARY.items():
    register(_name, Pattern.BROADCAST, lambda a, at, f=_lower: f(a[0], a[1]), _np_binary(_ref))

register(
    "where",
    Pattern.BROADCAST,
    lambda a, at: X.where(a[0], a[1], a[2]),
    lambda a, at: np.where(a[0], a[1], a[2]).astype(np.result_type(a[1], a[2])),
)

# ----------------------------------------------------------------------------- layout
register(
    "reshape",
    Pattern.INJECTIVE,
    lambda a, at: T.reshape(a[0], at["shape"]),
    lambda a, at: a[0].reshape(at["shape"]),
)
register(
    "transpose",
    Pattern.INJECTIVE,
    lambda a, at: T.transpose(a[0], at["axes"]),
    lambda a, at: np.ascontiguousarray(np.transpose(a[0], at["axes"])),
)
register(
    "concat",
    Pattern.INJECTIVE,
    lambda a, at: X.concatenate(a, at["axis"]),
    lambda a, at: np.concatenate(a, axis=at["axis"]),
)
register(
    "broadcast_to",
    Pattern.BROADCAST,
    lambda a, at: X.broadcast_to(a[0], at["shape"]),
    lambda a, at: np.ascontiguousarray(np.broadcast_to(a[0], at["shape"])),
)


def _slice_ref(a, at):
    x = a[0]
    idx = [slice(None)] * x.ndim
    for ax, b, e, s in zip(at["axes"], at["begin"], at["end"], at["strides"]):
        idx[ax] = slice(b, e, s)
    return np.ascontiguousarray(x[tuple(idx)])


register(
    "strided_slice",
    Pattern.INJECTIVE,
    lambda a, at: X.strided_slice(a[0], at["begin"], at["end"], at["strides"], at["axes"]),
    _slice_ref,
)


def _take_ref(a, at):
    n = a[0].shape[at["axis"]]
    idx = np.where(a[1] < 0, a[1] + n, a[1])
    return np.take(a[0], idx, axis=at["axis"])


register("take", Pattern.INJECTIVE, lambda a, at: X.take(a[0], a[1], at["axis"]), _take_ref)


register(
    "rsqrt",
    Pattern.ELEMWISE,
    lambda a, at: A.unary(a[0], _op.rsqrt, "T_rsqrt"),
    lambda a, at: (1 / np.sqrt(a[0])).astype(a[0].dtype),
)
