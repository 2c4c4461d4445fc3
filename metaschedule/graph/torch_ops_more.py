"""PyTorch (ATen) converters beyond the core set: more activations, math, comparisons
and logic, upsampling, padding, more reductions, arange and advanced indexing
(registered into :mod:`.torch_convert`'s table)."""

from __future__ import annotations

import numpy as np

from .patterns import silu_operand
from .torch_convert import _CONVERTERS, _axis, _conv
from .torch_ops import _adaptive_avg, _binary, _convolution

# ----------------------------------------------------------------------------- more operators
# (activations, math, comparison and logic, upsampling, padding, log_softmax, instance
# norm, more reductions, arange and constant advanced indexing)
for _t, _o in (
    ("aten.abs", "abs"),
    ("aten.log", "log"),
    ("aten.log1p", "log1p"),
    ("aten.expm1", "expm1"),
    ("aten.reciprocal", "reciprocal"),
    ("aten.floor", "floor"),
    ("aten.ceil", "ceil"),
    ("aten.sign", "sign"),
    ("aten.sin", "sin"),
    ("aten.cos", "cos"),
    ("aten.mish", "mish"),
    ("aten.logical_not", "logical_not"),
):
    _CONVERTERS[_t] = lambda c, x, op=_o: c.call(op, [x])


@_conv("aten.round")
def _round(c, x, *, decimals=0):
    if decimals:
        raise c.fail(f"decimals={decimals}")
    return c.call("round", [x])


@_conv("aten.leaky_relu")
def _leaky_relu(c, x, negative_slope=0.01):
    return c.call("leaky_relu", [x], alpha=float(negative_slope))


@_conv("aten.elu")
def _elu(c, x, alpha=1.0, scale=1.0, input_scale=1.0):
    return c.call(
        "elu", [x], alpha=float(alpha), scale=float(scale), input_scale=float(input_scale)
    )


@_conv("aten.softplus")
def _softplus(c, x, beta=1.0, threshold=20.0):
    return c.call("softplus", [x], beta=float(beta), threshold=float(threshold))


@_conv("aten._prelu_kernel", "aten.prelu")
def _prelu(c, x, weight):
    shape = c.shape(x)
    if len(c.shape(weight)) == 1 and len(shape) > 1 and c.shape(weight)[0] > 1:
        weight = c.reshape(weight, (1, c.shape(weight)[0]) + (1,) * (len(shape) - 2))
    return c.call("prelu", [x, weight])


def _compare(op):
    def f(c, a, b):
        like = a if isinstance(a, str) else b
        return c.call(op, [c.operand(a, like), c.operand(b, like)])

    return f


for _t, _o in (
    ("aten.eq", "equal"),
    ("aten.ne", "not_equal"),
    ("aten.lt", "less"),
    ("aten.le", "less_equal"),
    ("aten.gt", "greater"),
    ("aten.ge", "greater_equal"),
    ("aten.logical_and", "logical_and"),
    ("aten.logical_or", "logical_or"),
    ("aten.logical_xor", "logical_xor"),
):
    _CONVERTERS[_t] = _compare(_o)


def _bitwise_bool(op):
    def f(c, *args):
        tensors = [a for a in args if isinstance(a, str)]
        if any(c.dtype(t) != "bool" for t in tensors):
            raise c.fail("bitwise operators on integers (only bool tensors are supported)")
        if op == "logical_not":
            return c.call(op, [args[0]])
        return _compare(op)(c, *args)

    return f


_CONVERTERS["aten.bitwise_not"] = _bitwise_bool("logical_not")
_CONVERTERS["aten.bitwise_and"] = _bitwise_bool("logical_and")
_CONVERTERS["aten.bitwise_or"] = _bitwise_bool("logical_or")
_CONVERTERS["aten.bitwise_xor"] = _bitwise_bool("logical_xor")


@_conv("aten._log_softmax", "aten.log_softmax")
def _log_softmax(c, x, dim, *_):
    return c.call("log_softmax", [x], axis=_axis(dim, len(c.shape(x))))


@_conv("aten.adaptive_max_pool2d")
def _adaptive_max(c, x, size):
    if tuple(size) != (1, 1):
        raise c.fail(f"output size {tuple(size)} (only 1x1)")
    y = c.call("reduce", [x], kind="max", axes=(2, 3), keepdims=True)
    return [y, None]


@_conv("aten._native_batch_norm_legit")
def _batch_norm_stats(c, x, weight, bias, *rest):
    """Batch norm with statistics of the input itself (``no_stats``, or training mode):
    how torch decomposes instance norm (the input viewed as ``[1, N*C, ...]``)."""
    training = rest[0] if len(rest) == 3 else rest[2]
    eps = rest[-1]
    if len(rest) != 3 and not training:
        raise c.fail("eval-mode batch norm with running statistics (expected the _no_training op)")
    shape = c.shape(x)
    if shape[0] != 1 or len(shape) < 3:
        raise c.fail(f"batch statistics over a batch of {shape[0]} (input {shape})")
    args = [x]
    ch = shape[1]
    for v, default in ((weight, 1.0), (bias, 0.0)):
        args.append(v if v is not None else c.b.const(np.full(ch, default, c.dtype(x)), "norm"))
    return [c.call("instance_norm", args, axis=1, epsilon=float(eps)), None, None]


def _reduce_more(op):
    def f(c, x, dims=None, keepdim=False, *, dtype=None):
        nd = len(c.shape(x))
        if isinstance(dims, int):
            dims = [dims]
        axes = None if not dims else tuple(_axis(d, nd) for d in dims)
        return c.call(op, [x], axes=axes, keepdims=bool(keepdim))

    return f


_CONVERTERS["aten.prod"] = _reduce_more("reduce_prod")
_CONVERTERS["aten.logsumexp"] = _reduce_more("reduce_log_sum_exp")


@_conv("aten.linalg_vector_norm")
def _vector_norm(c, x, ord=2, dim=None, keepdim=False, *, dtype=None):
    kinds = {1: "reduce_l1", 2: "reduce_l2"}
    if ord not in kinds:
        raise c.fail(f"ord={ord} (1 and 2 are supported)")
    return _reduce_more(kinds[ord])(c, x, dim, keepdim)


def _arg(kind):
    def f(c, x, dim=None, keepdim=False):
        if dim is None:
            x = c.reshape(x, (-1,))
            dim = 0
        nd = len(c.shape(x))
        return c.call(f"arg{kind}", [x], axis=_axis(dim, nd), keepdims=bool(keepdim))

    return f


_CONVERTERS["aten.argmax"] = _arg("max")
_CONVERTERS["aten.argmin"] = _arg("min")


def _upsample(mode, exact=False):
    def f(c, x, output_size=None, *args):
        shape = c.shape(x)
        sp = len(shape) - 2
        align = None
        if mode == "linear":
            align, args = args[0], args[1:]
        if len(args) == 1 and (args[0] is None or isinstance(args[0], (list, tuple))):
            scales = args[0]  # .vec: scale_factors
        else:  # .default: scales_h, scales_w (the output size is given)
            scales = None if not args or any(s is None for s in args) else list(args[:sp])
        if output_size is None and scales is None:
            raise c.fail("neither output_size nor scale factors")
        if output_size is None:
            output_size = [int(np.floor(n * s)) for n, s in zip(shape[2:], scales)]
        out = tuple(shape[:2]) + tuple(int(s) for s in output_size)
        full = [1.0, 1.0] + (
            [float(s) for s in scales] if scales else [m / n for m, n in zip(out[2:], shape[2:])]
        )
        if mode == "nearest":  # torch's nearest-exact is ONNX's half-pixel round-half-up
            cmode, nmode = ("half_pixel", "round_prefer_ceil") if exact else ("asymmetric", "floor")
        else:
            cmode, nmode = ("align_corners" if align else "pytorch_half_pixel"), "floor"
        return c.call(
            "resize",
            [x],
            out_shape=out,
            scales=tuple(full),
            mode=mode,
            coordinate_transformation_mode=cmode,
            nearest_mode=nmode,
        )

    return f


_CONVERTERS["aten.upsample_nearest2d"] = _upsample("nearest")
_CONVERTERS["aten.upsample_bilinear2d"] = _upsample("linear")


def _torch_pads(c, x, pad):
    nd = len(c.shape(x))
    before, after = [0] * nd, [0] * nd
    for i in range(len(pad) // 2):
        before[nd - 1 - i], after[nd - 1 - i] = int(pad[2 * i]), int(pad[2 * i + 1])
    if any(p < 0 for p in before + after):
        raise c.fail(f"negative padding {tuple(pad)}")
    return tuple(before), tuple(after)


@_conv("aten.constant_pad_nd")
def _constant_pad(c, x, pad, value=0.0):
    before, after = _torch_pads(c, x, pad)
    return c.call("pad", [x], before=before, after=after, mode="constant", value=float(value))


def _mode_pad(mode):
    def f(c, x, pad):
        before, after = _torch_pads(c, x, pad)
        return c.call("pad", [x], before=before, after=after, mode=mode, value=0.0)

    return f


for _t, _m in (
    ("aten.reflection_pad1d", "reflect"),
    ("aten.reflection_pad2d", "reflect"),
    ("aten.reflection_pad3d", "reflect"),
    ("aten.replication_pad1d", "edge"),
    ("aten.replication_pad2d", "edge"),
    ("aten.replication_pad3d", "edge"),
):
    _CONVERTERS[_t] = _mode_pad(_m)


@_conv("aten.repeat")
def _repeat(c, x, repeats):
    reps = [int(r) for r in repeats]
    shape = c.shape(x)
    if len(reps) > len(shape):
        x = c.reshape(x, (1,) * (len(reps) - len(shape)) + tuple(shape))
    if all(r == 1 for r in reps):
        return x
    return c.call("tile", [x], repeats=tuple(reps))


@_conv("aten.arange")
def _arange(c, *args, dtype=None, **kw):
    nums = [a for a in args if not isinstance(a, str)]
    if len(nums) != len(args):
        raise c.fail("a computed bound")
    arr = np.arange(*nums)
    if dtype is not None:
        arr = arr.astype(str(dtype).replace("torch.", ""))
    elif arr.dtype.kind == "i":
        arr = arr.astype(np.int64)
    return c.b.const(arr, c.node.name)


@_conv("aten.index")
def _index(c, x, indices):
    """``x[..., idx, ...]`` with constant index tensors that are separable: each varies
    along its own broadcast axis, in order (what decomposed padding and upsampling emit);
    one ``take`` per indexed axis."""
    shape = c.shape(x)
    used = [(d, v) for d, v in enumerate(indices) if v is not None]
    if not used:
        return x
    for _, v in used:
        if not c.b.is_const(v):
            raise c.fail("computed index tensors (only constant ones are supported)")
    dims = [d for d, _ in used]
    if dims != list(range(dims[0], dims[0] + len(dims))):
        raise c.fail("index tensors on non-adjacent axes")
    arrs = [c.b.value(v) for _, v in used]
    bshape = np.broadcast_shapes(*(a.shape for a in arrs))
    if len(bshape) != len(arrs):
        raise c.fail(f"index tensors broadcasting to {bshape} (not one axis each)")
    full = [
        np.broadcast_to(a.reshape((1,) * (len(bshape) - a.ndim) + a.shape), bshape) for a in arrs
    ]
    y = x
    for k, (d, a) in enumerate(zip(dims, full)):
        line = a[tuple(slice(None) if ax == k else 0 for ax in range(len(bshape)))]
        along = [1] * len(bshape)
        along[k] = bshape[k]
        if not np.array_equal(a, np.broadcast_to(line.reshape(along), bshape)):
            raise c.fail("index tensors that are not separable (one varying axis each, in order)")
        idx = c.b.const(np.where(line < 0, line + shape[d], line).astype(np.int64), "index")
        y = c.call("take", [y, idx], axis=d)
    return y


@_conv("aten.triu", "aten.tril")
def _triu(c, x, diagonal=0):
    return c.call("trilu", [x], upper=str(c.node.target).startswith("aten.triu"), k=int(diagonal))


@_conv("aten.native_group_norm")
def _group_norm(c, x, weight, bias, n, ch, hw, groups, eps):
    """Group norm as an instance norm of ``x`` viewed ``[N, G, C/G * HW]``, then the
    per-channel affine map."""
    shape = c.shape(x)
    g = int(groups)
    v = c.reshape(x, (shape[0], g, -1))
    ones = c.b.const(np.ones(g, c.dtype(x)), "gn_scale")
    zeros = c.b.const(np.zeros(g, c.dtype(x)), "gn_shift")
    y = c.call("instance_norm", [v, ones, zeros], axis=1, epsilon=float(eps))
    y = c.reshape(y, shape)
    per_channel = (shape[1],) + (1,) * (len(shape) - 2)
    if weight is not None:
        y = c.call("multiply", [y, c.reshape(weight, per_channel)])
    if bias is not None:
        y = c.call("add", [y, c.reshape(bias, per_channel)])
    return [y, None, None]


@_conv("aten._assert_tensor_metadata", "aten._assert_scalar", "aten.sym_constrain_range_for_size")
def _assert_only(c, *args, **kw):
    return None


def _max_min(kind):
    def f(c, x, dim=None, keepdim=False):
        if isinstance(dim, str):  # max(x, other)
            return c.call("maximum" if kind == "max" else "minimum", [x, dim])
        if dim is None:
            return c.call("reduce", [x], kind=kind, axes=None, keepdims=False)
        nd = len(c.shape(x))
        axis = _axis(dim, nd)
        values = c.call("reduce", [x], kind=kind, axes=(axis,), keepdims=bool(keepdim))
        return [values, c.call(f"arg{kind}", [x], axis=axis, keepdims=bool(keepdim))]

    return f


_CONVERTERS["aten.max"] = _max_min("max")
_CONVERTERS["aten.min"] = _max_min("min")


def _adaptive_pool(kind, one_by_one):
    def f(c, x, size):
        shape = c.shape(x)
        size = tuple(int(s) for s in size)
        if size == (1, 1):
            return one_by_one(c, x, size)
        if size == tuple(shape[2:]):
            return x if kind == "avg" else [x, None]
        if any(n % s for n, s in zip(shape[2:], size)):
            raise c.fail(f"output size {size} does not divide the input {tuple(shape[2:])}")
        k = tuple(n // s for n, s in zip(shape[2:], size))
        attrs = {"kernel": k, "strides": k, "pads": (0, 0, 0, 0), "ceil_mode": False}
        if kind == "avg":
            return c.call("avg_pool2d", [x], count_include_pad=True, **attrs)
        return [c.call("max_pool2d", [x], dilations=(1, 1), **attrs), None]

    return f


_CONVERTERS["aten._adaptive_avg_pool2d"] = _adaptive_pool("avg", _adaptive_avg)
_CONVERTERS["aten.adaptive_avg_pool2d"] = _adaptive_pool("avg", _adaptive_avg)
_CONVERTERS["aten.adaptive_max_pool2d"] = _adaptive_pool("max", _adaptive_max)


@_conv("aten.var")
def _var(c, x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance as mean, squared deviation and a scaled sum (``correction`` or
    ``unbiased`` as torch: 1 unless given)."""
    if isinstance(unbiased, bool) and correction is None:
        correction = 1 if unbiased else 0
    correction = 1 if correction is None else float(correction)
    shape = c.shape(x)
    nd = len(shape)
    dims = [dim] if isinstance(dim, int) else dim
    axes = tuple(range(nd)) if not dims else tuple(sorted(_axis(d, nd) for d in dims))
    n = int(np.prod([shape[a] for a in axes]))
    mean = c.call("reduce", [x], kind="mean", axes=axes, keepdims=True)
    dev = c.call("subtract", [x, mean])
    total = c.call("reduce", [c.call("multiply", [dev, dev])], kind="sum", axes=axes,
                   keepdims=bool(keepdim))  # fmt: skip
    scale = c.b.const(np.asarray(1.0 / max(n - correction, 0.0) if n > correction else np.inf,
                                 c.dtype(x)), "var_scale")  # fmt: skip
    return c.call("multiply", [total, scale])


@_conv("aten.flip")
def _flip(c, x, dims):
    nd = len(c.shape(x))
    axes = tuple(sorted({_axis(d, nd) for d in dims}))
    if not axes:
        return x
    return c.call(
        "strided_slice",
        [x],
        begin=(-1,) * len(axes),
        end=(-(2**62),) * len(axes),
        strides=(-1,) * len(axes),
        axes=axes,
    )


_CONVERTERS["aten._upsample_nearest_exact2d"] = _upsample("nearest", exact=True)


def _like(fill):
    def f(c, x, *args, dtype=None, **kw):
        value = args[0] if fill is None else fill
        d = c.dtype(x) if dtype is None else str(dtype).replace("torch.", "")
        return c.b.const(np.full(c.shape(x), value, d), c.node.name)

    return f


_CONVERTERS["aten.full_like"] = _like(None)
_CONVERTERS["aten.zeros_like"] = _like(0)
_CONVERTERS["aten.ones_like"] = _like(1)


@_conv("aten.empty", "aten.zeros")
def _empty(c, size, *args, dtype=None, **kw):
    d = "float32" if dtype is None else str(dtype).replace("torch.", "")
    return c.b.const(np.zeros(tuple(int(s) for s in size), d), c.node.name)


@_conv("aten.rrelu_with_noise_functional", "aten.rrelu_with_noise", "aten.rrelu")
def _rrelu(c, x, *args, **kw):
    """Eval-mode RReLU: a leaky ReLU with the mean of the slope bounds."""
    nums = [a for a in args if isinstance(a, (int, float)) and not isinstance(a, bool)]
    flags = [a for a in args if isinstance(a, bool)]
    lower, upper = (nums + [1 / 8, 1 / 3])[:2] if len(nums) != 1 else (nums[0], 1 / 3)
    if kw.get("training", flags[0] if flags else False):
        raise c.fail("training-mode RReLU (random slopes)")
    y = c.call("leaky_relu", [x], alpha=(float(lower) + float(upper)) / 2)
    noise = next((a for a in args if isinstance(a, str)), None)
    return [y, noise] if "functional" in str(c.node.target) else y


def _any_all(kind):
    def f(c, x, dim=None, keepdim=False):
        nd = len(c.shape(x))
        dims = [dim] if isinstance(dim, int) else dim
        axes = None if not dims else tuple(_axis(d, nd) for d in dims)
        v = c.call("cast", [x], dtype="int32") if c.dtype(x) == "bool" else x
        if c.dtype(x) != "bool":
            v = c.call("cast", [c.call("cast", [x], dtype="bool")], dtype="int32")
        y = c.call("reduce", [v], kind=kind, axes=axes, keepdims=bool(keepdim))
        return c.call("cast", [y], dtype="bool")

    return f


_CONVERTERS["aten.any"] = _any_all("max")
_CONVERTERS["aten.all"] = _any_all("min")


def _convolution_1d(c, x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    """1-D convolutions as 2-D ones over ``[N, C, 1, W]`` (else the 2-D converter)."""
    if len(c.shape(x)) != 3:
        return _convolution(
            c, x, w, bias, stride, padding, dilation, transposed, output_padding, groups
        )
    n, ch, width = c.shape(x)
    ws = c.shape(w)
    x4 = c.reshape(x, (n, ch, 1, width))
    w4 = c.reshape(w, (ws[0], ws[1], 1, ws[2]))
    y = _convolution(
        c, x4, w4, bias, [1, stride[0]], [0, padding[0]], [1, dilation[0]], transposed,
        [0, output_padding[0]] if output_padding else [0, 0], groups,
    )  # fmt: skip
    s = c.shape(y)
    return c.reshape(y, (s[0], s[1], s[3]))


_CONVERTERS["aten.convolution"] = _convolution_1d


@_conv("aten.cumsum")
def _cumsum(c, x, dim, *, dtype=None):
    if dtype is not None and str(dtype).replace("torch.", "") != c.dtype(x):
        x = c.call("cast", [x], dtype=str(dtype).replace("torch.", ""))
    elif c.dtype(x) in ("bool", "int32", "int8", "uint8", "int16"):  # torch sums in int64
        x = c.call("cast", [x], dtype="int64")
    return c.call("cumsum", [x], axis=_axis(dim, len(c.shape(x))))


@_conv("aten.gather")
def _gather(c, x, dim, index, *, sparse_grad=False):
    return c.call("gather_elements", [x, index], axis=_axis(dim, len(c.shape(x))))


def _remainder(fmod: bool):
    def f(c, a, b):
        like = a if isinstance(a, str) else b
        return c.call("mod", [c.operand(a, like), c.operand(b, like)], fmod=fmod)

    return f


_CONVERTERS["aten.remainder"] = _remainder(False)
_CONVERTERS["aten.fmod"] = _remainder(True)


@_conv("aten.mul")
def _mul(c, a, b):
    """``x * sigmoid(x)`` (decomposed ``silu``) as one ``silu`` call (:mod:`.patterns`)."""
    v = silu_operand(c.b, a, b)
    return _binary("multiply")(c, a, b) if v is None else c.call("silu", [v])


@_conv("aten.silu")
def _silu(c, x):
    return c.call("silu", [x])
