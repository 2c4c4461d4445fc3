"""The PyTorch importer's node context and converter registry: :mod:`.frontend_torch`
walks an exported program's nodes and calls the converter registered (with ``@_conv``)
for each ATen op in :mod:`.torch_ops` or :mod:`.torch_ops_more`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .builder import GraphBuilder
from .onnx_convert import UnsupportedOperatorError

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


def supported_ops() -> list[str]:
    """The ATen operators ``from_torch`` imports (overload packets, e.g. ``aten.elu``)."""
    return sorted(_CONVERTERS)
