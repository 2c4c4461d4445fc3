"""Instructions of a trace and the registry of instruction kinds.

An :class:`Instruction` records one schedule call: its kind, its inputs (random
variables or constants), its attributes (plain JSON values) and its outputs
(random variables). An :class:`InstructionKind` knows how to replay the call on a
schedule and how to print it as Python. Users register their own kinds with
:func:`register_inst_kind`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .rv import RV

if TYPE_CHECKING:
    from .schedule import Schedule

ApplyFn = Callable[["Schedule", list, list, Any], Any]


@dataclass(frozen=True, eq=False)
class InstructionKind:
    """How one kind of instruction replays and prints.

    Args:
        name: the kind's name in traces ("Split", "SamplePerfectTile", ...).
        method: the Schedule method it calls.
        inputs: names of the method's RV/constant arguments in order; a name that
            starts with ``*`` takes all remaining inputs as varargs, one that ends
            with ``[]`` takes them as a list.
        attrs: names of the method's keyword arguments stored as attributes.
        is_pure: the instruction does not change the IR (lookups and sampling), so
            it can be dropped from a trace when its outputs are unused.
        has_decision: it is a sampling instruction whose decision the trace records.
        returns_list: the method returns a list of RVs (e.g. ``get_loops``).
        is_postproc_marker: marks the start of post-processing in a trace.
        apply: replay function ``(sch, inputs, attrs, decision) -> outputs``; by default
            the method is called with the named arguments.
    """

    name: str
    method: str
    inputs: tuple[str, ...] = ()
    attrs: tuple[str, ...] = ()
    is_pure: bool = False
    has_decision: bool = False
    returns_list: bool = False
    is_postproc_marker: bool = False
    apply: ApplyFn | None = None

    def call_args(self, inputs: list, attrs: list) -> tuple[list, dict]:
        """Positional and keyword arguments of the schedule method."""
        args: list = []
        kwargs: dict = {}
        rest = list(inputs)
        for name in self.inputs:
            if name.startswith("*"):
                args.extend(rest)
                rest = []
            elif name.endswith("[]"):
                kwargs[name[:-2]] = list(rest)
                rest = []
            else:
                kwargs[name] = rest.pop(0) if rest else None
        if rest:
            raise ValueError(f"{self.name}: {len(rest)} unexpected extra inputs")
        if len(attrs) != len(self.attrs):
            raise ValueError(f"{self.name}: expected attrs {self.attrs}, got {attrs}")
        kwargs.update(zip(self.attrs, attrs))
        return args, kwargs

    def apply_to_schedule(self, sch: Schedule, inputs: list, attrs: list, decision: Any) -> list:
        if self.apply is not None:
            out = self.apply(sch, inputs, attrs, decision)
        else:
            args, kwargs = self.call_args(inputs, attrs)
            if self.has_decision:
                kwargs["decision"] = decision
            out = getattr(sch, self.method)(*args, **kwargs)
        if out is None:
            return []
        if isinstance(out, (list, tuple)):
            return list(out)
        return [out]

    def as_python(self, inputs: list[str], attrs: list, outputs: list[str], decision: Any) -> str:
        args, kwargs = self.call_args(inputs, [_py(a) for a in attrs])
        parts = [str(a) for a in args]
        for k, v in kwargs.items():
            parts.append(f"{k}={_list_str(v) if isinstance(v, list) else v}")
        if self.has_decision:
            parts.append(f"decision={_py(decision)}")
        call = f"sch.{self.method}({', '.join(parts)})"
        if not outputs:
            return call
        if len(outputs) == 1 and not self.returns_list:
            return f"{outputs[0]} = {call}"
        return f"{', '.join(outputs)}{',' if len(outputs) == 1 else ''} = {call}"


def _list_str(v: list) -> str:
    return "[" + ", ".join(str(x) for x in v) + "]"


def _py(v: Any) -> str:
    return repr(v)


_REGISTRY: dict[str, InstructionKind] = {}


def register_inst_kind(kind: InstructionKind, *, override: bool = False) -> InstructionKind:
    """Add ``kind`` to the registry (``override=True`` to replace an existing one)."""
    if kind.name in _REGISTRY and not override:
        raise ValueError(f"instruction kind {kind.name!r} is already registered")
    _REGISTRY[kind.name] = kind
    return kind


def get_inst_kind(name: str) -> InstructionKind:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown instruction kind {name!r}; registered kinds: {', '.join(sorted(_REGISTRY))}"
        ) from None


def registered_inst_kinds() -> list[str]:
    return sorted(_REGISTRY)


@dataclass(frozen=True, eq=False)
class Instruction:
    """One recorded schedule call. Compared by identity (decisions are keyed on it)."""

    kind: InstructionKind
    inputs: tuple = ()
    attrs: tuple = ()
    outputs: tuple[RV, ...] = field(default=())

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "attrs", tuple(self.attrs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
