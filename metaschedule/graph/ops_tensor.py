"""Element-wise, broadcast and layout operators of the graph IR."""

from __future__ import annotations

import math

import numpy as np

from ..te import ops as T
from ..te.ops import activation as A
from ..te.ops import indexing as X
from ..tir import op as _op
from ..tir.expr import PrimExpr, const
from .op import Pattern, register

_SQRT1_2 = 1 / math.sqrt(2.0)


def _erf(x: np.ndarray) -> np.ndarray:
    # numpy has no erf; math.erf is exact to float64
    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype)


#: erf(x) ~= x * P(x^2) / Q(x^2) on [-4, 4] (clamped outside, where float32 erf is +-1):
#: our own least-squares rational fit (degrees 6 and 4 in x^2, Lawson reweighting on
#: 4001 points against math.erf); max error 9e-8 in float64, 4e-7 evaluated in float32
_ERF_P = (
    1.1283785127,
    0.22477253536,
    0.05390988496,
    0.0047553667425,
    0.00016658907337,
    -2.0299471816e-06,
    1.89353453e-08,
)
_ERF_Q = (1.0, 0.53252518501, 0.12531316527, 0.016494381291, 0.0012097150107)


def _horner(coefs: tuple[float, ...], t: PrimExpr, dtype: str) -> PrimExpr:
    acc: PrimExpr = const(coefs[-1], dtype)
    for c in reversed(coefs[:-1]):
        acc = acc * t + const(c, dtype)
    return acc


def erf_rational(v: PrimExpr) -> PrimExpr:
    """erf as arithmetic only (vectorizes, unlike a call to libm's erff per lane); exact
    ``erf`` for dtypes other than float32."""
    if v.dtype != "float32":
        return _op.erf(v)
    x = _op.min(_op.max(v, const(-4.0, v.dtype)), const(4.0, v.dtype))
    t = x * x
    return x * _horner(_ERF_P, t, v.dtype) / _horner(_ERF_Q, t, v.dtype)


def _erf_lower(x):
    return A.unary(x, erf_rational, "T_erf")


def _gelu_lower(x):
    """Exact GELU ``0.5 x (1 + erf(x / sqrt(2)))`` with :func:`erf_rational`."""
    return A.unary(
        x,
        lambda v: (
            v
            * const(0.5, x.dtype)
            * (erf_rational(v * const(_SQRT1_2, x.dtype)) + const(1.0, x.dtype))
        ),
        "T_gelu",
    )


_UNARY = {
    "relu": (T.relu, lambda x: np.maximum(x, 0).astype(x.dtype)),
    "sigmoid": (T.sigmoid, lambda x: (1 / (1 + np.exp(-x))).astype(x.dtype)),
    "tanh": (T.tanh, np.tanh),
    "exp": (T.exp, np.exp),
    "erf": (_erf_lower, _erf),
    "sqrt": (A.sqrt, np.sqrt),
    "negative": (A.negative, np.negative),
    "gelu": (_gelu_lower, lambda x: (x * 0.5 * (1 + _erf(x * _SQRT1_2))).astype(x.dtype)),
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


# ----------------------------------------------------------------------------- more layout
# (pad with modes, resize, tile, depth/space; appended: see te.ops.rearrange/resize)
from ..te.ops import rearrange as _RA  # noqa: E402
from ..te.ops import resize as _RS  # noqa: E402

_NP_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge"}


def _pad_ref(a, at):
    x = a[0]
    width = list(zip(at["before"], at["after"]))
    if at["mode"] == "constant":
        return np.pad(x, width, constant_values=np.asarray(at.get("value", 0.0), x.dtype))
    return np.pad(x, width, mode=_NP_PAD_MODES[at["mode"]])


register(
    "pad",
    Pattern.INJECTIVE,
    lambda a, at: _RA.pad_mode(a[0], at["before"], at["after"], at["mode"], at.get("value", 0.0)),
    _pad_ref,
)


def _resize_axis(n: int, m: int, scale: float, at) -> tuple[np.ndarray, ...]:
    """Per output index of one axis: the source indices and weights (float32, as te)."""
    f32 = np.float32
    i = np.arange(m, dtype=f32)
    cmode = at["coordinate_transformation_mode"]
    inv, half = f32(1.0 / scale), f32(0.5)
    if cmode == "asymmetric":
        c = i * inv
    elif cmode == "half_pixel" or (cmode == "pytorch_half_pixel" and m > 1):
        c = (i + half) * inv - half
    elif cmode == "half_pixel_symmetric":
        c = f32(n / 2.0 * (1 - m / (scale * n))) + (i + half) * inv - half
    elif cmode == "align_corners" and m > 1:
        c = i * f32((n - 1) / (m - 1))
    else:
        c = np.zeros(m, f32)
    if at["mode"] == "nearest":
        r = {
            "floor": np.floor(c),
            "ceil": np.ceil(c),
            "round_prefer_floor": np.ceil(c - half),
            "round_prefer_ceil": np.floor(c + half),
        }[at["nearest_mode"]]
        return (np.clip(r.astype(np.int64), 0, n - 1),)
    c = np.clip(c, f32(0), f32(n - 1))
    lo = np.floor(c).astype(np.int64)
    w1 = c - np.floor(c)
    return lo, np.minimum(lo + 1, n - 1), f32(1) - w1, w1


def _resize_ref(a, at):
    x = a[0]
    out_shape, scales = at["out_shape"], at["scales"]
    y = x
    for d in range(x.ndim):
        n, m = x.shape[d], out_shape[d]
        if n == m and scales[d] == 1.0:
            continue
        tab = _resize_axis(n, m, scales[d], at)
        if len(tab) == 1:
            y = np.take(y, tab[0], axis=d)
        else:
            lo, hi, w0, w1 = tab
            shape = [1] * x.ndim
            shape[d] = m
            y = np.take(y, lo, axis=d) * w0.reshape(shape) + np.take(y, hi, axis=d) * w1.reshape(
                shape
            )
    return np.ascontiguousarray(y).astype(x.dtype)


register(
    "resize",
    Pattern.INJECTIVE,
    lambda a, at: _RS.resize(
        a[0],
        at["out_shape"],
        at["scales"],
        at["mode"],
        at["coordinate_transformation_mode"],
        at.get("nearest_mode", "round_prefer_floor"),
    ),
    _resize_ref,
)
register(
    "tile",
    Pattern.INJECTIVE,
    lambda a, at: _RA.tile(a[0], at["repeats"]),
    lambda a, at: np.tile(a[0], at["repeats"]),
)


def _d2s_ref(a, at):
    x = a[0]
    N, C, H, W = x.shape
    b = at["block"]
    if at.get("mode", "DCR") == "DCR":
        y = x.reshape(N, b, b, C // (b * b), H, W).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(N, C // (b * b), b, b, H, W).transpose(0, 1, 4, 2, 5, 3)
    return np.ascontiguousarray(y.reshape(N, C // (b * b), H * b, W * b))


def _s2d_ref(a, at):
    x = a[0]
    N, C, H, W = x.shape
    b = at["block"]
    y = x.reshape(N, C, H // b, b, W // b, b).transpose(0, 3, 5, 1, 2, 4)
    return np.ascontiguousarray(y.reshape(N, C * b * b, H // b, W // b))


register(
    "depth_to_space",
    Pattern.INJECTIVE,
    lambda a, at: _RA.depth_to_space(a[0], at["block"], at.get("mode", "DCR")),
    _d2s_ref,
)
register(
    "space_to_depth",
    Pattern.INJECTIVE,
    lambda a, at: _RA.space_to_depth(a[0], at["block"]),
    _s2d_ref,
)


def _trilu_ref(a, at):
    fn = np.triu if at["upper"] else np.tril
    return np.ascontiguousarray(fn(a[0], at["k"]))


register(
    "trilu",
    Pattern.INJECTIVE,
    lambda a, at: _RA.trilu(a[0], at["upper"], at["k"]),
    _trilu_ref,
)


def _gather_elements_ref(a, at):
    data, idx = a
    ax = at["axis"]
    n = data.shape[ax]
    # the output has the indices' shape (take_along_axis would broadcast them instead)
    data = data[tuple(slice(None) if d == ax else slice(0, s) for d, s in enumerate(idx.shape))]
    return np.take_along_axis(data, np.where(idx < 0, idx + n, idx), axis=ax)


register(
    "gather_elements",
    Pattern.INJECTIVE,
    lambda a, at: _RA.gather_elements(a[0], a[1], at["axis"]),
    _gather_elements_ref,
)
