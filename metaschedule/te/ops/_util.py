"""Argument normalisation shared by the operators."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ...tir import op as _op
from ...tir.expr import PrimExpr, cast
from ..tensor import PlaceholderOp, Tensor


def named(names: Sequence[str], fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn(*indices)`` presented to ``compute`` with parameters called ``names``.

    ``compute`` names loop variables after the parameters of its ``fcompute``; this
    gives readable loops (``nn, yy, xx, ff``) to bodies written for any rank.
    """

    def f(*indices):
        return fn(*indices)

    f.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names]
    )
    return f


def check_tensor(x: Any, op: str, arg: str, ndim: int | None = None) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {arg} must be a te.Tensor, got {type(x).__name__}")
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{op}: {arg} must have {ndim} dimensions, got shape {x.shape}")
    return x


def normalize_axis(axis: int, ndim: int, op: str) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"{op}: axis {axis} is out of range for a tensor of rank {ndim}")
    return axis % ndim


def int_tuple(value: int | Sequence[int], n: int, op: str, what: str) -> tuple[int, ...]:
    """``value`` as ``n`` ints: one int repeats, a sequence must have length ``n``."""
    if isinstance(value, int):
        out = (value,) * n
    else:
        out = tuple(int(v) for v in value)
        if len(out) != n:
            raise ValueError(f"{op}: {what} needs 1 or {n} values, got {tuple(value)}")
    return out


def positive_tuple(value: int | Sequence[int], n: int, op: str, what: str) -> tuple[int, ...]:
    out = int_tuple(value, n, op, what)
    if any(v <= 0 for v in out):
        raise ValueError(f"{op}: {what} must be positive, got {out}")
    return out


def pad_tuple(
    padding: int | str | Sequence[int],
    kernel: Sequence[int],
    dilation: Sequence[int],
    op: str,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(pads before, pads after) per spatial dimension.

    ``padding`` is an int, ``"VALID"``, ``"SAME"`` (TVM's: total ``dilated_kernel - 1``,
    the odd one after), one int per dimension (symmetric), or 2*ndim ints: all the
    befores then all the afters (``(top, left, bottom, right)`` in 2-D).
    """
    n = len(kernel)
    if isinstance(padding, str):
        if padding.upper() == "VALID":
            return (0,) * n, (0,) * n
        if padding.upper() == "SAME":
            total = [(k - 1) * d for k, d in zip(kernel, dilation)]
            return tuple(t // 2 for t in total), tuple(t - t // 2 for t in total)
        raise ValueError(f"{op}: padding {padding!r} is not 'SAME' or 'VALID'")
    if isinstance(padding, int):
        pads = (padding,) * (2 * n)
    else:
        pads = tuple(int(p) for p in padding)
        if len(pads) == n:
            pads = pads + pads
        elif len(pads) != 2 * n:
            raise ValueError(f"{op}: padding needs 1, {n} or {2 * n} values, got {tuple(padding)}")
    if any(p < 0 for p in pads):
        raise ValueError(f"{op}: padding must be non-negative, got {pads}")
    return pads[:n], pads[n:]


def window_index(o: PrimExpr, r: PrimExpr, stride: int, dilation: int) -> PrimExpr:
    """Input index ``o * stride + r * dilation`` of a sliding window (output ``o``, window
    position ``r``), without multiplications by 1."""
    return (o * stride if stride != 1 else o) + (r * dilation if dilation != 1 else r)


def window_count(
    size: int, k: int, stride: int, dilation: int, lo: int, hi: int, ceil_mode: bool = False
) -> int | None:
    """How many windows of ``k`` taps ``dilation`` apart, ``stride`` apart, fit in an input
    of ``size`` padded by ``lo`` and ``hi``; None when not even one does. With
    ``ceil_mode`` a last partial window counts when it starts inside the input or the
    leading padding (as in TVM's pooling)."""
    span = size + lo + hi - dilation * (k - 1) - 1
    if span < 0:
        return None
    n = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (n - 1) * stride >= size + lo:
        n -= 1
    return n


def to_dtype(value: PrimExpr, dtype: str | None) -> PrimExpr:
    return value if dtype is None else cast(dtype, value)


def spread_source(coords, lo, spread, strides):
    """Where a transposed convolution's padded, stride-spread input reads from: for each
    coordinate ``i`` (border ``lo``, spread extent ``sp``, stride ``st``), the conditions
    under which ``i`` hits an input element and that element's index. Returns
    ``(conds, src)``; the caller reads the input at ``src`` when all ``conds`` hold."""
    conds, src = [], []
    for i, low, sp, st in zip(coords, lo, spread, strides):
        j = i - low if low else i
        if low:
            conds.append(i >= low)
        conds.append(i < low + sp)
        if st != 1:
            conds.append(_op.floormod(j, st) == 0)
            j = _op.floordiv(j, st)
        src.append(j)
    return conds, src


def layout_free(*weights: Tensor) -> dict[str, Any]:
    """``te.compute`` attrs marking the weights that are placeholders as layout-free (TVM's
    ``layout_free_placeholders``, as x86 topi marks conv2d and dense kernels): RewriteLayout
    may then have the function take them pre-packed."""
    free = [w for w in weights if isinstance(w.op, PlaceholderOp)]
    return {"layout_free_placeholders": free} if free else {}
