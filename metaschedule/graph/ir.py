"""The graph IR: a function of named inputs, constants (weights) and operator calls.

Our counterpart of Relax's dataflow functions, kept small: every value is a static
tensor with a name; a :class:`Call` applies a registered operator (see ``op.py``) to
values and names its one output. Calls are in topological order. Example::

    fn main(%x: float32[1, 8]) {
      const %w: float32[8, 4]
      %0 = matmul(%x, %w)                    # float32[1, 4]
      %1 = relu(%0)                          # float32[1, 4]
      return %1
    }
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class TensorType:
    """A static shape and a dtype."""

    shape: tuple[int, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(str(s) for s in self.shape)}]"


@dataclass(frozen=True)
class Var:
    """An input of a function."""

    name: str
    type: TensorType


@dataclass(frozen=True)
class Call:
    """``name = op(*args, **attrs)``: ``args`` name values (inputs, constants, calls)."""

    name: str
    op: str
    args: tuple[str, ...]
    attrs: tuple[tuple[str, Any], ...] = ()

    @property
    def attr(self) -> dict[str, Any]:
        return dict(self.attrs)


def make_attrs(attrs: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Attributes as a hashable, sorted tuple (lists become tuples)."""

    def freeze(v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return tuple(freeze(x) for x in v)
        if isinstance(v, np.generic):
            return v.item()
        return v

    return tuple(sorted((k, freeze(v)) for k, v in attrs.items()))


@dataclass
class Function:
    """A whole model: ``params`` (inputs), ``constants`` (weights), ``calls``, ``outputs``.

    ``types`` maps every value name to its :class:`TensorType` (filled by
    :func:`~metaschedule.graph.infer.infer_types`, which the builder runs as it goes).
    """

    params: list[Var]
    constants: dict[str, np.ndarray]
    calls: list[Call]
    outputs: list[str]
    types: dict[str, TensorType] = field(default_factory=dict)
    name: str = "main"

    def type_of(self, value: str) -> TensorType:
        if value in self.types:
            return self.types[value]
        if value in self.constants:
            c = self.constants[value]
            return TensorType(tuple(c.shape), str(c.dtype))
        raise KeyError(f"value %{value} has no type; run infer_types first")

    def users(self) -> dict[str, list[Call]]:
        """For each value, the calls that read it."""
        out: dict[str, list[Call]] = {}
        for c in self.calls:
            for a in dict.fromkeys(c.args):
                out.setdefault(a, []).append(c)
        return out

    def producers(self) -> dict[str, Call]:
        return {c.name: c for c in self.calls}

    def script(self) -> str:
        """The printed form (see the module docstring)."""
        ps = ", ".join(f"%{p.name}: {p.type}" for p in self.params)
        lines = [f"fn {self.name}({ps}) {{"]
        for name, c in self.constants.items():
            lines.append(f"  const %{name}: {c.dtype}[{', '.join(map(str, c.shape))}]")
        for c in self.calls:
            args = [f"%{a}" for a in c.args] + [f"{k}={_fmt(v)}" for k, v in c.attrs]
            text = f"  %{c.name} = {c.op}({', '.join(args)})"
            ty = self.types.get(c.name)
            lines.append(f"{text:<60} # {ty}" if ty else text)
        lines.append(f"  return {', '.join('%' + o for o in self.outputs)}")
        lines.append("}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        return (
            f"Function({self.name}: {len(self.params)} inputs, {len(self.constants)} "
            f"constants, {len(self.calls)} calls)"
        )

    def with_calls(
        self,
        calls: list[Call],
        constants: dict[str, np.ndarray] | None = None,
        outputs: list[str] | None = None,
    ) -> Function:
        """A copy with other calls (and constants/outputs); unused constants dropped."""
        consts = self.constants if constants is None else constants
        outs = self.outputs if outputs is None else outputs
        used = {a for c in calls for a in c.args} | set(outs)
        return Function(
            list(self.params),
            {k: v for k, v in consts.items() if k in used},
            list(calls),
            list(outs),
            dict(self.types),
            self.name,
        )


def _fmt(v: Any) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    if isinstance(v, float):
        return repr(v)
    return str(v)
