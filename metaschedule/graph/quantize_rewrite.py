"""Graph rewrite of quantized models: ``quantize(dequantize(acc))`` -> ``requantize(acc)``.

The QDQ importer (:mod:`.onnx_ops_quantized`) turns ``DQ -> Conv/MatMul/Gemm`` into an
integer kernel whose int32 accumulator is dequantized by ``x_scale * w_scale``; when the
model quantizes that result again (``-> Q``, optionally through a ReLU), the pair becomes
one ``requantize`` by ``float32(x_scale * w_scale) / y_scale``, rounding half to even and
saturating (a ReLU narrows the saturation to the zero point). This is the arithmetic of
onnxruntime's fused QLinearConv / QLinearMatMul / QGemm, which differs from
``quantize(dequantize(acc))`` only in float32 rounding; :func:`~.fuse.fuse` then makes the
kernel and its epilogue one function, TVM's ``FakeQuantizationToInteger`` + ``FuseOps``.

The other ``quantize(op(dequantize(..)))`` patterns that onnxruntime's QDQ models hold,
rewritten to integer operators the way onnxruntime's own QDQ fusions run them:

* ``add`` of two dequantized 8-bit tensors -> ``qnn_add`` (QLinearAdd: the residual
  connection of a ResNet);
* a data movement or a max (``max_pool2d``, ``reshape``, ``transpose``) quantized back
  with the same scale and zero point -> the operator on the 8-bit tensor itself
  (dequantize is monotonic, so max commutes with it);
* ``global_avg_pool2d`` -> an int32 sum over the image, minus ``zero_point * H * W``,
  requantized by ``float32(x_scale / float32(y_scale * H * W))`` (QLinearGlobalAveragePool).

Each needs per-tensor constant scales and zero points; anything else stays in float.
"""

from __future__ import annotations

import numpy as np

from .infer import infer_types
from .ir import Call, Function, make_attrs
from .transform import dead_code_elimination

__all__ = ["fuse_requantize"]

#: integer kernels whose accumulators the rewrite requantizes (through a reshape too)
INTEGER_KERNELS = ("qnn_conv2d", "qnn_matmul")
#: operators that run on the 8-bit tensor when quantized back with the same parameters
PASS_THROUGH = ("max_pool2d", "reshape", "transpose")
_EIGHT_BITS = ("uint8", "int8")


def _accumulator(func: Function, prod: dict[str, Call], value: str) -> str | None:
    """``value``'s int32 accumulator when ``value = dequantize(acc, scale, 0)`` of an
    integer kernel with a constant scale, else None."""
    dq = prod.get(value)
    if dq is None or dq.op != "dequantize":
        return None
    acc, scale, zp = dq.args
    if scale not in func.constants or zp not in func.constants or np.any(func.constants[zp]):
        return None
    src = prod.get(acc)
    if src is not None and src.op == "reshape":
        src = prod.get(src.args[0])
    if src is None or src.op not in INTEGER_KERNELS:
        return None
    return acc


def fuse_requantize(func: Function) -> Function:
    """Every ``quantize([relu](dequantize(acc, s, 0)), s_y, z_y)`` of an integer kernel's
    ``acc`` as ``requantize(acc, s / s_y)`` (see the module docstring); the dequantize and
    the ReLU stay only when something else reads them."""
    prod = func.producers()
    consts = dict(func.constants)
    calls: list[Call] = []
    changed = False
    for c in func.calls:
        new = _rewrite(func, prod, consts, c)
        if new is None:
            new = _rewrite_other(func, prod, consts, c)
        changed |= new is not None
        calls.extend([c] if new is None else new)
    if not changed:
        return func
    return infer_types(dead_code_elimination(func.with_calls(calls, consts)))


def _scalar_param(consts: dict, scale: str, zp: str) -> tuple[np.float32, int] | None:
    """A per-tensor (scale, zero point) pair of constants, or None."""
    if scale not in consts or zp not in consts or consts[scale].size != 1 or consts[zp].size != 1:
        return None
    return np.float32(consts[scale].reshape(())), int(consts[zp].reshape(()))


def _dequantized(func: Function, prod: dict[str, Call], consts: dict, value: str):
    """``(q, scale, zero_point)`` when ``value = dequantize(q, scale, zero_point)`` of an
    8-bit ``q`` with per-tensor constant parameters, else None."""
    dq = prod.get(value)
    if dq is None or dq.op != "dequantize" or func.type_of(dq.args[0]).dtype not in _EIGHT_BITS:
        return None
    param = _scalar_param(consts, dq.args[1], dq.args[2])
    return None if param is None else (dq.args[0], *param)


def _fresh(consts: dict, prod: dict, base: str) -> str:
    name = base
    while name in consts or name in prod:
        name += "_"
    return name


def _rewrite_other(func: Function, prod: dict[str, Call], consts: dict, c: Call):
    """The calls replacing ``c = quantize(op(dequantize(..)))`` for the other patterns of
    the module docstring, or None."""
    if c.op != "quantize" or c.args[0] not in prod:
        return None
    out = _scalar_param(consts, c.args[1], c.args[2])
    src = prod[c.args[0]]
    if out is None or not src.args:
        return None
    dtype = c.attr["out_dtype"]
    x = _dequantized(func, prod, consts, src.args[0])
    if src.op == "add" and x is not None:
        y = _dequantized(func, prod, consts, src.args[1])
        if y is None or {func.type_of(x[0]).dtype, func.type_of(y[0]).dtype} != {dtype}:
            return None
        attrs = {
            "a_scale": float(x[1]),
            "a_zero_point": x[2],
            "b_scale": float(y[1]),
            "b_zero_point": y[2],
            "scale": float(out[0]),
            "zero_point": out[1],
            "out_dtype": dtype,
        }
        return [Call(c.name, "qnn_add", (x[0], y[0]), make_attrs(attrs))]
    if x is None or func.type_of(x[0]).dtype != dtype:
        return None
    if src.op in PASS_THROUGH and len(src.args) == 1 and (x[1], x[2]) == out:
        return [Call(c.name, src.op, (x[0],), src.attrs)]
    if src.op == "global_avg_pool2d":
        return _global_avg_pool(func, prod, consts, c, src, x, out)
    return None


def _global_avg_pool(func, prod, consts, c: Call, src: Call, x, out) -> list[Call]:
    q, sx, zx = x
    nhwc = src.attr.get("data_layout", "NCHW") == "NHWC"
    shape = func.type_of(q).shape
    axes = (1, 2) if nhwc else (2, 3)
    size = int(shape[axes[0]] * shape[axes[1]])
    f32 = np.float32
    mult = _fresh(consts, prod, f"{c.name}_multiplier")
    consts[mult] = np.array(sx / f32(out[0] * f32(size)), f32)
    wide, acc = _fresh(consts, prod, f"{c.name}_i32"), _fresh(consts, prod, f"{c.name}_sum")
    calls = [
        Call(wide, "cast", (q,), make_attrs({"dtype": "int32"})),
        Call(acc, "reduce", (wide,), make_attrs({"kind": "sum", "axes": axes, "keepdims": True})),
    ]
    if zx:
        bias = _fresh(consts, prod, f"{c.name}_zero_sum")
        consts[bias] = np.array(zx * size, np.int32)
        shifted = _fresh(consts, prod, f"{c.name}_acc")
        calls.append(Call(shifted, "subtract", (acc, bias)))
        acc = shifted
    attrs = {"output_zero_point": out[1], "out_dtype": c.attr["out_dtype"]}
    return [*calls, Call(c.name, "requantize", (acc, mult), make_attrs(attrs))]


def _rewrite(func: Function, prod: dict[str, Call], consts: dict, c: Call) -> list[Call] | None:
    if c.op != "quantize":
        return None
    v, sy, zy = c.args
    if sy not in consts or zy not in consts or consts[sy].size != 1 or consts[zy].size != 1:
        return None
    relu = prod.get(v)
    if relu is not None and relu.op == "relu":
        v = relu.args[0]
    else:
        relu = None
    acc = _accumulator(func, prod, v)
    if acc is None:
        return None
    s_acc = consts[prod[v].args[1]].astype(np.float32)
    mult = (s_acc / np.float32(consts[sy].reshape(()))).astype(np.float32)
    name = f"{c.name}_multiplier"
    while name in consts:
        name += "_"
    consts[name] = mult
    zp = int(consts[zy].reshape(()))
    attrs = {"output_zero_point": zp, "out_dtype": c.attr["out_dtype"]}
    if relu is not None:
        attrs["out_min"] = zp
    return [Call(c.name, "requantize", (acc, name), make_attrs(attrs))]
