"""``GraphBuilder``: emit calls one by one, inferring types and folding constants.

A call whose arguments are all constants is evaluated with the reference interpreter
at once and becomes a constant (constant folding of weight-only subgraphs, and of
``Shape`` arithmetic on static shapes in the importers).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tir.names import unique_name
from .infer import infer_call
from .interpreter import eval_call
from .ir import Call, Function, TensorType, Var, make_attrs

#: the most values one ``concat`` call joins: te's concatenate selects its source with one
#: nested if-then-else per input, so more are joined by a tree of concats (a model's
#: 3000-input Concat would otherwise be an expression too deep for the IR's walks)
MAX_CONCAT_ARGS = 64


class GraphBuilder:
    def __init__(self, name: str = "main", fold: bool = True) -> None:
        self.name = name
        self.fold = fold
        self.params: list[Var] = []
        self.constants: dict[str, np.ndarray] = {}
        self.calls: list[Call] = []
        self.types: dict[str, TensorType] = {}
        #: facts a converter leaves for later ones, by value name (the quantized importer
        #: records which integer tensor, scale and zero point a folded constant came from)
        self.notes: dict[str, Any] = {}
        self._used: set[str] = set()

    def _fresh(self, hint: str) -> str:
        base = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in hint) or "v"
        name = unique_name(base, self._used)
        self._used.add(name)
        return name

    def input(self, name: str, shape: tuple[int, ...], dtype: str = "float32") -> str:
        name = self._fresh(name)
        t = TensorType(tuple(int(s) for s in shape), str(dtype))
        self.params.append(Var(name, t))
        self.types[name] = t
        return name

    def const(self, value: Any, hint: str = "const") -> str:
        arr = np.array(value, order="C")
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        name = self._fresh(hint)
        self.constants[name] = arr
        self.types[name] = TensorType(tuple(arr.shape), str(arr.dtype))
        return name

    def is_const(self, value: str) -> bool:
        return value in self.constants

    def value(self, name: str) -> np.ndarray:
        return self.constants[name]

    def call(self, op: str, args: list[str], hint: str | None = None, **attrs: Any) -> str:
        """Emit ``op(*args, **attrs)`` and return its value's name (a constant if folded)."""
        while op == "concat" and len(args) > MAX_CONCAT_ARGS:
            chunks = [args[i : i + MAX_CONCAT_ARGS] for i in range(0, len(args), MAX_CONCAT_ARGS)]
            args = [c[0] if len(c) == 1 else self.call(op, c, hint, **attrs) for c in chunks]
        call = Call("", op, tuple(args), make_attrs(attrs))
        if self.fold and args and all(a in self.constants for a in args):
            out = eval_call(call, [self.constants[a] for a in args])
            return self.const(out, hint or op)
        t = infer_call(call, [self.types[a] for a in args])
        name = self._fresh(hint or op)
        self.calls.append(Call(name, op, tuple(args), call.attrs))
        self.types[name] = t
        return name

    def finish(self, outputs: list[str]) -> Function:
        from .transform import dead_code_elimination

        return dead_code_elimination(
            Function(
                self.params, self.constants, self.calls, list(outputs), dict(self.types), self.name
            )
        )
