"""Reductions over axes: sum, mean, max, min (numpy's ``keepdims`` semantics)."""

from __future__ import annotations

from collections.abc import Sequence

from ...tir.expr import const
from ..tensor import Tensor, compute, reduce_axis
from ..tensor import max as te_max
from ..tensor import min as te_min
from ..tensor import sum as te_sum
from ._util import check_tensor, normalize_axis

_REDUCERS = {"sum": te_sum, "mean": te_sum, "max": te_max, "min": te_min}


def reduce(
    x: Tensor,
    kind: str,
    axes: Sequence[int] | None = None,
    keepdims: bool = False,
    name: str | None = None,
) -> Tensor:
    """Reduce ``x`` over ``axes`` (all when None) with ``kind`` in sum/mean/max/min.

    ``mean`` is a ``T_reduce_sum`` block followed by a division block.
    """
    check_tensor(x, "reduce", "x")
    if kind not in _REDUCERS:
        raise ValueError(f"reduce: kind {kind!r} is not one of {', '.join(_REDUCERS)}")
    axes = sorted(
        {normalize_axis(a, x.ndim, "reduce") for a in (range(x.ndim) if axes is None else axes)}
    )
    kept = [d for d in range(x.ndim) if d not in axes]
    shape = (
        tuple(1 if d in axes else x.shape[d] for d in range(x.ndim))
        if keepdims
        else tuple(x.shape[d] for d in kept)
    )
    raxes = [reduce_axis((0, x.shape[a]), name=f"k{i}") for i, a in enumerate(axes)]

    def body(*idx):
        out_kept = [idx[d] for d in kept] if keepdims else list(idx)
        full = [None] * x.ndim
        for d, i in zip(kept, out_kept):
            full[d] = i
        for a, r in zip(axes, raxes):
            full[a] = r.var
        return _REDUCERS[kind](x[tuple(full)], axis=raxes)

    base = "sum" if kind == "mean" else kind
    red = compute(
        shape,
        body,
        name=f"T_reduce_{base}" if name is None or kind == "mean" else name,
        tag=f"reduce_{base}",
    )
    if kind != "mean":
        return red
    count = 1
    for a in axes:
        count *= x.shape[a]
    inv = const(1.0 / count, x.dtype)
    return compute(shape, lambda *i: red[i] * inv, name=name or "T_reduce_mean", tag="elemwise")
