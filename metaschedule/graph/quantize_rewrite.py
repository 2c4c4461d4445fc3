"""Graph rewrite of quantized models: ``quantize(dequantize(acc))`` -> ``requantize(acc)``.

The QDQ importer (:mod:`.onnx_ops_quantized`) turns ``DQ -> Conv/MatMul/Gemm`` into an
integer kernel whose int32 accumulator is dequantized by ``x_scale * w_scale``; when the
model quantizes that result again (``-> Q``, optionally through a ReLU), the pair becomes
one ``requantize`` by ``float32(x_scale * w_scale) / y_scale``, rounding half to even and
saturating (a ReLU narrows the saturation to the zero point). This is the arithmetic of
onnxruntime's fused QLinearConv / QLinearMatMul / QGemm, which differs from
``quantize(dequantize(acc))`` only in float32 rounding; :func:`~.fuse.fuse` then makes the
kernel and its epilogue one function, TVM's ``FakeQuantizationToInteger`` + ``FuseOps``.
"""

from __future__ import annotations

import numpy as np

from .infer import infer_types
from .ir import Call, Function, make_attrs
from .transform import dead_code_elimination

__all__ = ["fuse_requantize"]

#: integer kernels whose accumulators the rewrite requantizes (through a reshape too)
INTEGER_KERNELS = ("qnn_conv2d", "qnn_matmul")


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
    calls = []
    changed = False
    for c in func.calls:
        new = _rewrite(func, prod, consts, c)
        changed |= new is not c
        calls.append(new)
    if not changed:
        return func
    return infer_types(dead_code_elimination(func.with_calls(calls, consts)))


def _rewrite(func: Function, prod: dict[str, Call], consts: dict, c: Call) -> Call:
    if c.op != "quantize":
        return c
    v, sy, zy = c.args
    if sy not in consts or zy not in consts or consts[sy].size != 1 or consts[zy].size != 1:
        return c
    relu = prod.get(v)
    if relu is not None and relu.op == "relu":
        v = relu.args[0]
    else:
        relu = None
    acc = _accumulator(func, prod, v)
    if acc is None:
        return c
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
    return Call(c.name, "requantize", (acc, name), make_attrs(attrs))
