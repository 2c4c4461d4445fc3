"""``from_torch``: import a PyTorch module through ``torch.export`` (core ATen ops).

Parameters, buffers and lifted constants become graph constants; what depends on them
alone is folded. ``torch`` is imported by the caller's module only (the ``torch`` extra).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .builder import GraphBuilder
from .frontend_onnx import UnsupportedOperatorError
from .ir import Function

_CONVERTERS: dict[str, Callable[..., Any]] = {}


def _conv(*names: str):
    def deco(fn):
        for n in names:
            _CONVERTERS[n] = fn
        return fn

    return deco


class _Ctx:
    def __init__(self, b: GraphBuilder, node: Any) -> None:
        self.b, self.node = b, node

    def fail(self, what: str) -> UnsupportedOperatorError:
        return UnsupportedOperatorError(
            f"torch {self.node.target} (node {self.node.name!r}): {what}"
        )

    def shape(self, v: str) -> tuple[int, ...]:
        return self.b.types[v].shape

    def dtype(self, v: str) -> str:
        return self.b.types[v].dtype

    def call(self, op: str, args: list[str], **attrs: Any) -> str:
        return self.b.call(op, args, hint=self.node.name, **attrs)

    def operand(self, x: Any, like: str) -> str:
        """A graph value for ``x``: a value name, or a Python number as a 0-d constant."""
        if isinstance(x, str):
            return x
        return self.b.const(np.asarray(x, dtype=self.dtype(like)), "scalar")

    def reshape(self, x: str, shape: Sequence[int]) -> str:
        shape = [int(s) for s in shape]
        if -1 in shape:
            known = int(np.prod([s for s in shape if s != -1]))
            shape[shape.index(-1)] = int(np.prod(self.shape(x))) // max(known, 1)
        if tuple(shape) == self.shape(x):
            return x
        return self.call("reshape", [x], shape=tuple(shape))


def _axis(d: int, nd: int) -> int:
    return d % nd if nd else 0


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


# ----------------------------------------------------------------------------- driver
def _to_numpy(t: Any) -> np.ndarray:
    return t.detach().cpu().contiguous().numpy().copy()


def _target_name(target: Any) -> str:
    if target is operator.getitem:
        return "getitem"
    packet = getattr(target, "overloadpacket", None)
    name = str(packet if packet is not None else target)
    return name if name.startswith("aten.") else f"aten.{name}" if "::" not in name else name


def from_torch(module: Any, example_inputs: Sequence[Any], *, decompose: bool = True) -> Function:
    """Import ``module`` (a ``torch.nn.Module``) by ``torch.export`` on ``example_inputs``.

    The inputs' shapes become the model's static shapes; ``module`` is put in eval mode.

    Raises:
        UnsupportedOperatorError: an ATen operator the importer does not handle (named).
    """
    import torch

    module = module.eval()
    with torch.no_grad():
        ep = torch.export.export(module, tuple(example_inputs))
    if decompose:
        ep = ep.run_decompositions()
    sig = ep.graph_signature
    state = dict(ep.state_dict)
    consts = dict(getattr(ep, "constants", {}) or {})
    lifted: dict[str, Any] = {}
    lifted.update({k: state[v] for k, v in sig.inputs_to_parameters.items()})
    lifted.update(
        {k: state[v] if v in state else consts[v] for k, v in sig.inputs_to_buffers.items()}
    )
    lifted.update(
        {k: consts[v] for k, v in getattr(sig, "inputs_to_lifted_tensor_constants", {}).items()}
    )
    b = GraphBuilder(type(module).__name__)
    env: dict[str, Any] = {}

    def value(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return env[a.name]
        if isinstance(a, (list, tuple)):
            return type(a)(value(x) for x in a)
        return a

    outputs: list[str] = []
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            if node.name in lifted:
                env[node.name] = b.const(_to_numpy(lifted[node.name]), node.name)
            else:
                meta = node.meta["val"]
                env[node.name] = b.input(
                    node.name,
                    tuple(int(s) for s in meta.shape),
                    str(meta.dtype).replace("torch.", ""),
                )
        elif node.op == "call_function":
            name = _target_name(node.target)
            if name == "getitem":
                env[node.name] = env[node.args[0].name][node.args[1]]
                continue
            fn = _CONVERTERS.get(name)
            if fn is None:
                raise UnsupportedOperatorError(
                    f"torch operator {node.target} (node {node.name!r}) is not supported; "
                    f"supported: {', '.join(sorted(_CONVERTERS))}"
                )
            env[node.name] = fn(_Ctx(b, node), *value(node.args), **value(dict(node.kwargs)))
        elif node.op == "output":
            outs = node.args[0]
            outputs = [env[o.name] for o in (outs if isinstance(outs, (list, tuple)) else [outs])]
        else:
            raise UnsupportedOperatorError(f"torch.export node kind {node.op!r} ({node.name})")
    return b.finish(outputs)


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


def supported_ops() -> list[str]:
    """The ATen operators ``from_torch`` imports (overload packets, e.g. ``aten.elu``)."""
    return sorted(_CONVERTERS)


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
