"""Building a lowered model: schedule each PrimFunc, compile them into one library,
and prepare the weights.

``schedules`` gives the schedule of each function (the database's best, or the
default schedule). Weight layouts: a scheduled function whose parameter for a
constant argument has another shape than the graph value (as a RewriteLayout
postprocessor produces) must carry, in its attribute ``"layout_free_buffers"``, a map
from that parameter's index to an ``IndexMap`` from the old indices to the new ones;
:func:`prepack_weights` applies it to the weight once, here, at compile time.
"""

from __future__ import annotations

import numpy as np

from ..codegen import build as build_module
from ..target import Target
from ..tir.expr import IntImm, Var
from ..tir.function import IRModule, PrimFunc
from .executable import Executable
from .lower import LoweredModel, Step


def prepack_weights(
    steps: list[Step], funcs: dict[str, PrimFunc], constants: dict[str, np.ndarray]
) -> tuple[list[Step], dict[str, np.ndarray]]:
    """The steps and constants with weights transformed to the layouts the scheduled
    functions expect (see the module docstring); a constant shared by functions that
    want different layouts gets one copy per layout."""
    steps = list(steps)
    constants = dict(constants)
    for i, s in enumerate(steps):
        if s.func is None:
            continue
        func = funcs[s.func]
        args = list(s.args)
        for j, a in enumerate(args):
            if a not in constants:
                continue
            want = tuple(int(x) for x in func.params[j].shape)
            have = tuple(constants[a].shape)
            if want == have:
                continue
            maps = func.attrs.get("layout_free_buffers") or {}
            index_map = maps.get(j)
            if index_map is None:
                raise ValueError(
                    f"{s.func}: parameter {j} ({func.params[j].name}) has shape {want} but "
                    f"the weight {a} has {have}, and the function gives no index map for it "
                    "in attrs['layout_free_buffers']"
                )
            key = f"{a}@{s.func}.{j}"
            if key not in constants:
                constants[key] = _apply_index_map(index_map, constants[a], want)
            args[j] = key
        steps[i] = Step(s.func, tuple(args), s.out, s.ops)
    return steps, constants


_NP_BINARY = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "FloorDiv": np.floor_divide,
    "FloorMod": np.mod,
    "Min": np.minimum,
    "Max": np.maximum,
}


def _eval_index(expr, env: dict) -> np.ndarray:
    """An integer index expression evaluated on numpy index grids."""
    if isinstance(expr, Var):
        return env[expr]
    if isinstance(expr, IntImm):
        return np.int64(expr.value)
    fn = _NP_BINARY.get(type(expr).__name__)
    if fn is None:
        raise ValueError(f"prepack_weights: cannot evaluate index expression {expr}")
    return fn(_eval_index(expr.a, env), _eval_index(expr.b, env))


def _apply_index_map(index_map, arr: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``out[index_map(i)] = arr[i]`` for every index ``i`` of ``arr`` (a bijection)."""
    grids = np.indices(arr.shape, dtype=np.int64)
    env = dict(zip(index_map.initial_indices, grids))
    dest = tuple(np.broadcast_to(_eval_index(e, env), arr.shape) for e in index_map.final_indices)
    out = np.zeros(shape, arr.dtype)
    out[dest] = arr
    return out


def build_executable(
    model: LoweredModel,
    scheduled: dict[str, PrimFunc],
    target: Target,
    sources: dict[str, str] | None = None,
) -> Executable:
    """Compile the scheduled functions into one library and wrap it with the steps."""
    mod = IRModule({name: scheduled[name] for name in model.funcs})
    lib = build_module(mod, target)
    graph = model.graph
    steps, constants = prepack_weights(model.steps, scheduled, graph.constants)
    used = {a for s in steps for a in s.args}
    constants = {k: v for k, v in constants.items() if k in used}
    return Executable(
        list(graph.params), list(graph.outputs), steps, dict(graph.types), constants, lib, sources
    )
