"""UnionDatabase: the best answer among several databases."""

from __future__ import annotations

from ..registry import register
from ..tir.function import IRModule
from ..utils import derived_object
from .base import (
    Database,
    PyDatabase,
    TuningRecord,
    Workload,
    check_top_k,
    measurement_key,
    sort_key,
)

__all__ = ["UnionDatabase"]


class _ReadOnlyUnion(PyDatabase):
    """Shared parts of the union databases: read-only views over their members."""

    def __init__(self, *databases: Database):
        for k, db in enumerate(databases):
            if not isinstance(db, Database):
                raise TypeError(
                    f"{type(self).__name__} member {k} is a {type(db).__name__}, not a Database"
                )
        self.databases: tuple[Database, ...] = tuple(databases)

    def has_workload(self, mod: IRModule) -> bool:
        return any(db.has_workload(mod) for db in self.databases)

    def commit_workload(self, mod: IRModule) -> Workload:
        raise NotImplementedError(
            f"{type(self).__name__} is read-only: commit workloads to one of its members"
        )

    def commit_tuning_record(self, record: TuningRecord) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} is read-only: commit records to one of its members"
        )

    def get_all_tuning_records(self) -> list[TuningRecord]:
        return [r for db in self.databases for r in db.get_all_tuning_records()]

    def __len__(self) -> int:
        return sum(len(db) for db in self.databases)


@register("database", "union")
@derived_object
class UnionDatabase(_ReadOnlyUnion):
    """A union of databases: each query returns the best answer among all members.

    Every member is asked (a nested union answers as a whole); of the records returned,
    the fastest valid one wins; a record without a valid run time (say from a
    ``ScheduleFnDatabase``) is returned only if no member has a measured one. Ties go to
    the earlier member. A schedule that several members measured is returned once by
    ``get_top_k``, with its fastest member's record (each member already returns one record
    per schedule, its latest; members have no common clock to say which is later).
    Commits are not supported: commit to a member.
    """

    def query_tuning_record(
        self, mod: IRModule, target=None, workload_name: str = "main"
    ) -> TuningRecord | None:
        records = [
            r
            for db in self.databases
            if (r := db.query_tuning_record(mod, target, workload_name)) is not None
        ]
        return min(records, key=sort_key) if records else None

    def get_top_k(self, workload: Workload, top_k: int) -> list[TuningRecord]:
        check_top_k(top_k)
        records = [r for db in self.databases for r in db.get_top_k(workload, top_k)]
        records.sort(key=sort_key)
        out: list[TuningRecord] = []
        seen: set[str] = set()
        for record in records:
            key = measurement_key(record)
            if key not in seen:
                seen.add(key)
                out.append(record)
                if len(out) == top_k:
                    break
        return out
