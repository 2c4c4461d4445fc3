"""MemoryDatabase: workloads and records in this process only."""

from __future__ import annotations

import dataclasses

from ..registry import register
from ..tir.function import IRModule, as_module
from ..utils import derived_object
from .base import PyDatabase, TuningRecord, Workload, check_top_k, measurement_key, supersedes
from .module_equality import ModuleEquality, ModuleEqualityKind

__all__ = ["MemoryDatabase", "RecordStore"]


class RecordStore:
    """Workloads found by hash then module equality, and records grouped per workload.

    The in-memory core shared by the memory and JSON databases. A record is stored
    pointing at the store's own Workload object for its module. Per workload, the record
    that counts for each schedule (its latest valid one, see
    :mod:`metaschedule.database.base`) is kept with its commit number.
    """

    def __init__(self, equality: ModuleEquality):
        self.equality = equality
        self._by_hash: dict[int, list[Workload]] = {}
        self._records: list[TuningRecord] = []
        # id(workload) -> measurement key -> (commit number, the record that counts)
        self._per_workload: dict[int, dict[str, tuple[int, TuningRecord]]] = {}

    def owns(self, workload: Workload) -> bool:
        """Whether ``workload`` is one of this store's own Workload objects."""
        return id(workload) in self._per_workload

    def find(self, mod: IRModule) -> Workload | None:
        mod = as_module(mod)
        for workload in self._by_hash.get(self.equality.hash(mod), ()):
            if self.equality.equal(workload.mod, mod):
                return workload
        return None

    def add_workload(self, mod: IRModule) -> Workload:
        """Add a workload known to be missing; return it."""
        mod = as_module(mod)
        shash = self.equality.hash(mod)
        workload = Workload(mod, shash)
        self._by_hash.setdefault(shash, []).append(workload)
        self._per_workload[id(workload)] = {}
        return workload

    def get_or_add(self, mod: IRModule) -> Workload:
        return self.find(mod) or self.add_workload(mod)

    def add_record(
        self, record: TuningRecord, workload: Workload, key: str | None = None
    ) -> TuningRecord:
        """Store ``record`` (of ``workload``, one of the store's own); ``key`` is its
        :func:`~metaschedule.database.base.measurement_key` when the caller has it."""
        if record.workload is not workload:
            record = dataclasses.replace(record, workload=workload)
        self._records.append(record)
        schedules = self._per_workload[id(workload)]
        key = measurement_key(record) if key is None else key
        old = schedules.get(key)
        if old is None or supersedes(record, old[1]):
            schedules[key] = (len(self._records), record)
        return record

    def top_k(self, workload: Workload, top_k: int) -> list[TuningRecord]:
        check_top_k(top_k)
        own = workload if self.owns(workload) else self.find(workload.mod)
        if own is None or top_k == 0:
            return []
        valid = [(r.mean_run_sec, n, r) for n, r in self._per_workload[id(own)].values()]
        valid = [v for v in valid if v[2].is_valid]
        valid.sort(key=lambda v: v[:2])  # ties: commit order of the records that count
        return [r for _, _, r in valid[:top_k]]

    def all_records(self) -> list[TuningRecord]:
        return list(self._records)

    def workloads(self) -> list[Workload]:
        return [w for chain in self._by_hash.values() for w in chain]

    def __len__(self) -> int:
        return len(self._records)


@register("database", "memory")
@derived_object
class MemoryDatabase(PyDatabase):
    """An in-memory database; nothing outlives the process.

    Args:
        module_equality: "structural", "ignore-tensor" or "anchor-block"
            (see :mod:`metaschedule.database.module_equality`).
    """

    def __init__(self, module_equality: ModuleEqualityKind = "structural"):
        self.module_equality = module_equality
        self._store = RecordStore(ModuleEquality(module_equality))

    def has_workload(self, mod: IRModule) -> bool:
        return self._store.find(mod) is not None

    def commit_workload(self, mod: IRModule) -> Workload:
        return self._store.get_or_add(mod)

    def commit_tuning_record(self, record: TuningRecord) -> None:
        workload = record.workload
        if not self._store.owns(workload):
            workload = self._store.get_or_add(workload.mod)
        self._store.add_record(record, workload)

    def get_top_k(self, workload: Workload, top_k: int) -> list[TuningRecord]:
        return self._store.top_k(workload, top_k)

    def get_all_tuning_records(self) -> list[TuningRecord]:
        return self._store.all_records()

    def __len__(self) -> int:
        return len(self._store)
