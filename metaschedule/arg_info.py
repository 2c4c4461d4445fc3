"""Argument information: what a runner must allocate to call a built function.

``ArgInfo.as_json`` gives TVM's layout, ``["TENSOR", dtype, shape]``, so argument lists
travel to worker processes and into tuning records as plain JSON. A weight the function
takes pre-packed (see :mod:`metaschedule.schedule.prepacked`) adds a fourth entry,
``{"original_shape": [...], "index_map": ...}``; ``shape`` is always the shape the built
function takes, so a runner allocates random arguments of that shape unchanged.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from .schedule.index_map import IndexMap
from .schedule.prepacked import prepacked_args
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
        packed = prepacked_args(func)
        infos: list[ArgInfo] = []
        for j, b in enumerate(func.params):
            info = TensorInfo.from_buffer(b)
            if j in packed:
                p = packed[j]
                info = dataclasses.replace(
                    info, original_shape=p.original_shape, index_map=p.index_map
                )
            infos.append(info)
        return infos

    @staticmethod
    def from_entry_func(mod: IRModule, remove_preproc: bool = True) -> list[ArgInfo]:
        """Argument information of the module's entry function ("main", or the only one).

        ``remove_preproc`` is accepted for TVM compatibility; there is no layout
        pre-processing function here (a weight the function takes pre-packed is described
        by its :class:`TensorInfo`), so it changes nothing.
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
    """A dense tensor argument: its dtype and static shape; for a pre-packed weight also
    its original shape and the map from original indices to packed ones."""

    dtype: str
    shape: tuple[int, ...]
    original_shape: tuple[int, ...] | None = None
    index_map: IndexMap | None = field(default=None, compare=False)

    @property
    def is_prepacked(self) -> bool:
        """Whether the function takes this argument pre-packed (see ``original_shape``)."""
        return self.original_shape is not None

    def __post_init__(self):
        object.__setattr__(self, "dtype", check_dtype(self.dtype))
        try:
            shape = tuple(int(s) for s in self.shape)
        except (TypeError, ValueError):
            raise TypeError(f"TensorInfo shape must be integers, got {self.shape!r}") from None
        if any(s < 0 for s in shape):
            raise ValueError(f"TensorInfo shape must be non-negative, got {shape}")
        object.__setattr__(self, "shape", shape)
        if self.original_shape is not None:
            object.__setattr__(self, "original_shape", tuple(int(s) for s in self.original_shape))

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
        out: list = ["TENSOR", self.dtype, list(self.shape)]
        if self.original_shape is not None:
            packed: dict[str, Any] = {"original_shape": list(self.original_shape)}
            if self.index_map is not None:
                packed["index_map"] = self.index_map.as_json()
            out.append(packed)
        return out

    @staticmethod
    def from_json(json_obj: Any) -> TensorInfo:
        try:
            tag, dtype, shape, *rest = json_obj
            if tag != "TENSOR" or len(rest) > 1:
                raise ValueError(f"tag {tag!r}" if tag != "TENSOR" else "too many entries")
            if not rest:
                return TensorInfo(dtype, tuple(shape))
            packed = rest[0]
            imap = packed.get("index_map")
            return TensorInfo(
                dtype,
                tuple(shape),
                tuple(packed["original_shape"]),
                None if imap is None else IndexMap.from_json(imap),
            )
        except (TypeError, ValueError, KeyError, AttributeError) as err:
            raise ValueError(
                f"expected TensorInfo JSON like ['TENSOR', 'float32', [4, 4]] (and for a "
                "pre-packed weight a fourth entry {'original_shape': [...], 'index_map': ...}), "
                f"got {json_obj!r}: {err}"
            ) from err

    def __str__(self) -> str:
        if self.original_shape is not None:
            return (
                f'TensorInfo("{self.dtype}", {list(self.shape)}, pre-packed from '
                f"{list(self.original_shape)} by {self.index_map})"
            )
        return f'TensorInfo("{self.dtype}", {list(self.shape)})'
