"""ONNX converters of the operators of ResNet, MobileNet, BERT and MLPs: convolution,
Gemm/MatMul, normalization, pooling, element-wise math, shapes and reductions
(registered into :mod:`.onnx_convert`'s table)."""

from __future__ import annotations

import numpy as np

from .onnx_convert import _CONVERTERS, _auto_pads, _channel, _conv, _optional_const, _spatial_2d


# ----------------------------------------------------------------------------- nn
@_conv("Conv")
def _conv2d(ctx, ins, at):
    x, w = ins[0], ins[1]
    _spatial_2d(ctx, x)
    wshape = ctx.shape(w)
    kernel = tuple(at.get("kernel_shape", wshape[2:]))
    strides = tuple(at.get("strides", [1, 1]))
    dil = tuple(at.get("dilations", [1, 1]))
    pads = _auto_pads(ctx, at, ctx.shape(x)[2:], kernel, strides, dil)
    y = ctx.call(
        "conv2d", [x, w], strides=strides, pads=pads, dilations=dil, groups=int(at.get("group", 1))
    )
    if len(ins) > 2 and ins[2]:
        bias = ctx.b.const(_channel(ctx.const(ins[2], "B"), 4), "bias")
        y = ctx.call("add", [y, bias])
    return y


@_conv("ConvTranspose")
def _conv_transpose(ctx, ins, at):
    x, w = ins[0], ins[1]
    _spatial_2d(ctx, x)
    if int(at.get("group", 1)) != 1:
        raise ctx.fail("group > 1")
    if "output_shape" in at:
        raise ctx.fail("the output_shape attribute (give pads instead)")
    if at.get("auto_pad", "NOTSET") not in ("NOTSET", "", "VALID"):
        raise ctx.fail(f"auto_pad {at['auto_pad']!r}")
    y = ctx.call(
        "conv2d_transpose",
        [x, w],
        strides=tuple(at.get("strides", [1, 1])),
        pads=tuple(at.get("pads", [0, 0, 0, 0])),
        output_padding=tuple(at.get("output_padding", [0, 0])),
        dilations=tuple(at.get("dilations", [1, 1])),
    )
    if len(ins) > 2 and ins[2]:
        y = ctx.call("add", [y, ctx.b.const(_channel(ctx.const(ins[2], "B"), 4), "bias")])
    return y


@_conv("Gemm")
def _gemm(ctx, ins, at):
    a, bm = ins[0], ins[1]
    if at.get("transA", 0):
        a = ctx.call("transpose", [a], axes=(1, 0))
    if at.get("transB", 0):
        bm = ctx.call("transpose", [bm], axes=(1, 0))  # folded for a constant weight
    y = ctx.call("matmul", [a, bm])
    alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
    if alpha != 1.0:
        y = ctx.call("multiply", [y, ctx.b.const(np.float32(alpha), "alpha")])
    if len(ins) > 2 and ins[2]:
        c = ins[2]
        if beta != 1.0:
            c = ctx.call("multiply", [c, ctx.b.const(np.float32(beta), "beta")])
        y = ctx.call("add", [y, c])
    return y


@_conv("MatMul")
def _matmul(ctx, ins, at):
    a, bm = ins
    if len(ctx.shape(a)) < 2 or len(ctx.shape(bm)) < 2:
        raise ctx.fail("1-D operands")
    return ctx.call("matmul", [a, bm])


@_conv("BatchNormalization")
def _batch_norm(ctx, ins, at):
    x = ins[0]
    gamma, beta, mean, var = (
        ctx.const(v, n) for v, n in zip(ins[1:5], ("scale", "B", "mean", "var"))
    )
    eps = float(at.get("epsilon", 1e-5))
    scale = (gamma / np.sqrt(var.astype(np.float64) + eps)).astype(np.float32)
    shift = (beta - mean * scale).astype(np.float32)
    nd = len(ctx.shape(x))
    y = ctx.call("multiply", [x, ctx.b.const(_channel(scale, nd), "bn_scale")])
    return ctx.call("add", [y, ctx.b.const(_channel(shift, nd), "bn_shift")])


def _pool_attrs(ctx, x, at):
    _spatial_2d(ctx, x)
    kernel = tuple(at["kernel_shape"])
    strides = tuple(at.get("strides", [1, 1]))
    dil = tuple(at.get("dilations", [1, 1]))
    pads = _auto_pads(ctx, at, ctx.shape(x)[2:], kernel, strides, dil)
    return {
        "kernel": kernel,
        "strides": strides,
        "pads": pads,
        "ceil_mode": bool(at.get("ceil_mode", 0)),
        "dilations": dil,
    }


@_conv("MaxPool")
def _max_pool(ctx, ins, at):
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        raise ctx.fail("the Indices output")
    return ctx.call("max_pool2d", [ins[0]], **_pool_attrs(ctx, ins[0], at))


@_conv("AveragePool")
def _avg_pool(ctx, ins, at):
    attrs = _pool_attrs(ctx, ins[0], at)
    if attrs.pop("dilations") != (1, 1):
        raise ctx.fail("dilations")
    return ctx.call(
        "avg_pool2d", [ins[0]], count_include_pad=bool(at.get("count_include_pad", 0)), **attrs
    )


@_conv("GlobalAveragePool")
def _gap(ctx, ins, at):
    _spatial_2d(ctx, ins[0])
    return ctx.call("global_avg_pool2d", [ins[0]])


def _softmax_like(op: str):
    """Softmax and LogSoftmax: ``axis`` (default 1 before opset 13, -1 since); before 13
    only the last axis, since the old semantics flatten the axes from ``axis`` on."""

    def convert(ctx, ins, at):
        nd = len(ctx.shape(ins[0]))
        axis = int(at.get("axis", -1 if ctx.opset >= 13 else 1)) % nd
        if ctx.opset < 13 and axis != nd - 1:
            raise ctx.fail(f"axis {axis} before opset 13 (flattening semantics)")
        return ctx.call(op, [ins[0]], axis=axis)

    return convert


_softmax = _conv("Softmax")(_softmax_like("softmax"))


@_conv("LayerNormalization")
def _layer_norm(ctx, ins, at):
    x = ins[0]
    nd = len(ctx.shape(x))
    axis = int(at.get("axis", -1)) % nd
    norm = ctx.shape(x)[axis:]
    args = [x]
    for v, default in ((ins[1], 1.0), (ins[2] if len(ins) > 2 else None, 0.0)):
        if v:
            arr = ctx.b.value(v) if ctx.b.is_const(v) else None
            if arr is not None and arr.shape != norm:
                v = ctx.b.const(np.broadcast_to(arr, norm).copy(), "ln_param")
            args.append(v)
        else:
            args.append(ctx.b.const(np.full(norm, default, np.float32), "ln_param"))
    return ctx.call("layer_norm", args, epsilon=float(at.get("epsilon", 1e-5)))


# ----------------------------------------------------------------------------- elementwise
_UNARY = {
    "Relu": "relu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Erf": "erf",
    "Sqrt": "sqrt",
    "Exp": "exp",
    "Neg": "negative",
    "HardSwish": "hard_swish",
}
for _onnx, _ours in _UNARY.items():
    _CONVERTERS[_onnx] = lambda ctx, ins, at, op=_ours: ctx.call(op, [ins[0]])

_BINARY = {
    "Add": "add",
    "Sub": "subtract",
    "Mul": "multiply",
    "Div": "divide",
    "Pow": "power",
    "Max": "maximum",
    "Min": "minimum",
}
for _onnx, _ours in _BINARY.items():

    def _bin(ctx, ins, at, op=_ours):
        if len(ins) != 2:
            raise ctx.fail(f"{len(ins)} inputs (two are supported)")
        a, b = ins
        ta, tb = ctx.b.types[a].dtype, ctx.b.types[b].dtype
        if op == "power" and ta != tb:  # Pow allows another exponent type
            b = ctx.call("cast", [b], dtype=ta)
        return ctx.call(op, [a, b])

    _CONVERTERS[_onnx] = _bin


@_conv("Gelu")
def _gelu(ctx, ins, at):
    approx = at.get("approximate", "none")
    return ctx.call("gelu_tanh" if approx == "tanh" else "gelu", [ins[0]])


@_conv("Clip")
def _clip(ctx, ins, at):
    if ctx.opset < 11:
        lo, hi = at.get("min"), at.get("max")
    else:
        lo = float(ctx.const(ins[1], "min")) if len(ins) > 1 and ins[1] else None
        hi = float(ctx.const(ins[2], "max")) if len(ins) > 2 and ins[2] else None
    return ctx.call(
        "clip",
        [ins[0]],
        min=None if lo is None else float(lo),
        max=None if hi is None else float(hi),
    )


@_conv("HardSigmoid")
def _hard_sigmoid(ctx, ins, at):
    return ctx.call(
        "hard_sigmoid", [ins[0]], alpha=float(at.get("alpha", 0.2)), beta=float(at.get("beta", 0.5))
    )


@_conv("Where")
def _where(ctx, ins, at):
    return ctx.call("where", list(ins))


@_conv("Cast")
def _cast(ctx, ins, at):
    import onnx

    dtype = str(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(int(at["to"]))))
    return ctx.call("cast", [ins[0]], dtype=dtype)


@_conv("Identity", "Dropout")
def _identity(ctx, ins, at):
    return ins[0]


# ----------------------------------------------------------------------------- shapes
@_conv("Constant")
def _constant(ctx, ins, at):
    for key in ("value", "value_float", "value_int", "value_floats", "value_ints"):
        if key in at:
            v = at[key]
            arr = (
                np.asarray(v, np.float32 if "float" in key else np.int64)
                if not isinstance(v, np.ndarray)
                else v
            )
            return ctx.b.const(arr, ctx.node.output[0])
    raise ctx.fail(f"attributes {sorted(at)}")


@_conv("Shape")
def _shape(ctx, ins, at):
    shape = np.array(ctx.shape(ins[0]), np.int64)
    return ctx.b.const(shape[at.get("start", 0) : at.get("end", len(shape))], "shape")


@_conv("ConstantOfShape")
def _constant_of_shape(ctx, ins, at):
    shape = tuple(int(s) for s in ctx.const(ins[0], "input"))
    v = at.get("value", np.zeros(1, np.float32))
    return ctx.b.const(np.full(shape, v.reshape(-1)[0], v.dtype), "const")


def _reshape_to(ctx, x, shape):
    return ctx.call("reshape", [x], shape=tuple(int(s) for s in shape))


@_conv("Reshape")
def _reshape(ctx, ins, at):
    x = ins[0]
    target = [int(s) for s in ctx.const(ins[1], "shape")]
    src = ctx.shape(x)
    if not at.get("allowzero", 0):
        target = [src[i] if s == 0 else s for i, s in enumerate(target)]
    if -1 in target:
        known = int(np.prod([s for s in target if s != -1]))
        target[target.index(-1)] = int(np.prod(src)) // max(known, 1)
    return _reshape_to(ctx, x, target)


@_conv("Flatten")
def _flatten(ctx, ins, at):
    shape = ctx.shape(ins[0])
    axis = int(at.get("axis", 1)) % (len(shape) + 1) if shape else 0
    return _reshape_to(ctx, ins[0], (int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))))


def _axes_arg(ctx, ins, at, index=1):
    if ctx.opset >= 13 and len(ins) > index and ins[index]:
        return [int(a) for a in ctx.const(ins[index], "axes")]
    return list(at["axes"]) if "axes" in at else None


@_conv("Unsqueeze")
def _unsqueeze(ctx, ins, at):
    shape = list(ctx.shape(ins[0]))
    axes = _axes_arg(ctx, ins, at)
    nd = len(shape) + len(axes)
    for a in sorted(a % nd for a in axes):
        shape.insert(a, 1)
    return _reshape_to(ctx, ins[0], shape)


@_conv("Squeeze")
def _squeeze(ctx, ins, at):
    shape = ctx.shape(ins[0])
    axes = _axes_arg(ctx, ins, at)
    drop = (
        {a % len(shape) for a in axes}
        if axes is not None
        else {i for i, s in enumerate(shape) if s == 1}
    )
    return _reshape_to(ctx, ins[0], [s for i, s in enumerate(shape) if i not in drop])


@_conv("Transpose")
def _transpose(ctx, ins, at):
    nd = len(ctx.shape(ins[0]))
    perm = tuple(at.get("perm", list(reversed(range(nd)))))
    return ctx.call("transpose", [ins[0]], axes=perm)


@_conv("Concat")
def _concat(ctx, ins, at):
    return ctx.call("concat", [v for v in ins if v], axis=int(at["axis"]) % len(ctx.shape(ins[0])))


@_conv("Split")
def _split(ctx, ins, at):
    x = ins[0]
    shape = ctx.shape(x)
    axis = int(at.get("axis", 0)) % len(shape)
    n = len(ctx.node.output)
    if len(ins) > 1 and ins[1]:
        sizes = [int(s) for s in ctx.const(ins[1], "split")]
    elif "split" in at:
        sizes = list(at["split"])
    else:
        chunk = -(-shape[axis] // n)
        sizes = [min(chunk, shape[axis] - i * chunk) for i in range(n)]
    outs, start = [], 0
    for i, s in enumerate(sizes):
        outs.append(
            ctx.b.call(
                "strided_slice",
                [x],
                hint=ctx.node.output[i],
                begin=(start,),
                end=(start + s,),
                strides=(1,),
                axes=(axis,),
            )
        )
        start += s
    return outs


@_conv("Slice")
def _slice(ctx, ins, at):
    x = ins[0]
    nd = len(ctx.shape(x))
    if ctx.opset < 10:
        starts, ends = list(at["starts"]), list(at["ends"])
        axes = list(at.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts = [int(v) for v in ctx.const(ins[1], "starts")]
        ends = [int(v) for v in ctx.const(ins[2], "ends")]
        axes = (
            [int(v) for v in ctx.const(ins[3], "axes")]
            if len(ins) > 3 and ins[3]
            else list(range(len(starts)))
        )
        steps = (
            [int(v) for v in ctx.const(ins[4], "steps")]
            if len(ins) > 4 and ins[4]
            else [1] * len(starts)
        )
    clamp = 2**62
    ends = [max(min(e, clamp), -clamp) for e in ends]
    starts = [max(min(s, clamp), -clamp) for s in starts]
    return ctx.call(
        "strided_slice",
        [x],
        begin=tuple(starts),
        end=tuple(ends),
        strides=tuple(steps),
        axes=tuple(a % nd for a in axes),
    )


@_conv("Gather")
def _gather(ctx, ins, at):
    data, idx = ins
    axis = int(at.get("axis", 0)) % len(ctx.shape(data))
    return ctx.call("take", [data, idx], axis=axis)


@_conv("Expand")
def _expand(ctx, ins, at):
    shape = tuple(int(s) for s in ctx.const(ins[1], "shape"))
    out = np.broadcast_shapes(ctx.shape(ins[0]), shape)
    if out == ctx.shape(ins[0]):
        return ins[0]
    return ctx.call("broadcast_to", [ins[0]], shape=tuple(out))


def _reduction(ctx, ins, at, op: str, axes_as_input: bool, **attrs):
    """An ONNX ``Reduce*`` node as our ``op``: ``axes`` is an input (opset 18, ReduceSum
    from 13) or an attribute; none with ``noop_with_empty_axes`` is the identity."""
    x = ins[0]
    if axes_as_input:
        axes = _optional_const(ctx, ins, 1, "axes")  # empty: every axis, as absent
        axes = None if axes is None else [int(a) for a in axes]
    else:
        axes = list(at["axes"]) if "axes" in at else None
    if axes is None and at.get("noop_with_empty_axes", 0):
        return x
    axes = None if axes is None else tuple(a % len(ctx.shape(x)) for a in axes)
    return ctx.call(op, [x], **attrs, axes=axes, keepdims=bool(at.get("keepdims", 1)))


def _reduce(kind):
    def convert(ctx, ins, at):
        as_input = (kind == "sum" and ctx.opset >= 13) or ctx.opset >= 18
        return _reduction(ctx, ins, at, "reduce", as_input, kind=kind)

    return convert


for _onnx, _kind in (
    ("ReduceMean", "mean"),
    ("ReduceSum", "sum"),
    ("ReduceMax", "max"),
    ("ReduceMin", "min"),
):
    _CONVERTERS[_onnx] = _reduce(_kind)
