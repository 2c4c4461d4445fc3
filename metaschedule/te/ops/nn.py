"""Normalisations: softmax and layer_norm, as several blocks each (like topi)."""

from __future__ import annotations

from collections.abc import Sequence

from ...tir import op as _op
from ...tir.dtype import is_float
from ...tir.expr import PrimExpr, const
from ..tensor import Tensor, compute, reduce_axis
from ..tensor import max as te_max
from ..tensor import sum as te_sum
from ._util import check_tensor, normalize_axis


def _float_tensor(x: Tensor, op: str) -> None:
    check_tensor(x, op, "x")
    if not is_float(x.dtype):
        raise TypeError(f"{op} needs a float tensor, got {x.name} of dtype {x.dtype}")


def _expand(kept: Sequence[int], axes: Sequence[int], ndim: int, idx_kept, idx_red) -> tuple:
    """Interleave indices of kept dimensions and of reduced dimensions into a full index."""
    full: list = [None] * ndim
    for d, i in zip(kept, idx_kept):
        full[d] = i
    for d, i in zip(axes, idx_red):
        full[d] = i
    return tuple(full)


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``, in four blocks:
    ``T_softmax_maxelem``, ``T_softmax_exp``, ``T_softmax_expsum``, ``T_softmax_norm``."""
    _float_tensor(x, "softmax")
    axis = normalize_axis(axis, x.ndim, "softmax")
    kept = [d for d in range(x.ndim) if d != axis]
    red_shape = tuple(x.shape[d] for d in kept)

    k1 = reduce_axis((0, x.shape[axis]), name="k")
    maxelem = compute(
        red_shape,
        lambda *i: te_max(x[_expand(kept, [axis], x.ndim, i, [k1.var])], axis=k1),
        name="T_softmax_maxelem",
        tag="softmax_maxelem",
    )

    def drop(idx: tuple) -> tuple:
        return tuple(idx[d] for d in kept)

    expo = compute(
        x.shape,
        lambda *i: _op.exp(x[i] - maxelem[drop(i)]),
        name="T_softmax_exp",
        tag="softmax_exp",
    )
    k2 = reduce_axis((0, x.shape[axis]), name="k")
    expsum = compute(
        red_shape,
        lambda *i: te_sum(expo[_expand(kept, [axis], x.ndim, i, [k2.var])], axis=k2),
        name="T_softmax_expsum",
        tag="softmax_expsum",
    )
    return compute(
        x.shape, lambda *i: expo[i] / expsum[drop(i)], name="T_softmax_norm", tag="softmax_norm"
    )


def layer_norm(
    x: Tensor,
    gamma: Tensor | None,
    beta: Tensor | None,
    axis: int | Sequence[int] = -1,
    epsilon: float = 1e-5,
) -> Tensor:
    """``(x - mean) / sqrt(var + epsilon) * gamma + beta`` over ``axis`` (one or several).

    ``gamma`` and ``beta`` have the shape of the normalised dimensions (or are None).
    Three blocks: ``T_layer_norm_sum`` (the sum), ``T_layer_norm_var`` (the sum of
    squared deviations from the mean, a stable two-pass variance) and ``T_layer_norm``.
    """
    _float_tensor(x, "layer_norm")
    axes = sorted(
        {
            normalize_axis(a, x.ndim, "layer_norm")
            for a in ((axis,) if isinstance(axis, int) else axis)
        }
    )
    if not axes:
        raise ValueError("layer_norm: no axis to normalise over")
    kept = [d for d in range(x.ndim) if d not in axes]
    norm_shape = tuple(x.shape[a] for a in axes)
    for t, what in ((gamma, "gamma"), (beta, "beta")):
        if t is not None:
            check_tensor(t, "layer_norm", what)
            if t.shape != norm_shape:
                raise ValueError(
                    f"layer_norm: {what} has shape {t.shape}, expected "
                    f"{norm_shape} (the normalised dimensions of {x.shape})"
                )
    red_shape = tuple(x.shape[d] for d in kept)
    count = 1
    for s in norm_shape:
        count *= s
    inv_n = const(1.0 / count, x.dtype)

    def raxes():
        return [reduce_axis((0, s), name=f"k{n}") for n, s in enumerate(norm_shape)]

    r1 = raxes()
    total = compute(
        red_shape,
        lambda *i: te_sum(x[_expand(kept, axes, x.ndim, i, [r.var for r in r1])], axis=r1),
        name="T_layer_norm_sum",
        tag="layer_norm_sum",
    )
    r2 = raxes()

    def var_body(*i: PrimExpr) -> PrimExpr:
        dev = x[_expand(kept, axes, x.ndim, i, [r.var for r in r2])] - total[i] * inv_n
        return te_sum(dev * dev, axis=r2)

    var = compute(red_shape, var_body, name="T_layer_norm_var", tag="layer_norm_var")

    def out_body(*i: PrimExpr) -> PrimExpr:
        k = tuple(i[d] for d in kept)
        n = tuple(i[a] for a in axes)
        y = (x[i] - total[k] * inv_n) * _op.rsqrt(var[k] * inv_n + const(epsilon, x.dtype))
        if gamma is not None:
            y = y * gamma[n]
        if beta is not None:
            y = y + beta[n]
        return y

    return compute(x.shape, out_body, name="T_layer_norm", tag="layer_norm")
