"""Element-wise math, activation, comparison and logic operators of the graph IR
(layout-agnostic: unary maps, or numpy-broadcasting binary maps)."""

from __future__ import annotations

import numpy as np

from ..te.ops import math_ops as M
from .op import Pattern, register


def _f(x: np.ndarray, fn) -> np.ndarray:
    """``fn`` evaluated in float64 for a float array, returned in its dtype."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.asarray(fn(x.astype(np.float64))).astype(x.dtype)


def _softplus(v, beta=1.0, threshold=None):
    y = np.logaddexp(0.0, v * beta) / beta
    return y if threshold is None else np.where(v * beta > threshold, v, y)


def _elu(v, at):
    a, s, i = at.get("alpha", 1.0), at.get("scale", 1.0), at.get("input_scale", 1.0)
    return s * np.where(v > 0, v, a * np.expm1(v * i))


def _sign(x):
    return np.sign(x).astype(x.dtype)


# name: (lower(x, attrs), reference(x, attrs))
_UNARY = {
    "leaky_relu": (
        lambda x, at: M.leaky_relu(x, at.get("alpha", 0.01)),
        lambda x, at: _f(x, lambda v: np.where(v >= 0, v, v * at.get("alpha", 0.01))),
    ),
    "elu": (
        lambda x, at: M.elu(
            x, at.get("alpha", 1.0), at.get("scale", 1.0), at.get("input_scale", 1.0)
        ),
        lambda x, at: _f(x, lambda v: _elu(v, at)),
    ),
    "celu": (
        lambda x, at: M.celu(x, at.get("alpha", 1.0)),
        lambda x, at: _f(
            x,
            lambda v: (
                np.maximum(v, 0) + np.minimum(0, at.get("alpha", 1.0) * np.expm1(v / at["alpha"]))
            ),
        ),
    ),
    "softplus": (
        lambda x, at: M.softplus(x, at.get("beta", 1.0), at.get("threshold")),
        lambda x, at: _f(x, lambda v: _softplus(v, at.get("beta", 1.0), at.get("threshold"))),
    ),
    "softsign": (lambda x, at: M.softsign(x), lambda x, at: _f(x, lambda v: v / (1 + abs(v)))),
    "mish": (lambda x, at: M.mish(x), lambda x, at: _f(x, lambda v: v * np.tanh(_softplus(v)))),
    "thresholded_relu": (
        lambda x, at: M.thresholded_relu(x, at.get("alpha", 1.0)),
        lambda x, at: _f(x, lambda v: np.where(v > at.get("alpha", 1.0), v, 0.0)),
    ),
    "abs": (lambda x, at: M.abs(x), lambda x, at: np.abs(x)),
    "log": (lambda x, at: M.log(x), lambda x, at: _f(x, np.log)),
    "log1p": (lambda x, at: M.log1p_(x), lambda x, at: _f(x, np.log1p)),
    "expm1": (lambda x, at: M.expm1(x), lambda x, at: _f(x, np.expm1)),
    "reciprocal": (lambda x, at: M.reciprocal(x), lambda x, at: _f(x, lambda v: 1.0 / v)),
    "floor": (lambda x, at: M.floor(x), lambda x, at: np.floor(x)),
    "ceil": (lambda x, at: M.ceil(x), lambda x, at: np.ceil(x)),
    "round": (lambda x, at: M.round(x), lambda x, at: np.rint(x)),
    "sign": (lambda x, at: M.sign(x), lambda x, at: _sign(x)),
    "sin": (lambda x, at: M.sin(x), lambda x, at: _f(x, np.sin)),
    "cos": (lambda x, at: M.cos(x), lambda x, at: _f(x, np.cos)),
    "logical_not": (lambda x, at: M.logical_not(x), lambda x, at: np.logical_not(x)),
    "silu": (lambda x, at: M.silu(x), lambda x, at: _f(x, lambda v: v / (1 + np.exp(-v)))),
}
for _name, (_lower, _ref) in _UNARY.items():
    register(
        _name,
        Pattern.ELEMWISE,
        lambda a, at, f=_lower: f(a[0], at),
        lambda a, at, f=_ref: f(a[0], at),
    )


def _prelu_ref(a, at):
    x, s = a
    return np.where(x >= 0, x, x * s).astype(np.result_type(x, s))


register("prelu", Pattern.BROADCAST, lambda a, at: M.prelu(a[0], a[1]), _prelu_ref)

_NP_COMPARE = {
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
}
for _name, _fn in _NP_COMPARE.items():
    register(
        _name,
        Pattern.BROADCAST,
        lambda a, at, k=_name: M.compare(a[0], a[1], k),
        lambda a, at, f=_fn: np.asarray(f(a[0], a[1])),
    )

_NP_LOGIC = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}
for _kind, _fn in _NP_LOGIC.items():
    register(
        f"logical_{_kind}",
        Pattern.BROADCAST,
        lambda a, at, k=_kind: M.logical(a[0], a[1], k),
        lambda a, at, f=_fn: np.asarray(f(a[0], a[1])),
    )


def _mod_ref(a, at):
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (np.fmod if at.get("fmod", False) else np.mod)(a[0], a[1])
    return np.asarray(out).astype(np.result_type(a[0], a[1]))


register(
    "mod",
    Pattern.BROADCAST,
    lambda a, at: M.mod(a[0], a[1], bool(at.get("fmod", False))),
    _mod_ref,
)
