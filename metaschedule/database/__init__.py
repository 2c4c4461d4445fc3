"""Databases of workloads and tuning records."""

from .base import (
    MAX_RUN_SEC,
    Database,
    PyDatabase,
    TuningRecord,
    Workload,
    create,
    is_valid_run_secs,
)
from .json_database import JSONDatabase
from .memory_database import MemoryDatabase
from .module_equality import ModuleEquality, find_anchor_block
from .ordered_union_database import OrderedUnionDatabase
from .schedule_fn_database import ScheduleFnDatabase
from .sqlite_database import SQLiteDatabase
from .union_database import UnionDatabase

__all__ = [
    "MAX_RUN_SEC",
    "Database",
    "JSONDatabase",
    "MemoryDatabase",
    "ModuleEquality",
    "OrderedUnionDatabase",
    "PyDatabase",
    "SQLiteDatabase",
    "ScheduleFnDatabase",
    "TuningRecord",
    "UnionDatabase",
    "Workload",
    "create",
    "find_anchor_block",
    "is_valid_run_secs",
]
