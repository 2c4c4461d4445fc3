"""Argument information: what a runner must allocate to call a built function.

``ArgInfo.as_json`` gives TVM's layout, ``["TENSOR", dtype, shape]``, so argument lists
travel to worker processes and into tuning records as plain JSON.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from .tir.buffer import Buffer
from .tir.dtype import check_dtype
from .tir.expr import IntImm
from .tir.function import IRModule, PrimFunc

__all__ = ["ArgInfo", "TensorInfo"]


class ArgInfo(ABC):
    """Argument information of one parameter of a built function."""

    @abstractmethod
    def as_json(self) -> Any:
        """The JSON-able form of this argument information."""

    @staticmethod
    def from_json(json_obj: Any) -> ArgInfo:
        """Parse what :meth:`as_json` produced; a malformed object is a ``ValueError``."""
        if isinstance(json_obj, (list, tuple)) and json_obj and json_obj[0] == "TENSOR":
            return TensorInfo.from_json(json_obj)
        raise ValueError(f"expected ArgInfo JSON like ['TENSOR', dtype, shape], got {json_obj!r}")

    @staticmethod
    def from_prim_func(func: PrimFunc) -> list[ArgInfo]:
        """One :class:`TensorInfo` per buffer parameter of ``func``, in order."""
        if not isinstance(func, PrimFunc):
            raise TypeError(f"expected a PrimFunc, got {type(func).__name__}")
        return [TensorInfo.from_buffer(b) for b in func.params]

    @staticmethod
    def from_entry_func(mod: IRModule, remove_preproc: bool = True) -> list[ArgInfo]:
        """Argument information of the module's entry function ("main", or the only one).

        ``remove_preproc`` is accepted for TVM compatibility; there is no layout
        pre-processing function here, so it changes nothing.
        """
        if isinstance(mod, PrimFunc):
            return ArgInfo.from_prim_func(mod)
        if "main" in mod:
            return ArgInfo.from_prim_func(mod["main"])
        if len(mod) == 1:
            return ArgInfo.from_prim_func(mod[next(iter(mod))])
        raise ValueError(
            f"cannot tell the entry function of a module with functions "
            f"{', '.join(mod)}; name one 'main'"
        )


@dataclass(frozen=True)
class TensorInfo(ArgInfo):
    """A dense tensor argument: its dtype and static shape."""

    dtype: str
    shape: tuple[int, ...]

    def __post_init__(self):
        object.__setattr__(self, "dtype", check_dtype(self.dtype))
        try:
            shape = tuple(int(s) for s in self.shape)
        except (TypeError, ValueError):
            raise TypeError(f"TensorInfo shape must be integers, got {self.shape!r}") from None
        if any(s < 0 for s in shape):
            raise ValueError(f"TensorInfo shape must be non-negative, got {shape}")
        object.__setattr__(self, "shape", shape)

    @staticmethod
    def from_buffer(buffer: Buffer) -> TensorInfo:
        dims = []
        for k, s in enumerate(buffer.shape):
            if not isinstance(s, IntImm):
                raise ValueError(
                    f"buffer {buffer.name} has a symbolic dimension {k} ({s}); measuring needs "
                    "static shapes: bind the shape variables first"
                )
            dims.append(s.value)
        return TensorInfo(buffer.dtype, tuple(dims))

    def as_json(self) -> list:
        return ["TENSOR", self.dtype, list(self.shape)]

    @staticmethod
    def from_json(json_obj: Any) -> TensorInfo:
        try:
            tag, dtype, shape = json_obj
            if tag != "TENSOR":
                raise ValueError(f"tag {tag!r}")
            return TensorInfo(dtype, tuple(shape))
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"expected TensorInfo JSON like ['TENSOR', 'float32', [4, 4]], got {json_obj!r}: "
                f"{err}"
            ) from err

    def __str__(self) -> str:
        return f'TensorInfo("{self.dtype}", {list(self.shape)})'
