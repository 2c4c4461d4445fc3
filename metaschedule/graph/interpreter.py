"""The numpy reference interpreter: what a graph function computes."""

from __future__ import annotations

import numpy as np

from .ir import Call, Function
from .op import get_op


def eval_call(call: Call, args: list[np.ndarray]) -> np.ndarray:
    """One call's output from its arguments' values."""
    return np.asarray(get_op(call.op).ref(list(args), call.attr), order="C")


def interpret(func: Function, *args: np.ndarray, **kwargs: np.ndarray) -> list[np.ndarray]:
    """Run ``func`` on numpy inputs (positional in parameter order, or by name).

    Returns:
        The outputs, in ``func.outputs`` order.
    """
    env: dict[str, np.ndarray] = dict(func.constants)
    inputs = bind_inputs(func, args, kwargs)
    env.update(inputs)
    for call in func.calls:
        env[call.name] = eval_call(call, [env[a] for a in call.args])
    return [env[o] for o in func.outputs]


def bind_inputs(func: Function, args: tuple, kwargs: dict) -> dict[str, np.ndarray]:
    """Positional and keyword inputs matched to ``func.params``, checked."""
    names = [p.name for p in func.params]
    if len(args) > len(names):
        raise TypeError(
            f"{func.name} takes {len(names)} inputs ({', '.join(names)}), got {len(args)}"
        )
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise TypeError(f"{func.name} has no input {k!r}; inputs: {', '.join(names)}")
        if k in bound:
            raise TypeError(f"input {k!r} given twice")
        bound[k] = v
    out = {}
    for p in func.params:
        if p.name not in bound:
            raise TypeError(f"{func.name}: missing input {p.name!r} ({p.type})")
        a = np.asarray(bound[p.name])
        if tuple(a.shape) != p.type.shape or str(a.dtype) != p.type.dtype:
            raise ValueError(
                f"input {p.name!r} must be {p.type}, got {a.dtype}[{', '.join(map(str, a.shape))}]"
            )
        out[p.name] = np.asarray(a, order="C")
    return out
