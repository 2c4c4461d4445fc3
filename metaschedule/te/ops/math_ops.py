"""Element-wise math, activations, comparisons and logic (ONNX's and ATen's element-wise
operators beyond :mod:`.elemwise` and :mod:`.activation`).

Unary operators are one element-wise block; binary ones broadcast as numpy does (either
side may be a Python number). Comparisons and logic produce ``bool`` tensors.
"""

from __future__ import annotations

from collections.abc import Callable

from ...tir import op as _op
from ...tir.dtype import is_float
from ...tir.expr import PrimExpr, const
from ..tensor import Tensor
from .activation import unary
from .elemwise import Operand, _binary


def _c(v: float, dtype: str) -> PrimExpr:
    return const(v, dtype)


def log1p(v: PrimExpr) -> PrimExpr:
    """``log(1 + v)`` accurate for small ``v`` (``u * log(w) / (w - 1)`` with ``w = 1 + u``,
    exact where ``w`` rounds to 1): arithmetic and one ``log``, so it vectorizes."""
    one = _c(1.0, v.dtype)
    w = v + one
    safe = _op.if_then_else(w == one, _c(2.0, v.dtype), w)
    return _op.if_then_else(w == one, v, _op.log(safe) * v / (safe - one))


def expm1_expr(v: PrimExpr) -> PrimExpr:
    """``exp(v) - 1`` accurate for small ``v`` (``(u - 1) * v / log(u)`` with ``u = exp(v)``,
    exact where ``u`` rounds to 1 or ``u - 1`` to -1)."""
    one = _c(1.0, v.dtype)
    u = _op.exp(v)
    um1 = u - one
    safe = _op.if_then_else(u == one, _c(2.0, v.dtype), u)
    general = _op.if_then_else(um1 == _c(-1.0, v.dtype), um1, um1 * v / _op.log(safe))
    return _op.if_then_else(u == one, v, general)


def softplus_expr(v: PrimExpr) -> PrimExpr:
    """``log(1 + exp(v))`` without overflow: ``max(v, 0) + log1p(exp(-|v|))``."""
    return _op.max(v, _c(0.0, v.dtype)) + log1p(_op.exp(_c(0.0, v.dtype) - _op.fabs(v)))


def leaky_relu(x: Tensor, alpha: float = 0.01, name: str = "T_leaky_relu") -> Tensor:
    """``x`` where ``x >= 0``, else ``alpha * x``."""
    return unary(x, lambda v: _op.if_then_else(v >= _c(0.0, x.dtype), v, v * alpha), name)


def elu(
    x: Tensor, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0, name="T_elu"
) -> Tensor:
    """``scale * (x if x > 0 else alpha * (exp(input_scale * x) - 1))`` (ATen's elu; ONNX's
    Elu with ``scale = input_scale = 1``, Selu with ``scale = gamma``)."""

    def f(v: PrimExpr) -> PrimExpr:
        neg = (_op.exp(v * input_scale if input_scale != 1.0 else v) - _c(1.0, x.dtype)) * alpha
        y = _op.if_then_else(v > _c(0.0, x.dtype), v, neg)
        return y * scale if scale != 1.0 else y

    return unary(x, f, name)


def celu(x: Tensor, alpha: float = 1.0, name: str = "T_celu") -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""

    def f(v):
        neg = (_op.exp(v * (1.0 / alpha)) - _c(1.0, x.dtype)) * alpha
        return _op.max(v, _c(0.0, x.dtype)) + _op.min(neg, _c(0.0, x.dtype))

    return unary(x, f, name)


def softplus(x: Tensor, beta: float = 1.0, threshold: float | None = None, name="T_softplus"):
    """``log(1 + exp(beta x)) / beta``; ``x`` itself where ``beta x > threshold`` (ATen)."""

    def f(v):
        y = softplus_expr(v * beta if beta != 1.0 else v)
        y = y * (1.0 / beta) if beta != 1.0 else y
        if threshold is not None:
            y = _op.if_then_else(v * beta > _c(threshold, x.dtype), v, y)
        return y

    return unary(x, f, name)


def softsign(x: Tensor, name: str = "T_softsign") -> Tensor:
    return unary(x, lambda v: v / (_op.fabs(v) + _c(1.0, x.dtype)), name)


def mish(x: Tensor, name: str = "T_mish") -> Tensor:
    """``x * tanh(softplus(x))``."""
    return unary(x, lambda v: v * _op.tanh(softplus_expr(v)), name)


def thresholded_relu(x: Tensor, alpha: float = 1.0, name: str = "T_thresholded_relu"):
    return unary(x, lambda v: _op.if_then_else(v > _c(alpha, x.dtype), v, _c(0.0, x.dtype)), name)


def abs(x: Tensor, name: str = "T_abs") -> Tensor:  # noqa: A001
    return unary(x, _op.abs, name)


def _float_unary(fn: Callable[[PrimExpr], PrimExpr], what: str) -> Callable[..., Tensor]:
    def f(x: Tensor, name: str = f"T_{what}") -> Tensor:
        if not is_float(x.dtype):
            raise TypeError(f"{what} needs a float tensor, got {x.name} of dtype {x.dtype}")
        return unary(x, fn, name)

    f.__name__ = what
    f.__doc__ = f"Element-wise ``{what}`` of a float tensor."
    return f


log = _float_unary(_op.log, "log")
floor = _float_unary(_op.floor, "floor")
ceil = _float_unary(_op.ceil, "ceil")
#: half to even, as ONNX's Round and ``numpy.rint``
round = _float_unary(_op.round, "round")  # noqa: A001
sin = _float_unary(_op.sin, "sin")
cos = _float_unary(_op.cos, "cos")
log1p_ = _float_unary(log1p, "log1p")
expm1 = _float_unary(expm1_expr, "expm1")


def reciprocal(x: Tensor, name: str = "T_reciprocal") -> Tensor:
    return unary(x, lambda v: _c(1.0, x.dtype) / v, name)


def sign(x: Tensor, name: str = "T_sign") -> Tensor:
    """-1, 0 or 1 after the sign of ``x`` (in ``x``'s dtype)."""

    def f(v):
        zero = _c(0, x.dtype)
        return _op.if_then_else(
            v > zero, _c(1, x.dtype), _op.if_then_else(v < zero, _c(-1, x.dtype), zero)
        )

    return unary(x, f, name)


def prelu(x: Operand, slope: Operand, name: str = "T_prelu") -> Tensor:
    """``x`` where ``x >= 0``, else ``slope * x``; ``slope`` broadcasts to ``x`` (ONNX's
    PRelu: per-channel slopes are ``[C, 1, 1]`` against NCHW data)."""
    return _binary(x, slope, lambda v, s: _op.if_then_else(v >= _c(0.0, v.dtype), v, v * s), name)


_COMPARE: dict[str, Callable[[PrimExpr, PrimExpr], PrimExpr]] = {
    "equal": lambda a, b: a == b,
    "not_equal": lambda a, b: a != b,
    "less": lambda a, b: a < b,
    "less_equal": lambda a, b: a <= b,
    "greater": lambda a, b: a > b,
    "greater_equal": lambda a, b: a >= b,
}


def compare(a: Operand, b: Operand, kind: str, name: str | None = None) -> Tensor:
    """``a <kind> b`` with broadcasting, a ``bool`` tensor; ``kind`` is one of equal,
    not_equal, less, less_equal, greater, greater_equal."""
    if kind not in _COMPARE:
        raise ValueError(f"compare: kind {kind!r} is not one of {', '.join(_COMPARE)}")
    out = _binary(a, b, _COMPARE[kind], name or f"T_{kind}")
    if out.dtype != "bool":  # pragma: no cover - comparisons are bool
        raise TypeError(f"compare {kind}: result dtype {out.dtype}")
    return out


def _as_bool(v: PrimExpr) -> PrimExpr:
    return v if v.dtype == "bool" else v != const(0, v.dtype)


_LOGIC: dict[str, Callable[[PrimExpr, PrimExpr], PrimExpr]] = {
    "and": lambda a, b: _as_bool(a) & _as_bool(b),
    "or": lambda a, b: _as_bool(a) | _as_bool(b),
    "xor": lambda a, b: _as_bool(a) != _as_bool(b),
}


def logical(a: Operand, b: Operand, kind: str, name: str | None = None) -> Tensor:
    """Element-wise ``and``/``or``/``xor`` of two bool (or nonzero-is-true) tensors."""
    if kind not in _LOGIC:
        raise ValueError(f"logical: kind {kind!r} is not one of {', '.join(_LOGIC)}")
    return _binary(a, b, _LOGIC[kind], name or f"T_logical_{kind}")


def logical_not(x: Tensor, name: str = "T_logical_not") -> Tensor:
    return unary(x, lambda v: ~_as_bool(v), name)


def _remainder(a: PrimExpr, b: PrimExpr, fmod: bool) -> PrimExpr:
    if not is_float(a.dtype):
        return a - (a / b) * b if fmod else _op.floormod(a, b)
    q = a / b
    return a - (_op.trunc(q) if fmod else _op.floor(q)) * b


def mod(a: Operand, b: Operand, fmod: bool = False, name: str = "T_mod") -> Tensor:
    """The remainder of ``a / b`` with broadcasting: with ``fmod`` C's ``fmod`` (the sign
    of ``a``: ONNX's ``Mod`` with ``fmod=1``, ATen's ``fmod``), else the floored one (the
    sign of ``b``: Python's ``%``, ONNX's integer ``Mod``, ATen's ``remainder``). Floats
    compute ``a - trunc(a / b) * b`` (``floor`` without ``fmod``), which vectorizes."""
    return _binary(a, b, lambda x, y: _remainder(x, y, fmod), name)


def silu(x: Tensor, name: str = "T_silu") -> Tensor:
    """``x * sigmoid(x)`` (SiLU, swish): one element-wise block, where the two calls that
    exporters emit would read ``x`` twice and so not fuse into its producer."""
    return unary(x, lambda v: v * _op.sigmoid(v), name)
