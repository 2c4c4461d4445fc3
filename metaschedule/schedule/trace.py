"""Traces: the sequence of instructions (and sampling decisions) that built a schedule.

A trace prints as the Python that rebuilds the schedule, serialises to JSON in the
same layout as TVM (``[[inst, ...], [[inst_index, decision], ...]]`` with each
instruction ``[kind, inputs, attrs, outputs]``), and replays on a fresh schedule of
the same function, optionally with other decisions: another point of the same
design space.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..tir.expr import FloatImm, IntImm
from .instruction import Instruction, get_inst_kind
from .rv import RV, BlockRV, ExprRV, LoopRV

if TYPE_CHECKING:
    from .schedule import Schedule

DecisionProvider = Callable[[Instruction, list, list, Any], Any]


@dataclass(frozen=True, eq=False)
class Trace:
    """An immutable sequence of instructions with a decision per sampling instruction."""

    insts: tuple[Instruction, ...] = ()
    decisions: Mapping[Instruction, Any] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "insts", tuple(self.insts))
        object.__setattr__(self, "decisions", dict(self.decisions))

    # building -------------------------------------------------------------------------
    def append(self, inst: Instruction, decision: Any = None) -> Trace:
        decisions = dict(self.decisions)
        if decision is not None:
            decisions[inst] = decision
        return Trace(self.insts + (inst,), decisions)

    def pop(self) -> Trace:
        if not self.insts:
            raise IndexError("pop from an empty trace")
        last = self.insts[-1]
        return Trace(self.insts[:-1], {k: v for k, v in self.decisions.items() if k is not last})

    def get_decision(self, inst: Instruction) -> Any:
        return self.decisions.get(inst)

    def _kept(self, remove_postproc: bool) -> tuple[Instruction, ...]:
        if not remove_postproc:
            return self.insts
        out = []
        for inst in self.insts:
            if inst.kind.is_postproc_marker:
                break
            out.append(inst)
        return tuple(out)

    def with_decision(self, inst: Instruction, decision: Any, remove_postproc: bool) -> Trace:
        """A new trace with ``inst``'s decision replaced."""
        if not any(i is inst for i in self.insts):
            raise ValueError("the instruction is not part of this trace")
        insts = self._kept(remove_postproc)
        decisions = {k: v for k, v in self.decisions.items() if any(k is i for i in insts)}
        decisions[inst] = decision
        return Trace(insts, decisions)

    def simplified(self, remove_postproc: bool) -> Trace:
        """Drop pure instructions (lookups, sampling) whose outputs nothing uses."""
        insts = list(self._kept(remove_postproc))
        used: set[int] = set()
        keep: list[Instruction] = []
        for inst in reversed(insts):
            if (
                inst.kind.is_pure
                and not inst.kind.is_postproc_marker
                and not any(id(o) in used for o in inst.outputs)
            ):
                continue
            keep.append(inst)
            for x in inst.inputs:
                if isinstance(x, RV):
                    used.add(id(x))
        keep.reverse()
        return Trace(tuple(keep), {i: self.decisions[i] for i in keep if i in self.decisions})

    # replay ---------------------------------------------------------------------------
    def apply_to_schedule(
        self,
        sch: Schedule,
        remove_postproc: bool,
        decision_provider: DecisionProvider | None = None,
    ) -> None:
        """Replay the trace on ``sch``, optionally changing decisions on the way."""
        self.apply_insts_to_schedule(sch, self._kept(remove_postproc), {}, decision_provider)

    def apply_insts_to_schedule(
        self,
        sch: Schedule,
        insts: Sequence[Instruction],
        rv_map: dict[int, Any],
        decision_provider: DecisionProvider | None = None,
    ) -> None:
        """Replay ``insts`` (some of this trace's instructions, in order) on ``sch``.

        ``rv_map`` maps ``id`` of the trace's random variables to ``sch``'s, for those
        made by instructions replayed before (it is extended in place): replaying a trace
        in pieces is the same as replaying it whole."""
        for inst in insts:
            inputs = [rv_map[id(x)] if isinstance(x, RV) else x for x in inst.inputs]
            attrs = list(inst.attrs)
            decision = self.decisions.get(inst)
            if decision_provider is not None:
                decision = decision_provider(inst, inputs, attrs, decision)
            outputs = inst.kind.apply_to_schedule(sch, inputs, attrs, decision)
            if len(outputs) != len(inst.outputs):
                raise ValueError(
                    f"replaying {inst.kind.name} gave {len(outputs)} outputs, the trace has "
                    f"{len(inst.outputs)}: the trace does not fit this module"
                )
            for old, new in zip(inst.outputs, outputs):
                rv_map[id(old)] = new

    # printing and JSON ------------------------------------------------------------------
    def _names(self, insts) -> dict[int, str]:
        names: dict[int, str] = {}
        for inst in insts:
            for o in inst.outputs:
                if id(o) not in names:
                    names[id(o)] = f"{o.prefix}{len(names)}"
        return names

    def as_python(self, remove_postproc: bool = False) -> list[str]:
        insts = self._kept(remove_postproc)
        names = self._names(insts)
        lines = []
        for inst in insts:
            inputs = [names[id(x)] if isinstance(x, RV) else repr(x) for x in inst.inputs]
            outputs = [names[id(o)] for o in inst.outputs]
            lines.append(
                inst.kind.as_python(inputs, list(inst.attrs), outputs, self.decisions.get(inst))
            )
        return lines

    def __str__(self) -> str:
        return "\n".join(["# from metaschedule import tir", *self.as_python()])

    __repr__ = __str__

    def show(self) -> None:
        print(str(self))

    def as_json(self, remove_postproc: bool = False) -> list:
        insts = self._kept(remove_postproc)
        names = self._names(insts)
        j_insts = []
        j_decisions = []
        for i, inst in enumerate(insts):
            j_insts.append(
                [
                    inst.kind.name,
                    [_input_json(x, names) for x in inst.inputs],
                    [_json_value(a) for a in inst.attrs],
                    [names[id(o)] for o in inst.outputs],
                ]
            )
            if inst in self.decisions:
                j_decisions.append([i, _json_value(self.decisions[inst])])
        return [j_insts, j_decisions]

    @staticmethod
    def from_json(obj: Any) -> Trace:
        """Rebuild a trace from :meth:`as_json` output; malformed input is a ``ValueError``."""
        try:
            j_insts, j_decisions = obj
            rvs: dict[str, RV] = {}
            insts = []
            for entry in j_insts:
                kind_name, j_inputs, j_attrs, j_outputs = entry
                kind = get_inst_kind(kind_name)
                inputs = [_input_from_json(x, rvs) for x in j_inputs]
                outputs = []
                for name in j_outputs:
                    rv = rvs.get(name)
                    if rv is None:
                        rv = _RV_BY_PREFIX[name[0]]()
                        rvs[name] = rv
                    outputs.append(rv)
                insts.append(
                    Instruction(kind, inputs, [_from_json_value(a) for a in j_attrs], outputs)
                )
            decisions = {}
            for idx, dec in j_decisions:
                decisions[insts[idx]] = _from_json_value(dec)
        except (TypeError, ValueError, KeyError, IndexError) as err:
            raise ValueError(f"malformed trace JSON: {err}") from err
        return Trace(tuple(insts), decisions)

    @staticmethod
    def apply_json_to_schedule(obj: Any, sch: Schedule) -> None:
        Trace.from_json(obj).apply_to_schedule(sch, remove_postproc=False)


_RV_BY_PREFIX = {"b": BlockRV, "l": LoopRV, "v": ExprRV}


def _input_json(x: Any, names: dict[int, str]) -> Any:
    if isinstance(x, RV):
        return names[id(x)]
    if isinstance(x, str):
        return ["str", x]
    return _json_value(x)


def _input_from_json(x: Any, rvs: dict[str, RV]) -> Any:
    if isinstance(x, str):
        if x not in rvs:
            raise KeyError(f"random variable {x!r} used before it is defined")
        return rvs[x]
    if isinstance(x, list) and len(x) == 2 and x[0] == "str":
        return x[1]
    return _from_json_value(x)


def _json_value(v: Any) -> Any:
    """Attributes and decisions: JSON scalars, lists, and dicts; tuples become lists."""
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if hasattr(v, "item"):  # numpy scalar
        return v.item()
    if isinstance(v, (IntImm, FloatImm)):
        return v.value
    raise TypeError(f"cannot store {type(v).__name__} {v!r} in a trace")


def _from_json_value(v: Any) -> Any:
    return v
