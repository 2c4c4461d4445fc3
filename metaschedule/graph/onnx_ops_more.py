"""ONNX converters beyond the core set: more activations, comparisons, variadic ops, Pad,
Resize, Einsum, arg/extra reductions, layout ops and the like (registered into
:mod:`.onnx_convert`'s table)."""

from __future__ import annotations

import numpy as np

from .onnx_convert import _CONVERTERS, Converter, _conv, _optional_const, _spatial_2d
from .onnx_ops import _reduction, _reshape_to, _softmax_like
from .patterns import gelu_tanh_operand, layer_norm_of, silu_operand

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


@_conv("Mod")
def _mod(ctx, ins, at):
    a, b = ins
    fmod = bool(at.get("fmod", 0))
    if not fmod and ctx.b.types[a].dtype.startswith("float"):
        raise ctx.fail("fmod=0 on floats (the standard asks fmod=1)")
    return ctx.call("mod", [a, b], fmod=fmod)


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


_log_softmax = _conv("LogSoftmax")(_softmax_like("log_softmax"))


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
        return _reduction(ctx, ins, at, op, ctx.opset >= 18)

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


def _fuse_activation(fn: Converter) -> Converter:
    """``Mul(x, Sigmoid(x))`` as one ``silu`` call and the last ``Mul`` of a decomposed
    tanh GELU as one ``gelu_tanh`` call (:mod:`.patterns`), else ``fn``."""

    def convert(ctx, ins, at):
        if len(ins) == 2:
            for op, match in (("silu", silu_operand), ("gelu_tanh", gelu_tanh_operand)):
                v = match(ctx.b, ins[0], ins[1])
                if v is not None:
                    return ctx.call(op, [v])
        return fn(ctx, ins, at)

    return convert


_CONVERTERS["Mul"] = _fuse_activation(_CONVERTERS["Mul"])


def _fuse_layer_norm(fn: Converter) -> Converter:
    """The ``Div`` of a decomposed layer norm (before opset 17) as one ``layer_norm``
    call (:mod:`.patterns`), else ``fn``."""

    def convert(ctx, ins, at):
        found = layer_norm_of(ctx.b, ins[0], ins[1]) if len(ins) == 2 else None
        if found is None:
            return fn(ctx, ins, at)
        x, eps, n = found
        args = [x]
        if n > 1:  # the normalized axes are those of the scale's shape
            ones = np.ones(ctx.shape(x)[-n:], ctx.b.types[x].dtype)
            args.append(ctx.b.const(ones, "ln_scale"))
        return ctx.call("layer_norm", args, epsilon=eps)

    return convert


_CONVERTERS["Div"] = _fuse_layer_norm(_CONVERTERS["Div"])
