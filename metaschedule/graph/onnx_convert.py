"""The ONNX importer's node context and converter registry, and helpers the converters
share: :mod:`.frontend_onnx` walks a model's nodes and calls the converter registered
(with ``@_conv``) for each op type in :mod:`.onnx_ops` or :mod:`.onnx_ops_more`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .builder import GraphBuilder


class UnsupportedOperatorError(NotImplementedError):
    """An ONNX operator (or a use of one) the importer does not handle."""


def node_label(node: Any, index: int) -> str:
    """How messages name an ONNX node: its name, or (exporters often leave it empty)
    its position in the graph and its first output."""
    if node.name:
        return repr(node.name)
    first = next((o for o in node.output if o), None)
    return f"#{index}" + (f" writing {first!r}" if first else "")


class _Ctx:
    def __init__(self, b: GraphBuilder, opset: int, node: Any, index: int = 0) -> None:
        self.b, self.opset, self.node = b, opset, node
        self.label = node_label(node, index)

    def where(self) -> str:
        return f"{self.node.op_type} (node {self.label}, opset {self.opset})"

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


def _optional_const(ctx: _Ctx, ins: list, i: int, what: str) -> np.ndarray | None:
    """Optional constant input ``i`` as a flat array; None when absent or empty."""
    if len(ins) <= i or not ins[i]:
        return None
    arr = ctx.const(ins[i], what)
    return None if arr.size == 0 else arr.reshape(-1)
