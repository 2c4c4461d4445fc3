"""PrimFunc (a function of buffers) and IRModule (named functions)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .buffer import Buffer
from .expr import Node
from .stmt import Block, BlockRealize, Stmt

#: ``attrs`` key (TVM's): the indices of the parameters that may be re-laid out ahead of
#: time (constant weights), set by ``te.create_prim_func`` from ``te.compute(...,
#: attrs={"layout_free_placeholders": [W]})`` and by graph lowering for constants.
LAYOUT_FREE_BUFFERS = "layout_free_buffers"
#: ``attrs`` key (ours): ``{param index: {"original_shape": [...], "index_map": <IndexMap JSON>}}``
#: for each parameter the function takes pre-packed (re-laid out from its original shape by
#: the map; see :mod:`metaschedule.schedule.prepacked`).
PREPACKED_ARGS = "prepacked_args"


@dataclass(frozen=True, eq=False, repr=False)
class PrimFunc(Node):
    """A function whose parameters are buffers and whose body is a statement.

    As in TensorIR, the body of a schedulable function is a BlockRealize of a
    ``root`` block whose ``alloc_buffers`` hold the intermediate tensors.
    """

    params: tuple[Buffer, ...]
    body: Stmt
    attrs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "attrs", dict(self.attrs))

    def with_body(self, body: Stmt) -> PrimFunc:
        return PrimFunc(self.params, body, self.attrs)

    def with_attr(self, key: str, value: Any) -> PrimFunc:
        return PrimFunc(self.params, self.body, {**self.attrs, key: value})

    @property
    def root_block(self) -> Block | None:
        if isinstance(self.body, BlockRealize):
            return self.body.block
        return None


@dataclass(frozen=True, eq=False, repr=False)
class IRModule(Node):
    """A mapping from global names to functions."""

    functions: dict[str, PrimFunc]

    def __post_init__(self):
        object.__setattr__(self, "functions", dict(self.functions))

    @staticmethod
    def from_expr(func: PrimFunc) -> IRModule:
        name = func.attrs.get("global_symbol", "main")
        return IRModule({name: func})

    def __getitem__(self, name: str) -> PrimFunc:
        try:
            return self.functions[name]
        except KeyError:
            raise KeyError(
                f"no function {name!r} in module; it has: {', '.join(self.functions)}"
            ) from None

    def __contains__(self, name: str) -> bool:
        return name in self.functions

    def __iter__(self) -> Iterator[str]:
        return iter(self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    def items(self):
        return self.functions.items()

    def get_global_vars(self) -> list[str]:
        return list(self.functions)

    def with_function(self, name: str, func: PrimFunc) -> IRModule:
        return IRModule({**self.functions, name: func})


def as_module(func_or_mod: PrimFunc | IRModule) -> IRModule:
    """Wrap a PrimFunc into a module named ``main``; pass modules through."""
    if isinstance(func_or_mod, IRModule):
        return func_or_mod
    if isinstance(func_or_mod, PrimFunc):
        return IRModule({"main": func_or_mod})
    raise TypeError(f"expected a PrimFunc or an IRModule, got {type(func_or_mod).__name__}")
