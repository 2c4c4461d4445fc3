"""More reductions: product, L1/L2 norms, sum of squares, log-sum(-exp), arg max/min,
log_softmax and instance normalisation (several blocks where topi makes several)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...tir import op as _op
from ...tir.expr import PrimExpr, cast, const
from ..tensor import Tensor, comm_reducer, compute, reduce_axis
from ..tensor import max as te_max
from ..tensor import min as te_min
from ..tensor import sum as te_sum
from ._util import check_tensor, normalize_axis

te_prod = comm_reducer(lambda a, b: a * b, lambda t: const(1, t), name="prod")


def _plan(x: Tensor, axes: Sequence[int] | None, keepdims: bool, op: str):
    axes = sorted(
        {normalize_axis(a, x.ndim, op) for a in (range(x.ndim) if axes is None else axes)}
    )
    kept = [d for d in range(x.ndim) if d not in axes]
    shape = (
        tuple(1 if d in axes else x.shape[d] for d in range(x.ndim))
        if keepdims
        else tuple(x.shape[d] for d in kept)
    )
    return axes, kept, shape


def _reduce_block(
    x: Tensor,
    axes: list[int],
    kept: list[int],
    shape: tuple[int, ...],
    keepdims: bool,
    reducer,
    value: Callable[[tuple, tuple], PrimExpr],
    name: str,
) -> Tensor:
    """``reducer`` over ``axes`` of ``value(out_index, x_index)``."""
    raxes = [reduce_axis((0, x.shape[a]), name=f"k{i}") for i, a in enumerate(axes)]

    def body(*idx):
        out_kept = [idx[d] for d in kept] if keepdims else list(idx)
        full: list = [None] * x.ndim
        for d, i in zip(kept, out_kept):
            full[d] = i
        for a, r in zip(axes, raxes):
            full[a] = r.var
        return reducer(value(idx, tuple(full)), axis=raxes)

    return compute(shape, body, name=name, tag=f"reduce_{reducer.name}")


KINDS = ("prod", "l1", "l2", "sum_square", "log_sum", "log_sum_exp")


def reduce_ext(
    x: Tensor, kind: str, axes: Sequence[int] | None = None, keepdims: bool = False
) -> Tensor:
    """Reduce ``x`` over ``axes`` (all when None): ``prod``, ``l1`` (sum of ``|x|``),
    ``l2`` (``sqrt`` of the sum of squares), ``sum_square``, ``log_sum`` (``log`` of the
    sum) or ``log_sum_exp`` (stable: the max is subtracted first)."""
    check_tensor(x, "reduce", "x")
    if kind not in KINDS:
        raise ValueError(f"reduce: kind {kind!r} is not one of {', '.join(KINDS)}")
    axes_, kept, shape = _plan(x, axes, keepdims, f"reduce_{kind}")
    name = f"T_reduce_{kind}"

    def red(reducer, value, nm):
        return _reduce_block(x, axes_, kept, shape, keepdims, reducer, value, nm)

    if kind == "prod":
        return red(te_prod, lambda o, i: x[i], name)
    if kind == "l1":
        return red(te_sum, lambda o, i: _op.abs(x[i]), name)
    if kind in ("l2", "sum_square"):
        s = red(te_sum, lambda o, i: x[i] * x[i], name + ("_sum" if kind == "l2" else ""))
        if kind == "sum_square":
            return s
        return compute(shape, lambda *o: _op.sqrt(s[o]), name=name, tag="elemwise")
    if kind == "log_sum":
        s = red(te_sum, lambda o, i: x[i], name + "_sum")
        return compute(shape, lambda *o: _op.log(s[o]), name=name, tag="elemwise")
    # log_sum_exp
    m = red(te_max, lambda o, i: x[i], name + "_max")

    s = red(te_sum, lambda o, i: _op.exp(x[i] - m[o]), name + "_sum")
    return compute(shape, lambda *o: _op.log(s[o]) + m[o], name=name, tag="elemwise")


def arg_reduce(
    x: Tensor,
    kind: str,
    axis: int,
    keepdims: bool = True,
    select_last_index: bool = False,
    name: str | None = None,
) -> Tensor:
    """The int64 index of the max (``kind="max"``) or min along ``axis``: the first such
    index, or the last with ``select_last_index``. Two blocks: the extreme value, then
    the extreme index among the positions holding it."""
    check_tensor(x, "arg_reduce", "x")
    if kind not in ("max", "min"):
        raise ValueError(f"arg_reduce: kind {kind!r} is not max or min")
    axis = normalize_axis(axis, x.ndim, f"arg{kind}")
    axes, kept, shape = _plan(x, [axis], keepdims, f"arg{kind}")
    nm = name or f"T_arg{kind}"
    best = _reduce_block(
        x, axes, kept, shape, keepdims, te_max if kind == "max" else te_min,
        lambda o, i: x[i], nm + "_value",
    )  # fmt: skip
    n = x.shape[axis]

    def index(o: tuple, i: tuple) -> PrimExpr:
        k = cast("int64", i[axis])
        miss = const(-1 if select_last_index else n, "int64")
        return _op.if_then_else(x[i] == best[o], k, miss)

    return _reduce_block(
        x, axes, kept, shape, keepdims, te_max if select_last_index else te_min, index, nm
    )


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """``x - max - log(sum(exp(x - max)))`` along ``axis``: ``T_log_softmax_maxelem``,
    ``T_log_softmax_expsum``, ``T_log_softmax``."""
    check_tensor(x, "log_softmax", "x")
    axis = normalize_axis(axis, x.ndim, "log_softmax")
    axes, kept, shape = _plan(x, [axis], False, "log_softmax")
    m = _reduce_block(
        x, axes, kept, shape, False, te_max, lambda o, i: x[i], "T_log_softmax_maxelem"
    )
    s = _reduce_block(
        x, axes, kept, shape, False, te_sum, lambda o, i: _op.exp(x[i] - m[o]),
        "T_log_softmax_expsum",
    )  # fmt: skip

    def out(*i):
        k = tuple(i[d] for d in kept)
        return x[i] - m[k] - _op.log(s[k])

    return compute(x.shape, out, name="T_log_softmax", tag="log_softmax")


def instance_norm(
    x: Tensor,
    gamma: Tensor | None,
    beta: Tensor | None,
    axis: int = 1,
    epsilon: float = 1e-5,
) -> Tensor:
    """``(x - mean) / sqrt(var + epsilon) * gamma + beta`` with mean and variance over
    every axis but 0 (the batch) and ``axis`` (the channels, 1 in NCHW, as ONNX's
    InstanceNormalization); ``gamma``/``beta`` are 1-D, one value per channel. Three
    blocks: the sum, the sum of squared deviations, the normalisation."""
    check_tensor(x, "instance_norm", "x")
    if x.ndim < 3:
        raise ValueError(f"instance_norm: input {x.shape} has no spatial axes")
    axis = normalize_axis(axis, x.ndim, "instance_norm")
    if axis == 0:
        raise ValueError("instance_norm: the channel axis cannot be the batch axis 0")
    c = x.shape[axis]
    for t, what in ((gamma, "gamma"), (beta, "beta")):
        if t is not None and (check_tensor(t, "instance_norm", what).shape != (c,)):
            raise ValueError(f"instance_norm: {what} {t.shape} is not ({c},) for {x.shape}")
    axes = [d for d in range(1, x.ndim) if d != axis]
    kept = [0, axis]
    shape = (x.shape[0], c)
    count = 1
    for a in axes:
        count *= x.shape[a]
    inv_n = const(1.0 / count, x.dtype)
    total = _reduce_block(
        x, axes, kept, shape, False, te_sum, lambda o, i: x[i], "T_instance_norm_sum"
    )
    var = _reduce_block(
        x, axes, kept, shape, False, te_sum,
        lambda o, i: (x[i] - total[o] * inv_n) * (x[i] - total[o] * inv_n),
        "T_instance_norm_var",
    )  # fmt: skip

    def out(*i):
        k = (i[0], i[axis])
        y = (x[i] - total[k] * inv_n) * _op.rsqrt(var[k] * inv_n + const(epsilon, x.dtype))
        if gamma is not None:
            y = y * gamma[i[axis]]
        if beta is not None:
            y = y + beta[i[axis]]
        return y

    return compute(x.shape, out, name="T_instance_norm", tag="instance_norm")


def cumsum(
    x: Tensor, axis: int, exclusive: bool = False, reverse: bool = False, name="T_cumsum"
) -> Tensor:
    """The running sum along ``axis`` (ONNX's CumSum): ``out[i] = sum(x[k] for k <= i)``
    (``k < i`` when ``exclusive``; from the end when ``reverse``). One reduction block
    over the whole axis (quadratic in its length: meant for short axes)."""
    check_tensor(x, "cumsum", "x")
    axis = normalize_axis(axis, x.ndim, "cumsum")
    k = reduce_axis((0, x.shape[axis]), name="k")
    zero = const(0, x.dtype)

    def body(*idx):
        i = idx[axis]
        if reverse:
            cond = k.var > i if exclusive else k.var >= i
        else:
            cond = k.var < i if exclusive else k.var <= i
        src = tuple(k.var if d == axis else v for d, v in enumerate(idx))
        return te_sum(_op.if_then_else(cond, x[src], zero), axis=k)

    return compute(x.shape, body, name=name, tag="reduce_sum,cumsum")
