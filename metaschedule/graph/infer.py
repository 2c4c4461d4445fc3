"""Shape and dtype inference: each call is lowered onto te placeholders of its inputs'
types, and the te operator library reports the output's shape and dtype."""

from __future__ import annotations

from typing import Any

from ..te import placeholder
from .ir import Call, Function, TensorType
from .op import Pattern, get_op


class GraphError(ValueError):
    """A malformed graph or a call its operator rejects (names the call)."""


def infer_call(call: Call, arg_types: list[TensorType]) -> TensorType:
    """The type of ``call``'s output, given its arguments' types."""
    opdef = get_op(call.op)
    args: list[Any] = [placeholder(t.shape, t.dtype, f"arg{i}") for i, t in enumerate(arg_types)]
    try:
        out = opdef.lower(args, call.attr)
    except (ValueError, TypeError, IndexError, KeyError) as err:
        types = ", ".join(str(t) for t in arg_types)
        raise GraphError(
            f"call %{call.name} = {call.op}(...) rejects its arguments "
            f"({types}) with attrs {call.attr}: {err}"
        ) from None
    except RecursionError:
        raise GraphError(
            f"call %{call.name} = {call.op}(...) of {len(arg_types)} arguments lowers to an "
            "expression too deep for the IR's walks; split it into smaller calls"
        ) from None
    return TensorType(out.shape, out.dtype)


def infer_types(func: Function) -> Function:
    """``func`` with ``types`` filled for every input, constant and call.

    Raises:
        GraphError: a call reads an undefined value, or its operator rejects the types.
    """
    types: dict[str, TensorType] = {p.name: p.type for p in func.params}
    for name, c in func.constants.items():
        types[name] = TensorType(tuple(c.shape), str(c.dtype))
    for call in func.calls:
        missing = [a for a in call.args if a not in types]
        if missing:
            raise GraphError(
                f"call %{call.name} = {call.op} reads undefined value(s) "
                f"{', '.join('%' + m for m in missing)}"
            )
        types[call.name] = infer_call(call, [types[a] for a in call.args])
    for o in func.outputs:
        if o not in types:
            raise GraphError(f"output %{o} is not defined")
    func.types = types
    return func


def pattern_of(call: Call) -> Pattern:
    return get_op(call.op).pattern
