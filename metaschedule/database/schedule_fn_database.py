"""ScheduleFnDatabase: answers queries by running a schedule function."""

from __future__ import annotations

from collections.abc import Callable

from ..registry import register
from ..schedule import Schedule
from ..tir.function import IRModule, as_module
from ..utils import derived_object
from .base import PyDatabase, TuningRecord, Workload, check_top_k

__all__ = ["ScheduleFnDatabase"]


@register("database", "schedule_fn")
@derived_object
class ScheduleFnDatabase(PyDatabase):
    """A database whose answers come from a function instead of stored records.

    ``schedule_fn(sch)`` receives a fresh schedule of the queried module (working on
    ``workload_name``), schedules it in place and returns True, or returns False if it
    does not handle that module. Its records have no run time. It stores nothing:
    ``get_top_k`` and ``get_all_tuning_records`` are empty and commits are refused.
    Combine it with a tuned database through ``OrderedUnionDatabase``.
    """

    def __init__(
        self, schedule_fn: Callable[[Schedule], bool], module_equality: str = "structural"
    ):
        if not callable(schedule_fn):
            raise TypeError(f"schedule_fn must be callable, got {type(schedule_fn).__name__}")
        self.schedule_fn = schedule_fn
        self.module_equality = module_equality

    def query_schedule(
        self, mod: IRModule, target=None, workload_name: str = "main"
    ) -> Schedule | None:
        sch = Schedule(as_module(mod))
        if workload_name in sch.mod:
            sch.work_on(workload_name)
        return sch if self.schedule_fn(sch) else None

    def query_tuning_record(
        self, mod: IRModule, target=None, workload_name: str = "main"
    ) -> TuningRecord | None:
        sch = self.query_schedule(mod, target, workload_name)
        if sch is None:
            return None
        return TuningRecord(sch.trace, Workload(as_module(mod)), None, target, None)

    def has_workload(self, mod: IRModule) -> bool:
        return False

    def commit_workload(self, mod: IRModule) -> Workload:
        return Workload(as_module(mod))

    def commit_tuning_record(self, record: TuningRecord) -> None:
        raise NotImplementedError(
            "ScheduleFnDatabase stores no records; commit to another database"
        )

    def get_top_k(self, workload: Workload, top_k: int) -> list[TuningRecord]:
        check_top_k(top_k)
        return []

    def get_all_tuning_records(self) -> list[TuningRecord]:
        return []

    def __len__(self) -> int:
        return 0
