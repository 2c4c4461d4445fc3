"""OrderedUnionDatabase: the first answer among several databases, in order."""

from __future__ import annotations

from ..registry import register
from ..tir.function import IRModule
from ..utils import derived_object
from .base import TuningRecord, Workload, check_top_k
from .union_database import _ReadOnlyUnion

__all__ = ["OrderedUnionDatabase"]


@register("database", "ordered_union")
@derived_object
class OrderedUnionDatabase(_ReadOnlyUnion):
    """A union of databases where the first member that answers a query wins.

    Members are asked in order; a nested union answers as a whole. Use it to let
    hand-written schedules (a ``ScheduleFnDatabase``) override tuned ones, or the
    reverse. Commits are not supported: commit to a member.
    """

    def query_tuning_record(
        self, mod: IRModule, target=None, workload_name: str = "main"
    ) -> TuningRecord | None:
        for db in self.databases:
            record = db.query_tuning_record(mod, target, workload_name)
            if record is not None:
                return record
        return None

    def get_top_k(self, workload: Workload, top_k: int) -> list[TuningRecord]:
        check_top_k(top_k)
        for db in self.databases:
            records = db.get_top_k(workload, top_k)
            if records:
                return records
        return []
