"""Packing weights for functions that take some of them pre-packed.

A function tuned with the ``RewriteLayout`` postprocessor (in the default ``llvm`` list)
may take a constant weight in the layout its schedule reads it in; the function records
which parameters, their original shapes and the maps in ``attrs["prepacked_args"]`` (see
:mod:`metaschedule.schedule.prepacked`), and a built :class:`~.module.Module` carries the
same in its metadata. Re-lay the weights out once, then call the kernel as often as
needed::

    sch = ms.compile_tir(database, func, "llvm")
    lib = ms.build(sch.mod, "llvm")
    args = ms.pack_weights(lib, [x, w, out])   # w in its original layout: packed once
    lib(*args)                                 # the same packed args on every call
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..schedule.index_map import IndexMap
from ..schedule.prepacked import PackedArg, prepacked_args
from ..tir.function import IRModule, PrimFunc

__all__ = ["pack_weights", "packed_params"]


def packed_params(func_or_module: Any, func_name: str | None = None) -> dict[int, PackedArg]:
    """The pre-packed parameters (index -> original shape and map) of a PrimFunc, an
    IRModule, a Schedule, a built Module or one of its Functions (``func_name``: which
    function of a module; default its entry, ``main`` or the only one)."""
    obj = func_or_module
    mod = getattr(obj, "mod", None)
    if mod is not None and isinstance(mod, IRModule):  # a Schedule
        obj = mod
    if isinstance(obj, PrimFunc):
        return prepacked_args(obj)
    if isinstance(obj, IRModule):
        name = func_name or ("main" if "main" in obj else next(iter(obj)))
        return prepacked_args(obj[name])
    if hasattr(obj, "get_function") and hasattr(obj, "entry_name"):  # a built Module
        obj = obj.get_function(func_name or obj.entry_name)
    meta = getattr(obj, "prepacked", None)
    if isinstance(meta, dict):
        return meta
    raise TypeError(
        "pack_weights: expected a PrimFunc, IRModule, Schedule or built Module, got "
        f"{type(func_or_module).__name__}"
    )


def pack_weights(
    func_or_module: Any, args: Sequence[np.ndarray], func_name: str | None = None
) -> list[np.ndarray]:
    """``args`` (every argument, weights in their original layout) with each weight the
    function takes pre-packed re-laid out as it expects; the other arrays are passed
    through unchanged (the same objects, so outputs stay yours).

    Args:
        func_or_module: what will be called: a PrimFunc, an IRModule, a Schedule (what
            ``ms.compile_tir`` returns), a built Module or Function.
        args: one array per parameter, in the original layouts.
        func_name: the function of a module (default: its entry function).

    Raises:
        ValueError: a wrong number of arrays, or a weight not in its original shape.
    """
    packed = packed_params(func_or_module, func_name)
    args = list(args)
    if packed and max(packed) >= len(args):
        raise ValueError(
            f"pack_weights: the function takes parameter {max(packed)} pre-packed but "
            f"{len(args)} arrays were given; pass every argument, in order"
        )
    out = []
    for j, a in enumerate(args):
        if j not in packed:
            out.append(a)
            continue
        try:
            out.append(packed[j].pack(a))
        except ValueError as err:
            raise ValueError(f"pack_weights: argument {j}: {err}") from None
    return out


def packed_from_metadata(meta: dict[str, Any] | None) -> dict[int, PackedArg]:
    """The ``"prepacked"`` entry of a built function's metadata, parsed."""
    return {
        int(j): PackedArg(tuple(e["original_shape"]), IndexMap.from_json(e["index_map"]))
        for j, e in (meta or {}).items()
    }
