"""PyTorch (ATen) converters of the operators of ResNet, MobileNet, BERT and MLPs:
convolution, matmul, normalization, pooling, element-wise math and layout ops
(registered into :mod:`.torch_convert`'s table)."""

from __future__ import annotations

import numpy as np

from .torch_convert import _CONVERTERS, _axis, _conv


# ----------------------------------------------------------------------------- nn
@_conv("aten.convolution")
def _convolution(c, x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    if len(c.shape(x)) != 4:
        raise c.fail(f"only 2-D convolutions are supported, input {c.shape(x)}")
    pads = (padding[0], padding[1], padding[0], padding[1])
    if transposed:
        if groups != 1:
            raise c.fail("grouped transposed convolution")
        y = c.call(
            "conv2d_transpose",
            [x, w],
            strides=tuple(stride),
            pads=pads,
            output_padding=tuple(output_padding),
            dilations=tuple(dilation),
        )
    else:
        y = c.call(
            "conv2d",
            [x, w],
            strides=tuple(stride),
            pads=pads,
            dilations=tuple(dilation),
            groups=int(groups),
        )
    if bias is not None:
        y = c.call("add", [y, c.call("reshape", [bias], shape=(1, c.shape(bias)[0], 1, 1))])
    return y


@_conv("aten.addmm")
def _addmm(c, bias, a, b, beta=1, alpha=1):
    y = c.call("matmul", [a, b])
    if alpha != 1:
        y = c.call("multiply", [y, c.operand(float(alpha), y)])
    if beta != 1:
        bias = c.call("multiply", [bias, c.operand(float(beta), bias)])
    return c.call("add", [y, bias])


@_conv("aten.mm", "aten.bmm", "aten.matmul")
def _mm(c, a, b):
    return c.call("matmul", [a, b])


@_conv("aten._native_batch_norm_legit_no_training")
def _batch_norm(c, x, gamma, beta, mean, var, momentum, eps):
    vals = {}
    for name, v in (("gamma", gamma), ("beta", beta), ("mean", mean), ("var", var)):
        if v is not None and not c.b.is_const(v):
            raise c.fail(f"batch norm {name} must be a constant (eval mode)")
        vals[name] = None if v is None else c.b.value(v)
    ch = c.shape(x)[1]
    g = vals["gamma"] if vals["gamma"] is not None else np.ones(ch, np.float32)
    bt = vals["beta"] if vals["beta"] is not None else np.zeros(ch, np.float32)
    scale = (g / np.sqrt(vals["var"].astype(np.float64) + eps)).astype(np.float32)
    shift = (bt - vals["mean"] * scale).astype(np.float32)
    shape = (1, ch) + (1,) * (len(c.shape(x)) - 2)
    y = c.call("multiply", [x, c.b.const(scale.reshape(shape), "bn_scale")])
    return [c.call("add", [y, c.b.const(shift.reshape(shape), "bn_shift")]), None, None]


@_conv("aten.native_layer_norm")
def _layer_norm(c, x, normalized_shape, weight, bias, eps):
    norm = tuple(normalized_shape)
    w = weight if weight is not None else c.b.const(np.ones(norm, c.dtype(x)), "ln_w")
    b = bias if bias is not None else c.b.const(np.zeros(norm, c.dtype(x)), "ln_b")
    return [c.call("layer_norm", [x, w, b], epsilon=float(eps)), None, None]


@_conv("aten._softmax", "aten.softmax")
def _softmax(c, x, dim, *_):
    return c.call("softmax", [x], axis=_axis(dim, len(c.shape(x))))


@_conv("aten.max_pool2d_with_indices", "aten.max_pool2d")
def _max_pool(c, x, kernel, stride=(), padding=(0, 0), dilation=(1, 1), ceil_mode=False):
    kernel = tuple(kernel) if len(kernel) == 2 else (kernel[0],) * 2
    stride = tuple(stride) if stride else kernel
    stride = stride if len(stride) == 2 else (stride[0],) * 2
    padding = tuple(padding) if len(padding) == 2 else (padding[0],) * 2
    dilation = tuple(dilation) if len(dilation) == 2 else (dilation[0],) * 2
    y = c.call(
        "max_pool2d",
        [x],
        kernel=kernel,
        strides=stride,
        pads=padding + padding,
        dilations=dilation,
        ceil_mode=bool(ceil_mode),
    )
    return [y, None]


@_conv("aten.avg_pool2d")
def _avg_pool(
    c,
    x,
    kernel,
    stride=(),
    padding=(0, 0),
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    if divisor_override is not None:
        raise c.fail("divisor_override")
    kernel = tuple(kernel) if len(kernel) == 2 else (kernel[0],) * 2
    stride = tuple(stride) if stride else kernel
    padding = tuple(padding) if len(padding) == 2 else (padding[0],) * 2
    return c.call(
        "avg_pool2d",
        [x],
        kernel=kernel,
        strides=tuple(stride),
        pads=padding + padding,
        ceil_mode=bool(ceil_mode),
        count_include_pad=bool(count_include_pad),
    )


@_conv("aten._adaptive_avg_pool2d", "aten.adaptive_avg_pool2d")
def _adaptive_avg(c, x, size):
    if tuple(size) != (1, 1):
        raise c.fail(f"output size {tuple(size)} (only 1x1)")
    return c.call("global_avg_pool2d", [x])


def _reduce(kind):
    def f(c, x, dims=None, keepdim=False, *, dtype=None):
        nd = len(c.shape(x))
        axes = (
            None
            if not dims
            else tuple(_axis(d, nd) for d in (dims if isinstance(dims, (list, tuple)) else [dims]))
        )
        return c.call("reduce", [x], kind=kind, axes=axes, keepdims=bool(keepdim))

    return f


_CONVERTERS["aten.mean"] = _reduce("mean")
_CONVERTERS["aten.sum"] = _reduce("sum")
_CONVERTERS["aten.amax"] = _reduce("max")
_CONVERTERS["aten.amin"] = _reduce("min")

# ----------------------------------------------------------------------------- elementwise
for _t, _o in (
    ("aten.relu", "relu"),
    ("aten.sigmoid", "sigmoid"),
    ("aten.tanh", "tanh"),
    ("aten.erf", "erf"),
    ("aten.exp", "exp"),
    ("aten.sqrt", "sqrt"),
    ("aten.rsqrt", "rsqrt"),
    ("aten.neg", "negative"),
    ("aten.hardswish", "hard_swish"),
):
    _CONVERTERS[_t] = lambda c, x, op=_o: c.call(op, [x])


@_conv("aten.gelu")
def _gelu(c, x, approximate="none"):
    return c.call("gelu_tanh" if approximate == "tanh" else "gelu", [x])


@_conv("aten.hardtanh", "aten.clamp")
def _clamp(c, x, lo=None, hi=None):
    return c.call(
        "clip", [x], min=None if lo is None else float(lo), max=None if hi is None else float(hi)
    )


@_conv("aten.hardsigmoid")
def _hardsigmoid(c, x):
    return c.call("hard_sigmoid", [x], alpha=1 / 6, beta=0.5)


def _binary(op):
    def f(c, a, b, alpha=1, **kw):
        if kw.get("rounding_mode") is not None:
            raise c.fail(f"rounding_mode {kw['rounding_mode']!r}")
        like = a if isinstance(a, str) else b
        a, b = c.operand(a, like), c.operand(b, like)
        if alpha != 1:
            b = c.call("multiply", [b, c.operand(alpha, b)])
        return c.call(op, [a, b])

    return f


for _t, _o in (
    ("aten.add", "add"),
    ("aten.sub", "subtract"),
    ("aten.mul", "multiply"),
    ("aten.div", "divide"),
    ("aten.pow", "power"),
    ("aten.maximum", "maximum"),
    ("aten.minimum", "minimum"),
):
    _CONVERTERS[_t] = _binary(_o)


@_conv("aten.rsub")
def _rsub(c, a, b, alpha=1):
    return _binary("subtract")(c, b, a, alpha)


@_conv("aten.where")
def _where(c, cond, a, b):
    like = a if isinstance(a, str) else b
    return c.call("where", [cond, c.operand(a, like), c.operand(b, like)])


@_conv("aten._to_copy", "aten.to")
def _to_copy(c, x, *args, dtype=None, **kw):
    if dtype is None:
        return x
    d = str(dtype).replace("torch.", "")
    return x if d == c.dtype(x) else c.call("cast", [x], dtype=d)


@_conv(
    "aten.clone",
    "aten.alias",
    "aten.contiguous",
    "aten.detach",
    "aten.lift_fresh_copy",
    "aten.dropout",
)
def _identity(c, x, *args, **kw):
    return x


# ----------------------------------------------------------------------------- layout
@_conv("aten.view", "aten._unsafe_view", "aten.reshape")
def _view(c, x, shape):
    return c.reshape(x, shape)


@_conv("aten.flatten")
def _flatten(c, x, start=0, end=-1):
    s = c.shape(x)
    nd = len(s)
    start, end = _axis(start, nd), _axis(end, nd)
    return c.reshape(x, s[:start] + (int(np.prod(s[start : end + 1])),) + s[end + 1 :])


@_conv("aten.unsqueeze")
def _unsqueeze(c, x, dim):
    s = list(c.shape(x))
    s.insert(_axis(dim, len(s) + 1), 1)
    return c.reshape(x, s)


@_conv("aten.squeeze")
def _squeeze(c, x, dims=None):
    s = c.shape(x)
    if dims is None:
        drop = {i for i, v in enumerate(s) if v == 1}
    else:
        dims = dims if isinstance(dims, (list, tuple)) else [dims]
        drop = {_axis(d, len(s)) for d in dims if s[_axis(d, len(s))] == 1}
    return c.reshape(x, [v for i, v in enumerate(s) if i not in drop])


@_conv("aten.permute")
def _permute(c, x, dims):
    nd = len(c.shape(x))
    return c.call("transpose", [x], axes=tuple(_axis(d, nd) for d in dims))


@_conv("aten.t")
def _t(c, x):
    return c.call("transpose", [x], axes=(1, 0)) if len(c.shape(x)) == 2 else x


@_conv("aten.transpose")
def _transpose(c, x, d0, d1):
    nd = len(c.shape(x))
    axes = list(range(nd))
    d0, d1 = _axis(d0, nd), _axis(d1, nd)
    axes[d0], axes[d1] = axes[d1], axes[d0]
    return c.call("transpose", [x], axes=tuple(axes))


@_conv("aten.expand")
def _expand(c, x, sizes, *, implicit=False):
    s = c.shape(x)
    lead = len(sizes) - len(s)
    target = tuple(s[i - lead] if v == -1 else int(v) for i, v in enumerate(sizes))
    if target == s:
        return x
    return c.call("broadcast_to", [x], shape=target)


@_conv("aten.cat", "aten.concat")
def _cat(c, xs, dim=0):
    return c.call("concat", list(xs), axis=_axis(dim, len(c.shape(xs[0]))))


def _slice_val(c, x, dim, start, end, step=1):
    return c.b.call(
        "strided_slice",
        [x],
        hint=c.node.name,
        begin=(int(start),),
        end=(int(end),),
        strides=(int(step),),
        axes=(dim,),
    )


@_conv("aten.split_with_sizes", "aten.split")
def _split(c, x, sizes, dim=0):
    nd = len(c.shape(x))
    dim = _axis(dim, nd)
    n = c.shape(x)[dim]
    if isinstance(sizes, int):
        sizes = [min(sizes, n - i) for i in range(0, n, sizes)]
    outs, start = [], 0
    for s in sizes:
        outs.append(_slice_val(c, x, dim, start, start + s))
        start += s
    return outs


@_conv("aten.slice")
def _slice(c, x, dim=0, start=None, end=None, step=1):
    nd = len(c.shape(x))
    dim = _axis(dim, nd)
    n = c.shape(x)[dim]
    start = 0 if start is None else max(min(start, n), -n)
    end = n if end is None else max(min(end, n), -n - 1)
    if (start, end, step) == (0, n, 1):
        return x
    return _slice_val(c, x, dim, start, end, step)


@_conv("aten.select")
def _select(c, x, dim, index):
    nd = len(c.shape(x))
    dim = _axis(dim, nd)
    index = index % c.shape(x)[dim]
    y = _slice_val(c, x, dim, index, index + 1)
    return c.reshape(y, [v for i, v in enumerate(c.shape(x)) if i != dim])


@_conv("aten.embedding")
def _embedding(c, weight, indices, *args):
    return c.call("take", [weight, indices], axis=0)


@_conv("aten.index_select")
def _index_select(c, x, dim, index):
    return c.call("take", [x, index], axis=_axis(dim, len(c.shape(x))))


@_conv("aten.full")
def _full(c, size, value, *, dtype=None, **kw):
    d = "float32" if dtype is None else str(dtype).replace("torch.", "")
    return c.b.const(np.full(tuple(size), value, d), c.node.name)


@_conv("aten.scalar_tensor")
def _scalar_tensor(c, value, *, dtype=None, **kw):
    d = "float32" if dtype is None else str(dtype).replace("torch.", "")
    return c.b.const(np.asarray(value, d), c.node.name)
