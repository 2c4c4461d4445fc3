"""``from_onnx``: import an ONNX model as a graph :class:`~.ir.Function`.

Weights (initializers and ``Constant`` nodes) become constants; everything computed from
constants alone (``Shape`` of static shapes, reshape targets, transposed Gemm weights,
BatchNormalization's scale and shift) is folded at import. ``onnx`` is imported lazily
(the ``onnx`` extra).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from .builder import GraphBuilder
from .ir import Function


class UnsupportedOperatorError(NotImplementedError):
    """An ONNX operator (or a use of one) the importer does not handle."""


class _Ctx:
    def __init__(self, b: GraphBuilder, opset: int, node: Any) -> None:
        self.b, self.opset, self.node = b, opset, node

    def where(self) -> str:
        return f"{self.node.op_type} (node {self.node.name!r}, opset {self.opset})"

    def fail(self, what: str) -> UnsupportedOperatorError:
        return UnsupportedOperatorError(f"ONNX {self.where()}: {what}")

    def const(self, value: str | None, what: str) -> np.ndarray:
        if value is None or not self.b.is_const(value):
            raise self.fail(f"input {what} must be a constant (static), got a computed value")
        return self.b.value(value)

    def shape(self, value: str) -> tuple[int, ...]:
        return self.b.types[value].shape

    def call(self, op: str, args: list[str], **attrs: Any) -> str:
        return self.b.call(op, args, hint=self.node.output[0] if self.node.output else op, **attrs)


Converter = Callable[[_Ctx, list, dict], "str | list[str]"]
_CONVERTERS: dict[str, Converter] = {}


def _conv(*names: str):
    def deco(fn: Converter) -> Converter:
        for n in names:
            _CONVERTERS[n] = fn
        return fn

    return deco


def supported_ops() -> list[str]:
    """The ONNX operator types ``from_onnx`` imports (``ms.graph.supported_ops()``)."""
    return sorted(_CONVERTERS)


# ----------------------------------------------------------------------------- helpers
def _auto_pads(ctx: _Ctx, attrs: dict, in_sp, kernel, strides, dilations) -> tuple[int, ...]:
    auto = attrs.get("auto_pad", "NOTSET")
    nd = len(kernel)
    if auto in ("NOTSET", ""):
        pads = tuple(attrs.get("pads", [0] * (2 * nd)))
        return pads
    if auto == "VALID":
        return (0,) * (2 * nd)
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        before, after = [], []
        for size, k, s, d in zip(in_sp, kernel, strides, dilations):
            out = -(-size // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            small = total // 2
            before.append(small if auto == "SAME_UPPER" else total - small)
            after.append(total - before[-1])
        return tuple(before + after)
    raise ctx.fail(f"auto_pad {auto!r}")


def _spatial_2d(ctx: _Ctx, x: str) -> None:
    if len(ctx.shape(x)) != 4:
        raise ctx.fail(f"only 2-D (NCHW) inputs are supported, got shape {ctx.shape(x)}")


def _channel(arr: np.ndarray, ndim: int) -> np.ndarray:
    return arr.reshape((1, -1) + (1,) * (ndim - 2))


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


@_conv("Softmax")
def _softmax(ctx, ins, at):
    nd = len(ctx.shape(ins[0]))
    axis = int(at.get("axis", -1 if ctx.opset >= 13 else 1)) % nd
    if ctx.opset < 13 and axis != nd - 1:
        raise ctx.fail(f"axis {axis} before opset 13 (flattening semantics)")
    return ctx.call("softmax", [ins[0]], axis=axis)


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


def _reduce(kind):
    def convert(ctx, ins, at):
        x = ins[0]
        if (kind == "sum" and ctx.opset >= 13) or ctx.opset >= 18:
            axes = [int(a) for a in ctx.const(ins[1], "axes")] if len(ins) > 1 and ins[1] else None
        else:
            axes = list(at["axes"]) if "axes" in at else None
        if axes is None and at.get("noop_with_empty_axes", 0):
            return x
        return ctx.call(
            "reduce",
            [x],
            kind=kind,
            axes=None if axes is None else tuple(a % len(ctx.shape(x)) for a in axes),
            keepdims=bool(at.get("keepdims", 1)),
        )

    return convert


for _onnx, _kind in (
    ("ReduceMean", "mean"),
    ("ReduceSum", "sum"),
    ("ReduceMax", "max"),
    ("ReduceMin", "min"),
):
    _CONVERTERS[_onnx] = _reduce(_kind)


# ----------------------------------------------------------------------------- driver
def _attrs(node) -> dict[str, Any]:
    import onnx
    from onnx import numpy_helper

    out = {}
    for a in node.attribute:
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, onnx.TensorProto):
            v = numpy_helper.to_array(v)
        elif isinstance(v, (list, tuple)):
            v = [x.decode() if isinstance(x, bytes) else x for x in v]
        out[a.name] = v
    return out


def from_onnx(
    model_or_path: Any,
    shape_dict: dict[str, tuple[int, ...]] | None = None,
    opset: int | None = None,
) -> Function:
    """Import an ONNX model (a ``ModelProto``, or a path to one).

    Args:
        model_or_path: the model.
        shape_dict: shapes for inputs whose ONNX shape has symbolic dimensions.
        opset: the default-domain opset to assume (default: the model's).

    Raises:
        UnsupportedOperatorError: an operator (or attribute) the importer does not
            handle; the message names the op type, the node and the opset.
    """
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "from_onnx needs the onnx package: pip install 'metaschedule[onnx]'"
        ) from err
    model = (
        onnx.load(os.fspath(model_or_path))
        if isinstance(model_or_path, (str, os.PathLike))
        else model_or_path
    )
    if not model.graph.output:
        where = os.fspath(model_or_path) if isinstance(model_or_path, (str, os.PathLike)) else ""
        raise ValueError(
            f"{where or 'the model'}: not an ONNX model with a graph (no graph outputs); "
            "is the file empty or truncated?"
        )
    if opset is None:
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    graph = model.graph
    b = GraphBuilder(graph.name or "main")
    env: dict[str, str] = {}
    for init in graph.initializer:
        env[init.name] = b.const(numpy_helper.to_array(init), init.name)
    shape_dict = dict(shape_dict or {})
    for inp in graph.input:
        if inp.name in env:
            continue
        tt = inp.type.tensor_type
        dims = []
        for i, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value"):
                dims.append(int(d.dim_value))
            elif inp.name in shape_dict:
                dims.append(int(shape_dict[inp.name][i]))
            else:
                raise ValueError(
                    f"from_onnx: input {inp.name!r} has a symbolic dimension "
                    f"{d.dim_param!r}; give its shape in shape_dict"
                )
        if inp.name in shape_dict:
            dims = [int(s) for s in shape_dict[inp.name]]
        dtype = str(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)))
        env[inp.name] = b.input(inp.name, tuple(dims), dtype)
    for node in graph.node:
        ctx = _Ctx(b, opset, node)
        if node.domain not in ("", "ai.onnx"):
            raise UnsupportedOperatorError(
                f"ONNX operator {node.domain}.{node.op_type} "
                f"(node {node.name!r}, opset {opset}) is not "
                "supported: only the default domain is"
            )
        fn = _CONVERTERS.get(node.op_type)
        if fn is None:
            raise UnsupportedOperatorError(
                f"ONNX operator {node.op_type} (node {node.name!r}, opset {opset}) is not "
                f"supported; supported operators: {', '.join(supported_ops())}"
            )
        missing = [i for i in node.input if i and i not in env]
        if missing:
            raise ValueError(f"ONNX node {node.name!r} reads undefined {missing}")
        ins = [env[i] if i else None for i in node.input]
        out = fn(ctx, ins, _attrs(node))
        outs = out if isinstance(out, list) else [out]
        for name, value in zip(node.output, outs):
            if name:
                env[name] = value
    return b.finish([env[o.name] for o in graph.output])


# ----------------------------------------------------------------------------- more operators
# (element-wise math and logic, Pad, Resize/Upsample, Tile, more reductions and norms)
_MORE_UNARY = {
    "Abs": "abs",
    "Log": "log",
    "Reciprocal": "reciprocal",
    "Floor": "floor",
    "Ceil": "ceil",
    "Round": "round",
    "Sign": "sign",
    "Sin": "sin",
    "Cos": "cos",
    "Softsign": "softsign",
    "Mish": "mish",
    "Not": "logical_not",
}
for _onnx, _ours in _MORE_UNARY.items():
    _CONVERTERS[_onnx] = lambda ctx, ins, at, op=_ours: ctx.call(op, [ins[0]])


@_conv("LeakyRelu")
def _leaky_relu(ctx, ins, at):
    return ctx.call("leaky_relu", [ins[0]], alpha=float(at.get("alpha", 0.01)))


@_conv("Elu")
def _elu(ctx, ins, at):
    return ctx.call("elu", [ins[0]], alpha=float(at.get("alpha", 1.0)))


@_conv("Selu")
def _selu(ctx, ins, at):
    return ctx.call(
        "elu",
        [ins[0]],
        alpha=float(at.get("alpha", 1.67326319217681884765625)),
        scale=float(at.get("gamma", 1.05070102214813232421875)),
    )


@_conv("Celu")
def _celu(ctx, ins, at):
    return ctx.call("celu", [ins[0]], alpha=float(at.get("alpha", 1.0)))


@_conv("ThresholdedRelu")
def _thresholded_relu(ctx, ins, at):
    return ctx.call("thresholded_relu", [ins[0]], alpha=float(at.get("alpha", 1.0)))


@_conv("Softplus")
def _softplus(ctx, ins, at):
    return ctx.call("softplus", [ins[0]])


@_conv("PRelu")
def _prelu(ctx, ins, at):
    x, slope = ins
    xs, ss = ctx.shape(x), ctx.shape(slope)
    if len(ss) > len(xs):
        raise ctx.fail(f"slope {ss} has more dimensions than the input {xs}")
    if 1 < len(ss) < len(xs) or (len(ss) == 1 and ss[0] != 1):
        # the slope at the input's rank ([C, 1, 1] -> [1, C, 1, 1]): a layout conversion
        # then sees which axis it follows
        full = (1,) * (len(xs) - len(ss)) + tuple(ss)
        slope = (
            ctx.b.const(ctx.b.value(slope).reshape(full), "slope")
            if ctx.b.is_const(slope)
            else _reshape_to(ctx, slope, full)
        )
    return ctx.call("prelu", [x, slope])


_COMPARE = {
    "Equal": "equal",
    "Less": "less",
    "LessOrEqual": "less_equal",
    "Greater": "greater",
    "GreaterOrEqual": "greater_equal",
    "And": "logical_and",
    "Or": "logical_or",
    "Xor": "logical_xor",
}
for _onnx, _ours in _COMPARE.items():
    _CONVERTERS[_onnx] = lambda ctx, ins, at, op=_ours: ctx.call(op, [ins[0], ins[1]])


def _variadic(op: str, mean: bool = False):
    def convert(ctx, ins, at):
        vals = [v for v in ins if v]
        if not vals:
            raise ctx.fail("no inputs")
        y = vals[0]
        for v in vals[1:]:
            y = ctx.call(op, [y, v])
        if mean and len(vals) > 1:
            inv = np.asarray(1.0 / len(vals), ctx.b.types[y].dtype)
            y = ctx.call("multiply", [y, ctx.b.const(inv, "mean_scale")])
        return y

    return convert


_CONVERTERS["Sum"] = _variadic("add")
_CONVERTERS["Mean"] = _variadic("add", mean=True)
_CONVERTERS["Max"] = _variadic("maximum")  # one to many inputs (Max-8 and later)
_CONVERTERS["Min"] = _variadic("minimum")


@_conv("Pad")
def _pad_op(ctx, ins, at):
    x = ins[0]
    nd = len(ctx.shape(x))
    mode = at.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        raise ctx.fail(f"mode {mode!r} (constant, reflect and edge are supported)")
    if ctx.opset < 11:
        pads = [int(p) for p in at.get("pads", at.get("paddings", []))]
        value = float(at.get("value", 0.0))
        axes = list(range(nd))
    else:
        pads = [int(p) for p in ctx.const(ins[1], "pads")]
        value = (
            float(ctx.const(ins[2], "constant_value").reshape(-1)[0])
            if len(ins) > 2 and ins[2]
            else 0.0
        )
        axes = (
            [int(a) % nd for a in ctx.const(ins[3], "axes")]
            if len(ins) > 3 and ins[3]
            else list(range(nd))
        )
    if len(pads) != 2 * len(axes):
        raise ctx.fail(f"{len(pads)} pads for {len(axes)} axes")
    before, after = [0] * nd, [0] * nd
    for i, a in enumerate(axes):
        before[a], after[a] = pads[i], pads[i + len(axes)]
    if any(p < 0 for p in before + after):  # negative pads crop
        shape = ctx.shape(x)
        crop = [d for d in range(nd) if before[d] < 0 or after[d] < 0]
        x = ctx.call(
            "strided_slice",
            [x],
            begin=tuple(max(0, -before[d]) for d in crop),
            end=tuple(shape[d] - max(0, -after[d]) for d in crop),
            strides=(1,) * len(crop),
            axes=tuple(crop),
        )
        before, after = [max(0, p) for p in before], [max(0, p) for p in after]
    if not any(before + after):
        return x
    return ctx.call("pad", [x], before=tuple(before), after=tuple(after), mode=mode, value=value)


def _resize_call(ctx, x, scales, sizes, at, cmode, nearest_mode):
    shape = ctx.shape(x)
    nd = len(shape)
    mode = at.get("mode", "nearest")
    if mode == "bilinear":  # Upsample-7's name
        mode = "linear"
    if mode not in ("nearest", "linear"):
        raise ctx.fail(f"mode {mode!r} (nearest and linear are supported; cubic is not)")
    if int(at.get("antialias", 0)):
        raise ctx.fail("antialias=1")
    if cmode == "tf_crop_and_resize":
        raise ctx.fail("coordinate_transformation_mode 'tf_crop_and_resize'")
    axes = [int(a) % nd for a in at.get("axes", range(nd))]
    full_scales = [1.0] * nd
    out = list(shape)
    if sizes is not None:
        sizes = [int(s) for s in sizes]
        if len(sizes) != len(axes):
            raise ctx.fail(f"sizes {sizes} for {len(axes)} axes")
        policy = at.get("keep_aspect_ratio_policy", "stretch")
        ratios = [s / shape[a] for s, a in zip(sizes, axes)]
        if policy in ("not_larger", "not_smaller"):
            r = min(ratios) if policy == "not_larger" else max(ratios)
            ratios = [r] * len(axes)
            sizes = [int(np.floor(r * shape[a] + 0.5)) for a in axes]
        elif policy != "stretch":
            raise ctx.fail(f"keep_aspect_ratio_policy {policy!r}")
        for a, s, r in zip(axes, sizes, ratios):
            out[a], full_scales[a] = s, r
    else:
        sc = [float(s) for s in scales]
        if len(sc) != len(axes):
            raise ctx.fail(f"scales {sc} for {len(axes)} axes")
        for a, s in zip(axes, sc):
            if s <= 0:
                raise ctx.fail(f"scale {s}")
            out[a], full_scales[a] = int(np.floor(shape[a] * s)), s
    if tuple(out) == shape and all(s == 1.0 for s in full_scales):
        return x
    return ctx.call(
        "resize",
        [x],
        out_shape=tuple(out),
        scales=tuple(full_scales),
        mode=mode,
        coordinate_transformation_mode=cmode,
        nearest_mode=nearest_mode,
    )


def _optional_const(ctx, ins, i, what):
    if len(ins) <= i or not ins[i]:
        return None
    arr = ctx.const(ins[i], what)
    return None if arr.size == 0 else arr.reshape(-1)


@_conv("Resize")
def _resize(ctx, ins, at):
    if ctx.opset < 11:  # Resize-10: X, scales; asymmetric coordinates
        scales = _optional_const(ctx, ins, 1, "scales")
        return _resize_call(ctx, ins[0], scales, None, at, "asymmetric", "floor")
    scales = _optional_const(ctx, ins, 2, "scales")
    sizes = _optional_const(ctx, ins, 3, "sizes")
    if scales is None and sizes is None:
        raise ctx.fail("neither scales nor sizes is given")
    cmode = at.get("coordinate_transformation_mode", "half_pixel")
    if cmode == "tf_half_pixel_for_nn":
        raise ctx.fail("coordinate_transformation_mode 'tf_half_pixel_for_nn'")
    nearest = at.get("nearest_mode", "round_prefer_floor")
    return _resize_call(ctx, ins[0], scales, sizes, at, cmode, nearest)


@_conv("Upsample")
def _upsample(ctx, ins, at):
    scales = at.get("scales") if ctx.opset < 9 else _optional_const(ctx, ins, 1, "scales")
    if scales is None:
        raise ctx.fail("no scales")
    return _resize_call(ctx, ins[0], scales, None, at, "asymmetric", "floor")


@_conv("Tile")
def _tile(ctx, ins, at):
    reps = tuple(int(r) for r in ctx.const(ins[1], "repeats"))
    if all(r == 1 for r in reps):
        return ins[0]
    return ctx.call("tile", [ins[0]], repeats=reps)


@_conv("GlobalMaxPool")
def _global_max_pool(ctx, ins, at):
    nd = len(ctx.shape(ins[0]))
    if nd < 3:
        raise ctx.fail(f"input {ctx.shape(ins[0])} has no spatial axes")
    return ctx.call("reduce", [ins[0]], kind="max", axes=tuple(range(2, nd)), keepdims=True)


@_conv("LogSoftmax")
def _log_softmax(ctx, ins, at):
    nd = len(ctx.shape(ins[0]))
    axis = int(at.get("axis", -1 if ctx.opset >= 13 else 1)) % nd
    if ctx.opset < 13 and axis != nd - 1:
        raise ctx.fail(f"axis {axis} before opset 13 (flattening semantics)")
    return ctx.call("log_softmax", [ins[0]], axis=axis)


@_conv("InstanceNormalization")
def _instance_norm(ctx, ins, at):
    x, scale, bias = ins[0], ins[1], ins[2]
    if len(ctx.shape(x)) < 3:
        raise ctx.fail(f"input {ctx.shape(x)} has no spatial axes")
    return ctx.call(
        "instance_norm", [x, scale, bias], axis=1, epsilon=float(at.get("epsilon", 1e-5))
    )


def _reduce_more(op):
    def convert(ctx, ins, at):
        x = ins[0]
        if ctx.opset >= 18:
            axes = _optional_const(ctx, ins, 1, "axes")
            axes = None if axes is None else [int(a) for a in axes]
        else:
            axes = list(at["axes"]) if "axes" in at else None
        if axes is None and at.get("noop_with_empty_axes", 0):
            return x
        return ctx.call(
            op,
            [x],
            axes=None if axes is None else tuple(a % len(ctx.shape(x)) for a in axes),
            keepdims=bool(at.get("keepdims", 1)),
        )

    return convert


for _onnx, _ours in (
    ("ReduceProd", "reduce_prod"),
    ("ReduceL1", "reduce_l1"),
    ("ReduceL2", "reduce_l2"),
    ("ReduceSumSquare", "reduce_sum_square"),
    ("ReduceLogSum", "reduce_log_sum"),
    ("ReduceLogSumExp", "reduce_log_sum_exp"),
):
    _CONVERTERS[_onnx] = _reduce_more(_ours)


def _arg(kind):
    def convert(ctx, ins, at):
        nd = len(ctx.shape(ins[0]))
        return ctx.call(
            f"arg{kind}",
            [ins[0]],
            axis=int(at.get("axis", 0)) % nd,
            keepdims=bool(at.get("keepdims", 1)),
            select_last_index=bool(at.get("select_last_index", 0)),
        )

    return convert


_CONVERTERS["ArgMax"] = _arg("max")
_CONVERTERS["ArgMin"] = _arg("min")


@_conv("Range")
def _range(ctx, ins, at):
    start, limit, delta = (ctx.const(v, n) for v, n in zip(ins, ("start", "limit", "delta")))
    return ctx.b.const(np.arange(start, limit, delta).astype(start.dtype), "range")


@_conv("DepthToSpace")
def _depth_to_space(ctx, ins, at):
    _spatial_2d(ctx, ins[0])
    return ctx.call(
        "depth_to_space", [ins[0]], block=int(at["blocksize"]), mode=at.get("mode", "DCR")
    )


@_conv("SpaceToDepth")
def _space_to_depth(ctx, ins, at):
    _spatial_2d(ctx, ins[0])
    return ctx.call("space_to_depth", [ins[0]], block=int(at["blocksize"]))


@_conv("Trilu")
def _trilu(ctx, ins, at):
    k = int(_optional_const(ctx, ins, 1, "k")[0]) if len(ins) > 1 and ins[1] else 0
    return ctx.call("trilu", [ins[0]], upper=bool(at.get("upper", 1)), k=k)


@_conv("CastLike")
def _cast_like(ctx, ins, at):
    dtype = ctx.b.types[ins[1]].dtype
    return ins[0] if ctx.b.types[ins[0]].dtype == dtype else ctx.call("cast", [ins[0]], dtype=dtype)


@_conv("Size")
def _size(ctx, ins, at):
    return ctx.b.const(np.asarray(int(np.prod(ctx.shape(ins[0]))), np.int64), "size")


def _einsum_terms(ctx, eq: str, ranks: list[int]) -> tuple[list[str], str]:
    """The letters of each operand and of the output, ``...`` spelled out."""
    eq = eq.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ctx.fail(f"equation {eq!r} names {len(terms)} operands, got {len(ranks)}")
    free = [ch for ch in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if ch not in eq]
    ell = 0
    for t, r in zip(terms, ranks):
        if "..." in t:
            ell = max(ell, r - (len(t) - 3))
    fill = "".join(free[:ell])
    terms = [
        t.replace("...", fill[len(fill) - (r - (len(t) - 3)) :]) if "..." in t else t
        for t, r in zip(terms, ranks)
    ]
    if arrow:
        out = out.replace("...", fill)
    else:
        seen = "".join(terms)
        out = fill + "".join(
            sorted(ch for ch in set(seen) if seen.count(ch) == 1 and ch not in fill)
        )
    for t, r in zip(terms, ranks):
        if len(t) != r:
            raise ctx.fail(f"term {t!r} of {eq!r} for an operand of rank {r}")
        if len(set(t)) != len(t):
            raise ctx.fail(f"a repeated index in {t!r} (diagonals and traces are not supported)")
    return terms, out


def _einsum_sum_out(ctx, x, letters, keep):
    drop = [i for i, ch in enumerate(letters) if ch not in keep]
    if not drop:
        return x, letters
    y = ctx.call("reduce", [x], kind="sum", axes=tuple(drop), keepdims=False)
    return y, "".join(ch for ch in letters if ch in keep)


def _einsum_permute(ctx, x, letters, order):
    if letters == order:
        return x
    return ctx.call("transpose", [x], axes=tuple(letters.index(ch) for ch in order))


def _einsum_pair(ctx, a, la, b, lb, keep):
    a, la = _einsum_sum_out(ctx, a, la, set(lb) | keep)
    b, lb = _einsum_sum_out(ctx, b, lb, set(la) | keep)
    sa, sb = ctx.shape(a), ctx.shape(b)
    size = {**dict(zip(lb, sb)), **dict(zip(la, sa))}
    for ch in set(la) & set(lb):
        if sa[la.index(ch)] != sb[lb.index(ch)]:
            raise ctx.fail(f"index {ch!r} has sizes {sa[la.index(ch)]} and {sb[lb.index(ch)]}")
    batch = "".join(ch for ch in la if ch in lb and ch in keep)
    contract = "".join(ch for ch in la if ch in lb and ch not in keep)
    left = "".join(ch for ch in la if ch not in lb)
    right = "".join(ch for ch in lb if ch not in la)

    def prod(s):
        return int(np.prod([size[ch] for ch in s])) if s else 1

    bt, m, k, n = prod(batch), prod(left), prod(contract), prod(right)
    a = _einsum_permute(ctx, a, la, batch + left + contract)
    b = _einsum_permute(ctx, b, lb, batch + contract + right)
    lead = (bt,) if batch else ()
    a = _reshape_to(ctx, a, lead + (m, k))
    b = _reshape_to(ctx, b, lead + (k, n))
    y = ctx.call("matmul", [a, b])
    letters = batch + left + right
    return _reshape_to(ctx, y, [size[ch] for ch in letters]), letters


@_conv("Einsum")
def _einsum(ctx, ins, at):
    """Einsum as sums, transposes, reshapes and (batched) matmuls, pairwise from the
    left; repeated indices within one operand (diagonals) are not supported."""
    terms, out = _einsum_terms(ctx, at["equation"], [len(ctx.shape(v)) for v in ins])
    x, letters = ins[0], terms[0]
    for i in range(1, len(ins)):
        keep = set(out).union(*terms[i + 1 :])
        x, letters = _einsum_pair(ctx, x, letters, ins[i], terms[i], keep)
    x, letters = _einsum_sum_out(ctx, x, letters, set(out))
    return _einsum_permute(ctx, x, letters, out)


def _one_d(fn: Converter, weight: bool) -> Converter:
    """``fn`` (a 2-D NCHW converter) for 1-D inputs ``[N, C, W]``: run as ``[N, C, 1, W]``
    (with the kernel ``[F, C, 1, K]``), the result viewed back without the unit axis."""

    def convert(ctx, ins, at):
        if len(ctx.shape(ins[0])) != 3:
            return fn(ctx, ins, at)
        n, ch, w = ctx.shape(ins[0])
        args = [_reshape_to(ctx, ins[0], (n, ch, 1, w)), *ins[1:]]
        if weight:
            ws = ctx.shape(ins[1])
            if len(ws) != 3:
                raise ctx.fail(f"a 1-D input with a kernel of shape {ws}")
            w4 = (ws[0], ws[1], 1, ws[2])
            args[1] = (
                ctx.b.const(ctx.b.value(ins[1]).reshape(w4), "weight")
                if ctx.b.is_const(ins[1])
                else _reshape_to(ctx, ins[1], w4)
            )
        at2 = dict(at)
        for key in ("kernel_shape", "strides", "dilations", "output_padding"):
            if key in at:
                at2[key] = [1 if key != "output_padding" else 0, *at[key]]
        if "pads" in at:
            at2["pads"] = [0, at["pads"][0], 0, at["pads"][1]]
        y = fn(ctx, args, at2)
        s = ctx.shape(y)
        return _reshape_to(ctx, y, (s[0], s[1], s[3]))

    return convert


for _name, _w in (
    ("Conv", True),
    ("ConvTranspose", True),
    ("MaxPool", False),
    ("AveragePool", False),
    ("GlobalAveragePool", False),
    ("GlobalMaxPool", False),
):
    _CONVERTERS[_name] = _one_d(_CONVERTERS[_name], _w)


@_conv("CumSum")
def _cumsum(ctx, ins, at):
    nd = len(ctx.shape(ins[0]))
    axis = int(ctx.const(ins[1], "axis").reshape(-1)[0]) % nd
    return ctx.call(
        "cumsum",
        [ins[0]],
        axis=axis,
        exclusive=bool(at.get("exclusive", 0)),
        reverse=bool(at.get("reverse", 0)),
    )


@_conv("GatherElements")
def _gather_elements(ctx, ins, at):
    nd = len(ctx.shape(ins[0]))
    return ctx.call("gather_elements", [ins[0], ins[1]], axis=int(at.get("axis", 0)) % nd)


def _fold_zero_pad(fn: Converter) -> Converter:
    """``fn`` (Conv) reading a zero ``Pad`` of the spatial axes takes the padding into its
    own ``pads`` (tf2onnx and ``nn.ZeroPad2d`` models pad explicitly); the Pad call is
    then dead unless something else reads it."""

    def convert(ctx, ins, at):
        src = ins[0]
        pad = next((c for c in reversed(ctx.b.calls) if c.name == src), None)
        if (
            pad is None
            or pad.op != "pad"
            or at.get("auto_pad", "NOTSET") not in ("NOTSET", "")
            or pad.attr["mode"] != "constant"
            or pad.attr.get("value", 0.0) != 0.0
            or any(pad.attr["before"][:2])
            or any(pad.attr["after"][:2])
        ):
            return fn(ctx, ins, at)
        nsp = len(ctx.shape(src)) - 2
        own = list(at.get("pads", [0] * (2 * nsp)))
        before, after = pad.attr["before"][2:], pad.attr["after"][2:]
        at2 = dict(at)
        at2["pads"] = [p + q for p, q in zip(own, list(before) + list(after))]
        return fn(ctx, [pad.args[0], *ins[1:]], at2)

    return convert


_CONVERTERS["Conv"] = _fold_zero_pad(_CONVERTERS["Conv"])
