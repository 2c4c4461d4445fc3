"""``Space``: the tile and unroll decisions of one tuned schedule, as a grid of knobs.

A tuned record's trace holds sampling instructions: ``SamplePerfectTile`` (how a loop is
split) and ``SampleCategorical`` (an unroll depth, a vector width). Each becomes a *knob*
whose values are every decision the instruction could have taken: all perfect
factorizations of the loop's extent (innermost factor within the instruction's bound),
or every candidate index. A point of the space is one value per knob, written as a
vector of indices (``knob``) or as one mixed-radix integer (``point``). Droplet search
walks this grid around the best record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..arg_info import ArgInfo
from ..database.base import TuningRecord, Workload
from ..schedule import Instruction, Schedule, Trace
from ..schedule.primitives.sampling import divisors
from ..search_strategy.base import TraceReplayer
from ..target import Target
from ..tir.function import IRModule, as_module
from ..tune_context import TuneContext
from .measure import Measurer

__all__ = ["Knob", "Space"]

#: Instructions whose decisions Droplet search explores.
TUNABLE = ("SamplePerfectTile", "SampleCategorical")


@dataclass(frozen=True)
class Knob:
    """One sampling instruction of the trace and the decisions it can take."""

    inst: Instruction
    values: tuple[Any, ...]

    @property
    def name(self) -> str:
        return self.inst.kind.name


class Space:
    """The neighbourhood grid of one tuning record (TVM's ``post_optimization.Space``).

    Args:
        data: the record: a :class:`TuningRecord`, its JSON (``[trace, run_secs, target,
            args_info]``), or a line of a records file (``[workload_index, record]``).
        workload: the workload: a :class:`Workload`, its JSON (``[shash, module]``), or a
            module.
        target: the target the schedules are built for.
        measurer: builds and measures candidates (default: a local builder and runner,
            created on first use by :meth:`run`).
    """

    def __init__(
        self, data: Any, workload: Any, target: Target, *, measurer: Measurer | None = None
    ):
        self.target = target if isinstance(target, Target) else Target(target)
        self.workload = _as_workload(workload)
        self.record = _as_record(data, self.workload)
        self.measurer = measurer
        self.knobs: list[Knob] = []
        self.dims: list[int] = []
        self.start: list[int] = []
        self._replayer: TraceReplayer | None = None
        self.create_space()

    # the grid --------------------------------------------------------------------------
    def create_space(self) -> None:
        """Read the knobs off the record's trace (replaying it to learn loop extents)."""
        sch = Schedule(self.workload.mod)
        extents: dict[int, int] = {}

        def provider(inst: Instruction, inputs: list, attrs: list, decision: Any) -> Any:
            if inst.kind.name == "SamplePerfectTile":
                extent = sch.get(inputs[0]).extent
                extents[id(inst)] = int(extent.value) if hasattr(extent, "value") else -1
            return decision

        self.record.trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=provider)
        self.knobs, self.dims, self.start = [], [], []
        for inst in self.record.trace.insts:
            if inst.kind.is_postproc_marker:
                break
            if inst.kind.name not in TUNABLE:
                continue
            decision = self.record.trace.get_decision(inst)
            if inst.kind.name == "SamplePerfectTile":
                extent = extents.get(id(inst), -1)
                if extent < 1:
                    continue
                n, max_inner = int(inst.attrs[0]), int(inst.attrs[1])
                values: list[Any] = self.add_space([], _factorizations(extent, n, max_inner))
                current = [int(x) for x in decision]
            else:
                values = list(range(len(inst.attrs[0])))
                current = int(decision)
            if len(values) < 2 or current not in values:
                continue
            self.knobs.append(Knob(inst, tuple(values)))
            self.dims.append(len(values))
            self.start.append(values.index(current))

    @staticmethod
    def add_space(space_list: list, element_list: list, limit: int = 10000) -> list[int]:
        """``space_list`` extended by the elements of ``element_list`` it lacks, at most
        ``limit`` long."""
        seen = {json.dumps(x) for x in space_list}
        for element in element_list:
            if len(space_list) >= limit:
                break
            key = json.dumps(element)
            if key not in seen:
                seen.add(key)
                space_list.append(element)
        return space_list

    def get_value(self, key: int, pos: int) -> Any:
        """The decision of knob ``key`` at index ``pos``."""
        return self.knobs[key].values[pos]

    def knob2point(self, knob: Sequence[int]) -> int:
        """A knob vector (one index per knob) as one integer."""
        point = 0
        for index, dim in zip(reversed(list(knob)), reversed(self.dims)):
            point = point * dim + int(index)
        return point

    def point2knob(self, point: int) -> list[int]:
        """The knob vector of an integer point (inverse of :meth:`knob2point`)."""
        knob = []
        for dim in self.dims:
            knob.append(point % dim)
            point //= dim
        return knob

    @property
    def size(self) -> int:
        return math.prod(self.dims) if self.dims else 1

    # schedules ---------------------------------------------------------------------------
    def trace_at(self, values: Sequence[int]) -> Trace:
        """The record's trace (post-processing removed) with the decisions of ``values``."""
        trace = self.record.trace
        for knob, index in zip(self.knobs, values):
            trace = trace.with_decision(
                knob.inst, self.get_value_of(knob, index), remove_postproc=True
            )
        return trace

    @staticmethod
    def get_value_of(knob: Knob, index: int) -> Any:
        value = knob.values[index]
        return list(value) if isinstance(value, (list, tuple)) else value

    def template(self, values: Sequence[int] | None = None, create: bool = True) -> Any:
        """The schedule at ``values`` (default: the record's own decisions).

        With ``create`` the trace is replayed on the workload and post-processed: the
        result is a Schedule, or None when a postprocessor rejects it. Without, the
        trace itself is returned.
        """
        trace = self.trace_at(self.start if values is None else values)
        if not create:
            return trace
        if self._replayer is None:
            self._replayer = TraceReplayer(
                self.workload.mod, _postprocs(self.workload.mod, self.target)
            )
        return self._replayer(trace, seed=0)

    # measuring ---------------------------------------------------------------------------
    def run(
        self,
        json_file_list: Sequence[Sequence[int]],
        final_log: str | None,
        timeout: float = 10,
        number: int = 2,
        repeat: int = 3,
        min_repeat_ms: int = 0,
        cpu_cache: bool = False,
    ) -> list[list[float] | None]:
        """Build and measure the points ``json_file_list`` (knob vectors).

        Each candidate is timed ``repeat`` times in interleaved rounds of ``number`` runs
        (at least ``min_repeat_ms`` each, caches flushed with ``cpu_cache``), within
        ``timeout`` seconds per measurement. Returns per point its run times, or None
        when it failed (postprocessor, build or run); each outcome is appended to
        ``final_log`` (JSON lines) when given.
        """
        if self.measurer is None:
            self.measurer = Measurer.local(timeout, number, min_repeat_ms, cpu_cache)
        schedules = [self.template(values) for values in json_file_list]
        mods = [None if s is None else s.mod for s in schedules]
        args_info = ArgInfo.from_entry_func(self.workload.mod)
        results, errors = self.measurer.measure(mods, self.target, args_info, repeat)
        if final_log:
            with open(final_log, "a", encoding="utf-8") as log:
                for values, secs, error in zip(json_file_list, results, errors):
                    log.write(
                        json.dumps({"knob": list(values), "run_secs": secs, "error": error}) + "\n"
                    )
        return results


def _factorizations(extent: int, n: int, max_innermost: int) -> list[list[int]]:
    """Every ``n``-tuple of positive ints with product ``extent``, innermost bounded."""
    out: list[list[int]] = []

    def rec(rest: int, parts: list[int]) -> None:
        if len(parts) == n - 1:
            if rest <= max_innermost or max_innermost <= 0:
                out.append(parts + [rest])
            return
        for d in divisors(rest):
            rec(rest // d, parts + [d])

    rec(extent, [])
    return out


def _postprocs(mod: IRModule, target: Target) -> list:
    ctx = TuneContext(
        mod=mod,
        target=target,
        space_generator="post-order-apply",
        task_name="post-optimization",
        rand_state=0,
    )
    return list(ctx.space_generator.postprocs)


def _as_workload(workload: Any) -> Workload:
    if isinstance(workload, Workload):
        return workload
    if isinstance(workload, (list, tuple)) and len(workload) == 2:
        return Workload.from_json(list(workload))
    return Workload(as_module(workload))


def _as_record(data: Any, workload: Workload) -> TuningRecord:
    if isinstance(data, TuningRecord):
        return data
    if isinstance(data, str):
        data = json.loads(data)
    if isinstance(data, (list, tuple)) and len(data) == 2 and isinstance(data[0], int):
        data = data[1]  # a records-file line: [workload index, record]
    return TuningRecord.from_json(list(data), workload)
