"""Indexing operators: concatenate, strided_slice, take, broadcast_to, where, cast."""

from __future__ import annotations

from collections.abc import Sequence

from ...tir import op as _op
from ...tir.expr import PrimExpr, const
from ...tir.expr import cast as _cast
from ..tensor import Tensor, compute
from ._util import check_tensor, normalize_axis
from .elemwise import broadcast_load, broadcast_shape


def concatenate(xs: Sequence[Tensor], axis: int = 0, name: str = "T_concat") -> Tensor:
    """Join tensors along ``axis``: one block selecting the source by the index."""
    xs = [check_tensor(x, "concatenate", f"xs[{i}]") for i, x in enumerate(xs)]
    if not xs:
        raise ValueError("concatenate: no tensors")
    axis = normalize_axis(axis, xs[0].ndim, "concatenate")
    for x in xs[1:]:
        if x.ndim != xs[0].ndim or any(
            a != b for d, (a, b) in enumerate(zip(x.shape, xs[0].shape)) if d != axis
        ):
            raise ValueError(f"concatenate: shapes {[t.shape for t in xs]} differ off axis {axis}")
    offsets = [0]
    for x in xs:
        offsets.append(offsets[-1] + x.shape[axis])
    shape = tuple(offsets[-1] if d == axis else s for d, s in enumerate(xs[0].shape))

    def body(*idx):
        i = idx[axis]
        value = None
        for x, off in zip(xs, offsets):
            src = tuple(i - off if d == axis and off else v for d, v in enumerate(idx))
            load = x[src]
            value = load if value is None else _op.if_then_else(i >= off, load, value)
        return value

    return compute(shape, body, name=name, tag="injective")


def strided_slice(
    x: Tensor,
    begin: Sequence[int],
    end: Sequence[int],
    strides: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    name: str = "T_strided_slice",
) -> Tensor:
    """``x[begin:end:stride]`` on ``axes`` (all by default), numpy's clamping rules."""
    check_tensor(x, "strided_slice", "x")
    axes = (
        list(range(len(begin)))
        if axes is None
        else [normalize_axis(a, x.ndim, "strided_slice") for a in axes]
    )
    strides = [1] * len(axes) if strides is None else list(strides)
    starts = [0] * x.ndim
    steps = [1] * x.ndim
    shape = list(x.shape)
    for a, b, e, s in zip(axes, begin, end, strides):
        if s == 0:
            raise ValueError("strided_slice: a stride of 0")
        start, _, step = slice(b, e, s).indices(x.shape[a])
        shape[a] = len(range(*slice(b, e, s).indices(x.shape[a])))
        starts[a], steps[a] = start, step

    def body(*idx):
        return x[tuple(i * st + b if (st != 1 or b) else i for i, b, st in zip(idx, starts, steps))]

    return compute(tuple(shape), body, name=name, tag="injective")


def take(data: Tensor, indices: Tensor | int, axis: int = 0, name: str = "T_take") -> Tensor:
    """``numpy.take(data, indices, axis)``; negative indices count from the end."""
    check_tensor(data, "take", "data")
    axis = normalize_axis(axis, data.ndim, "take")
    n = data.shape[axis]
    if isinstance(indices, int):
        ishape: tuple[int, ...] = ()
    else:
        ishape = check_tensor(indices, "take", "indices").shape
    shape = data.shape[:axis] + ishape + data.shape[axis + 1 :]
    k = len(ishape)

    def body(*idx):
        if isinstance(indices, int):
            j: PrimExpr = const(indices % n)
        else:
            j = indices[tuple(idx[axis : axis + k])]
            j = _cast("int32", j)
            j = _op.if_then_else(j < 0, j + n, j)
        src = idx[:axis] + (j,) + idx[axis + k :]
        return data[src]

    return compute(shape, body, name=name, tag="injective")


def broadcast_to(x: Tensor, shape: Sequence[int], name: str = "T_broadcast_to") -> Tensor:
    """``x`` broadcast to ``shape`` (numpy rules)."""
    check_tensor(x, "broadcast_to", "x")
    shape = broadcast_shape(x.shape, tuple(int(s) for s in shape), "broadcast_to")
    return compute(shape, lambda *idx: broadcast_load(x, idx), name=name, tag="broadcast")


def where(cond: Tensor, a: Tensor | float, b: Tensor | float, name: str = "T_where") -> Tensor:
    """``numpy.where(cond, a, b)`` with broadcasting; ``a``/``b`` may be scalars."""
    check_tensor(cond, "where", "cond")
    ref = a if isinstance(a, Tensor) else b
    if not isinstance(ref, Tensor):
        raise TypeError("where: a or b must be a te.Tensor")
    shape = cond.shape
    for t in (a, b):
        if isinstance(t, Tensor):
            shape = broadcast_shape(shape, t.shape, "where")

    def read(t, idx):
        return broadcast_load(t, idx) if isinstance(t, Tensor) else const(t, ref.dtype)

    def body(*idx):
        c = broadcast_load(cond, idx)
        if c.dtype != "bool":
            c = c != const(0, c.dtype)
        return _op.if_then_else(c, read(a, idx), read(b, idx))

    return compute(shape, body, name=name, tag="broadcast")


def cast(x: Tensor, dtype: str, name: str = "T_cast") -> Tensor:
    """``x`` converted to ``dtype`` element by element."""
    check_tensor(x, "cast", "x")
    return compute(x.shape, lambda *idx: _cast(dtype, x[idx]), name=name, tag="elemwise")
