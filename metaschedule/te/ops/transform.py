"""Layout operators: pad, transpose, reshape."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...tir import op as _op
from ...tir.dtype import is_float
from ...tir.expr import PrimExpr, const
from ..tensor import Tensor, compute
from ._util import check_tensor


def pad(
    data: Tensor,
    pad_before: Sequence[int],
    pad_after: Sequence[int] | None = None,
    pad_value: float = 0.0,
    name: str = "PadInput",
) -> Tensor:
    """``data`` with ``pad_value`` around it: one block with an ``if_then_else`` (as topi).

    Outside the data the index expressions point out of bounds; only the condition
    keeps them from being read.
    """
    check_tensor(data, "pad", "data")
    before = tuple(int(p) for p in pad_before)
    after = before if pad_after is None else tuple(int(p) for p in pad_after)
    if len(before) != data.ndim or len(after) != data.ndim:
        raise ValueError(
            f"pad: {data.name} has {data.ndim} dimensions but got pad_before={before}, "
            f"pad_after={after}"
        )
    if any(p < 0 for p in before + after):
        raise ValueError(f"pad: negative padding {before}, {after}")
    shape = tuple(s + b + a for s, b, a in zip(data.shape, before, after))
    fill = _fill_value(pad_value, data.dtype)

    def body(*idx: PrimExpr) -> PrimExpr:
        conds = []
        src = []
        for i, s, b, a in zip(idx, data.shape, before, after):
            if b:
                conds.append(i >= b)
            if a:
                conds.append(i < b + s)
            src.append(i - b if b else i)
        value = data[tuple(src)]
        return _op.if_then_else(_op.all(*conds), value, fill) if conds else value

    return compute(shape, body, name=name, tag="injective,pad")


def _fill_value(value: float, dtype: str) -> PrimExpr:
    if isinstance(value, PrimExpr):
        return value
    if not is_float(dtype) and math.isinf(value):
        return _op.min_value(dtype) if value < 0 else _op.max_value(dtype)
    return const(value if is_float(dtype) else int(value), dtype)


def transpose(x: Tensor, axes: Sequence[int] | None = None, name: str = "T_transpose") -> Tensor:
    """Permute the dimensions of ``x`` (reverse them when ``axes`` is None), as numpy."""
    check_tensor(x, "transpose", "x")
    n = x.ndim
    axes = (
        tuple(reversed(range(n)))
        if axes is None
        else tuple(a % n if -n <= a < n else a for a in axes)
    )
    if sorted(axes) != list(range(n)):
        raise ValueError(f"transpose: axes {axes} are not a permutation of range({n})")
    shape = tuple(x.shape[a] for a in axes)

    def body(*idx: PrimExpr) -> PrimExpr:
        src = [None] * n
        for d, a in enumerate(axes):
            src[a] = idx[d]
        return x[tuple(src)]

    return compute(shape, body, name=name, tag="injective")


def reshape(x: Tensor, newshape: Sequence[int] | int, name: str = "T_reshape") -> Tensor:
    """``x`` in a new shape with the same row-major element order; one ``-1`` is inferred."""
    check_tensor(x, "reshape", "x")
    newshape = (newshape,) if isinstance(newshape, int) else tuple(int(s) for s in newshape)
    size = math.prod(x.shape)
    if newshape.count(-1) > 1:
        raise ValueError(f"reshape: only one -1 allowed, got {newshape}")
    if -1 in newshape:
        known = math.prod(s for s in newshape if s != -1)
        if known <= 0 or size % known:
            raise ValueError(f"reshape: cannot reshape {x.shape} into {newshape}")
        newshape = tuple(size // known if s == -1 else s for s in newshape)
    if math.prod(newshape) != size:
        raise ValueError(f"reshape: cannot reshape {x.shape} ({size} elements) into {newshape}")

    def body(*idx: PrimExpr) -> PrimExpr:
        flat: PrimExpr = const(0)
        for d, (i, s) in enumerate(zip(idx, newshape)):
            flat = i if d == 0 else flat * s + i
        src = []
        stride = size
        for d, s in enumerate(x.shape):
            stride //= s
            if s == 1:
                src.append(const(0))
                continue
            e = flat if stride == 1 else _op.floordiv(flat, stride)
            src.append(e if d == 0 else _op.floormod(e, s))
        return x[tuple(src)]

    return compute(newshape, body, name=name, tag="injective")
