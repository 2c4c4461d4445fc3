"""The operator registry of the graph IR.

Each operator has a fusion pattern (TVM's ``OpPatternKind``), a lowering to the te
operator library (``lower(args, attrs) -> te.Tensor``; an argument is a te tensor, or a
Python number for a one-element constant of an element-wise or broadcast operator) and a
numpy reference (``ref(args, attrs) -> ndarray``) that defines what it computes. Shapes
and dtypes are inferred by lowering onto placeholders, so the te library is the one
definition of an operator's shape rules.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class Pattern(enum.IntEnum):
    """How an operator fuses (the order matters: smaller fuses more freely)."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_EWISE_FUSABLE = 4
    OPAQUE = 8


@dataclass(frozen=True)
class OpDef:
    name: str
    pattern: Pattern
    lower: Callable[[list[Any], dict[str, Any]], Any]
    ref: Callable[[list[Any], dict[str, Any]], Any]


_REGISTRY: dict[str, OpDef] = {}


def register(name: str, pattern: Pattern, lower: Callable, ref: Callable) -> None:
    _REGISTRY[name] = OpDef(name, pattern, lower, ref)


def get_op(name: str) -> OpDef:
    """The definition of operator ``name``; ``KeyError`` lists the known operators."""
    _ensure_loaded()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(
            f"graph operator {name!r} is not registered; known operators: "
            f"{', '.join(sorted(_REGISTRY))}"
        ) from None


def list_ops() -> list[str]:
    _ensure_loaded()
    return sorted(_REGISTRY)


def _ensure_loaded() -> None:
    if not _REGISTRY:
        from . import ops_elementwise, ops_nn, ops_tensor  # noqa: F401  (they register themselves)
