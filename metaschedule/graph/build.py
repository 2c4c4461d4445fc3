"""Building a lowered model: schedule each PrimFunc, compile them into one library,
and prepare the weights.

``schedules`` gives the schedule of each function (the database's best, or the
default schedule). Weight layouts: a scheduled function may take a constant argument
pre-packed (the RewriteLayout postprocessor or the default schedule re-laid it out), as its
attribute ``"prepacked_args"`` says (:mod:`metaschedule.schedule.prepacked`: the original
shape and an ``IndexMap`` from the old indices to the new ones); :func:`prepack_weights`
applies the map to the weight once, here, at compile time.
"""

from __future__ import annotations

import numpy as np

from ..codegen import build as build_module
from ..schedule.prepacked import prepacked_args
from ..target import Target
from ..tir.function import IRModule, PrimFunc
from .executable import Executable
from .lower import LoweredModel, Step


def prepack_weights(
    steps: list[Step], funcs: dict[str, PrimFunc], constants: dict[str, np.ndarray]
) -> tuple[list[Step], dict[str, np.ndarray]]:
    """The steps and constants with weights transformed to the layouts the scheduled
    functions expect (see the module docstring); a constant shared by functions that
    want different layouts gets one copy per layout.

    Raises:
        ValueError: a function takes a parameter pre-packed but the step passes a value
            that is not a constant, or a constant's shape fits neither layout.
    """
    steps = list(steps)
    constants = dict(constants)
    for i, s in enumerate(steps):
        if s.func is None:
            continue
        func = funcs[s.func]
        packed = prepacked_args(func)
        args = list(s.args)
        for j, a in enumerate(args):
            want = tuple(int(x) for x in func.params[j].shape)
            if j not in packed:
                if a in constants and tuple(constants[a].shape) != want:
                    raise ValueError(
                        f"{s.func}: parameter {j} ({func.params[j].name}) has shape {want} "
                        f"but the weight {a} has {constants[a].shape}, and the function does "
                        "not take it pre-packed (no entry in attrs['prepacked_args'])"
                    )
                continue
            if a not in constants:
                raise ValueError(
                    f"{s.func}: parameter {j} ({func.params[j].name}) is taken pre-packed "
                    f"but {a} is not a constant of the model; only weights can be packed at "
                    "compile time"
                )
            key = f"{a}@{s.func}.{j}"
            if key not in constants:
                constants[key] = packed[j].pack(constants[a])
            args[j] = key
        steps[i] = Step(s.func, tuple(args), s.out, s.ops)
    return steps, constants


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
    used = {a for s in steps for a in s.args} | set(graph.outputs)  # a folded output too
    constants = {k: v for k, v in constants.items() if k in used}
    return Executable(
        list(graph.params), list(graph.outputs), steps, dict(graph.types), constants, lib, sources
    )
