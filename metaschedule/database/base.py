"""The database interface: workloads, tuning records, and the queries built on them.

Run-time convention (TVM's): a measurement that failed is committed with
``run_secs=[1e10]`` (:data:`MAX_RUN_SEC`); a record may also have no run time at all
(``None`` or ``[]``). Such records are kept, listed by ``get_all_tuning_records`` and
dumped, but never returned as the best: :func:`is_valid_run_secs` decides which records
``get_top_k`` and the queries may return.

A schedule measured more than once (the final selection re-measures the best ones, a
resumed run may meet a trace again): records of a workload whose trace and target are
equal (:func:`measurement_key`) are measurements of one schedule, and its **latest valid
record supersedes the earlier ones** for ranking: ``get_top_k`` and the queries return
each schedule once, ranked by that record; a later failed measurement supersedes nothing
(a transient failure never hides a good schedule). The latest wins rather than a
combination because a re-measurement is the better evidence: the final selection's
records are medians of interleaved rounds taken side by side with the competitors, and
folding in the single timing that tuning saw (lucky or unlucky, on a machine in another
state) would put back the very noise they remove. Nothing is ever deleted:
``get_all_tuning_records`` and ``len`` still count every record, and files stay
append-only; :func:`latest_per_schedule` applies the rule to a list of records.
"""

from __future__ import annotations

import contextvars
import dataclasses
import hashlib
import json
import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .. import registry
from ..arg_info import ArgInfo
from ..measure_candidate import MeasureCandidate
from ..schedule import Schedule, Trace
from ..target import Target
from ..tir.function import IRModule, as_module
from ..tir.serialize import from_json_dict, load_json, to_json_dict
from ..tir.structural import structural_equal
from ..trace_apply import schedule_using_anchor_trace
from .module_equality import ModuleEquality

__all__ = [
    "MAX_RUN_SEC",
    "Database",
    "PyDatabase",
    "TuningRecord",
    "Workload",
    "create",
    "is_valid_run_secs",
    "latest_per_schedule",
    "mean_run_sec",
    "measurement_key",
]

_REPLAY_CANDIDATES = 16  # records tried by query_schedule before giving up

MAX_RUN_SEC = 1e10
"""The run time recorded for a failed measurement (TVM's convention)."""


def is_valid_run_secs(run_secs: Sequence[float] | None) -> bool:
    """True if ``run_secs`` is a real measurement: non-empty, finite, in [0, MAX_RUN_SEC)."""
    if not run_secs:
        return False
    return all(math.isfinite(s) and 0.0 <= s < MAX_RUN_SEC for s in run_secs)


def mean_run_sec(run_secs: Sequence[float] | None) -> float:
    """The mean run time, or ``inf`` for a record that is not a valid measurement."""
    if not is_valid_run_secs(run_secs):
        return math.inf
    return sum(run_secs) / len(run_secs)


def measurement_key_of_json(trace_json: Any, target_json: Any) -> str:
    """:func:`measurement_key` from a record's JSON parts (its trace and target)."""
    text = json.dumps([trace_json, target_json], sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def measurement_key(record: TuningRecord) -> str:
    """What names the schedule a record measures within its workload: a digest of its
    trace (instructions and decisions, RVs named canonically) and its target. Records of
    one workload with equal keys are measurements of the same schedule."""
    target = None if record.target is None else record.target.as_json()
    return measurement_key_of_json(record.trace.as_json(), target)


def supersedes(new: TuningRecord, old: TuningRecord) -> bool:
    """Whether ``new``, committed after ``old`` for the same schedule, is the one that
    counts: a valid record always, a failure only over another failure."""
    return new.is_valid or not old.is_valid


def latest_per_schedule(records: Sequence[TuningRecord]) -> list[TuningRecord]:
    """The records that count, one per (workload, schedule), from records in commit
    order (the rule of the module docstring); in the order the schedules first appear.
    Workloads are told apart by object identity, as a database returns them."""
    chosen: dict[tuple[int, str], TuningRecord] = {}
    for record in records:
        key = (id(record.workload), measurement_key(record))
        old = chosen.get(key)
        if old is None or supersedes(record, old):
            chosen[key] = record
    return list(chosen.values())


# --------------------------------------------------------------------------- values
@dataclass(frozen=True, eq=False, repr=False)
class Workload:
    """A workload: a module and its structural hash.

    ``shash`` defaults to the structural hash of ``mod``; a database with another
    ``module_equality`` stores its own hash here. Workloads compare by identity; databases
    compare their modules with their module equality.
    """

    mod: IRModule
    shash: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "mod", as_module(self.mod))
        if self.shash is None:
            object.__setattr__(self, "shash", ModuleEquality("structural").hash(self.mod))

    def __repr__(self) -> str:
        return f"Workload(shash={self.shash}, functions={list(self.mod)})"

    def as_json(self) -> list:
        """``[shash as a decimal string, the module's JSON object]``."""
        return [str(self.shash), to_json_dict(self.mod)]

    @staticmethod
    def from_json(json_obj: Any) -> Workload:
        """Parse :meth:`as_json` output (the module may also be a JSON string)."""
        try:
            shash, mod_json = json_obj
            mod = load_json(mod_json) if isinstance(mod_json, str) else from_json_dict(mod_json)
            return Workload(as_module(mod), int(shash))
        except (TypeError, ValueError, KeyError, IndexError) as err:
            raise ValueError(f"malformed Workload JSON: {type(err).__name__}: {err}") from err


@dataclass(frozen=True, eq=False, repr=False)
class TuningRecord:
    """One measured (or failed) schedule of a workload.

    Args:
        trace: the schedule's trace; replaying it on the workload's module rebuilds it.
        workload: the workload it schedules.
        run_secs: measured run times in seconds; ``[1e10]`` for a failure, or None.
        target: the target it was measured on.
        args_info: the arguments it was measured with.
    """

    trace: Trace
    workload: Workload
    run_secs: list[float] | None = None
    target: Target | None = None
    args_info: list[ArgInfo] | None = None

    def __post_init__(self):
        if self.run_secs is not None:
            object.__setattr__(self, "run_secs", [float(s) for s in self.run_secs])
        if self.args_info is not None:
            object.__setattr__(self, "args_info", list(self.args_info))

    def __repr__(self) -> str:
        target = None if self.target is None else str(self.target.kind)
        return (
            f"TuningRecord(workload={self.workload!r}, run_secs={self.run_secs}, "
            f"target={target!r}, trace_length={len(self.trace.insts)})"
        )

    @property
    def is_valid(self) -> bool:
        """Whether the record holds a real measurement (see :func:`is_valid_run_secs`)."""
        return is_valid_run_secs(self.run_secs)

    @property
    def mean_run_sec(self) -> float:
        return mean_run_sec(self.run_secs)

    def as_measure_candidate(self, mod: IRModule | None = None) -> Any:
        """A ``MeasureCandidate``: the trace replayed, and the arguments.

        Args:
            mod: the caller's module, the one the record was found for (equal to the
                record's workload). The trace is replayed on it, and the arguments are
                its own: what gets built and run is the caller's code and data, as
                :meth:`Database.query_schedule` does; nothing the database stored (names,
                constants, argument shapes) reaches it. Give it whenever the candidate
                will be built and run. Without it the trace is replayed on the stored
                workload (for showing a record, or a database of one's own).

        Raises:
            ScheduleError: the trace does not replay on ``mod``.
        """
        if mod is None:
            sch = _replay(self, "main")
            args_info = self.args_info
            if args_info is None:
                args_info = ArgInfo.from_entry_func(sch.mod)
            return MeasureCandidate(sch, args_info)
        sch = _replay(self, "main", as_module(mod))
        return MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod))

    def as_json(self) -> list:
        """``[trace, run_secs, target, args_info]``, each None where absent (TVM's layout)."""
        return [
            self.trace.as_json(),
            None if self.run_secs is None else list(self.run_secs),
            None if self.target is None else self.target.as_json(),
            None if self.args_info is None else [a.as_json() for a in self.args_info],
        ]

    @staticmethod
    def from_json(json_obj: Any, workload: Workload) -> TuningRecord:
        """Parse :meth:`as_json` output; the workload is given (records refer to it)."""
        try:
            trace_json, run_secs, target_json, args_info_json = json_obj
            return TuningRecord(
                Trace.from_json(trace_json),
                workload,
                None if run_secs is None else [float(s) for s in run_secs],
                None if target_json is None else Target.from_json(target_json),
                None if args_info_json is None else [ArgInfo.from_json(a) for a in args_info_json],
            )
        except (TypeError, ValueError, KeyError, IndexError) as err:
            raise ValueError(f"malformed TuningRecord JSON: {type(err).__name__}: {err}") from err


def sort_key(record: TuningRecord) -> float:
    """Best first: valid records by mean run time, then all invalid ones."""
    return record.mean_run_sec


def _replay(record: TuningRecord, workload_name: str, mod: IRModule | None = None) -> Schedule:
    """``record``'s trace replayed on ``mod`` (the caller's module, equal to the record's
    workload), or on the stored workload itself when ``mod`` is None."""
    sch = Schedule(record.workload.mod if mod is None else mod)
    if workload_name in sch.mod:
        sch.work_on(workload_name)
    record.trace.apply_to_schedule(sch, remove_postproc=False)
    return sch


def _apply_anchor(
    record: TuningRecord, mod: IRModule, target: Target | None, workload_name: str
) -> Schedule:
    """``record``'s trace, tuned on another module with the same anchor block, on ``mod``."""
    sch = Schedule(mod)
    if workload_name in sch.mod:
        sch.work_on(workload_name)
    target = target or record.target or Target("cpu")
    schedule_using_anchor_trace(sch, record.trace, target)
    return sch


# --------------------------------------------------------------------------- database
_SCOPE: contextvars.ContextVar[tuple[Database, ...]] = contextvars.ContextVar(
    "metaschedule_database_scope", default=()
)


class Database(ABC):
    """The abstract database interface.

    Subclasses implement storage (``has_workload``, ``commit_workload``,
    ``commit_tuning_record``, ``get_top_k``, ``get_all_tuning_records``, ``__len__``);
    the queries, ``dump_pruned`` and scoping are built on them here.

    Databases are for trusted files: a database cannot put code into what is built (its
    traces are replayed on the caller's module, names are checked on load), but it
    decides which schedules run, so a hostile one can make them slow. See SECURITY.md.
    """

    module_equality: str = "structural"

    # storage --------------------------------------------------------------------------
    @abstractmethod
    def has_workload(self, mod: IRModule) -> bool:
        """Whether the database has a workload equal to ``mod``."""

    @abstractmethod
    def commit_workload(self, mod: IRModule) -> Workload:
        """The database's workload for ``mod``, added first if missing."""

    @abstractmethod
    def commit_tuning_record(self, record: TuningRecord) -> None:
        """Add a record (its workload is committed first if missing)."""

    @abstractmethod
    def get_top_k(self, workload: Workload, top_k: int) -> list[TuningRecord]:
        """The ``top_k`` fastest valid records of ``workload``, fastest first.

        A schedule measured more than once appears once, as its latest valid record (see
        the module docstring). Records of the same speed keep their commit order. An
        unknown workload has none.
        """

    @abstractmethod
    def get_all_tuning_records(self) -> list[TuningRecord]:
        """Every record, valid or not, in commit order."""

    @abstractmethod
    def __len__(self) -> int:
        """The number of tuning records."""

    # queries --------------------------------------------------------------------------
    def query_tuning_record(
        self, mod: IRModule, target: Target | None = None, workload_name: str = "main"
    ) -> TuningRecord | None:
        """The best valid record of the workload ``mod``, or None.

        As in TVM, ``target`` does not filter: a database holds one target's records.
        """
        mod = as_module(mod)
        if not self.has_workload(mod):
            return None
        records = self.get_top_k(self.commit_workload(mod), 1)
        return records[0] if records else None

    def query_schedule(
        self, mod: IRModule, target: Target | None = None, workload_name: str = "main"
    ) -> Schedule | None:
        """The best record's trace replayed on ``mod``, or None.

        The trace is replayed on ``mod`` itself, never on the module stored in the
        database (TVM replays on the stored one): what gets compiled has the caller's
        names and constants, and a stored module can carry nothing into the code. A
        record whose trace no longer replays (an unknown decision, a module it does not
        fit) is reported with a warning naming where it is stored, and the next best is
        tried, so that a bad record is never applied to the wrong module silently.
        """
        mod = as_module(mod)
        for record in self._ranked_records(mod, target, workload_name):
            try:
                if self.module_equality == "anchor-block" and not structural_equal(
                    mod, record.workload.mod
                ):  # a record of another module with the same anchor block
                    return _apply_anchor(record, mod, target, workload_name)
                return _replay(record, workload_name, mod)
            except Exception as err:  # noqa: BLE001 - any replay failure means the same
                where = self.record_origin(record) or type(self).__name__
                warnings.warn(
                    f"{where}: a record of workload {record.workload.shash} "
                    f"(run_secs={record.run_secs}) does not replay on the module "
                    f"({type(err).__name__}: {err}); skipping it, trying the next best",
                    RuntimeWarning,
                    stacklevel=2,
                )
        return None

    def _ranked_records(self, mod: IRModule, target: Target | None, workload_name: str):
        """The best record, then the next best ones (lazily: only when one fails)."""
        best = self.query_tuning_record(mod, target, workload_name)
        if best is None:
            return
        yield best
        try:
            rest = self.get_top_k(self.commit_workload(mod), _REPLAY_CANDIDATES)
        except NotImplementedError:  # a read-only combination (union): only its best
            return
        yield from (r for r in rest if r is not best)

    def record_origin(self, record: TuningRecord) -> str | None:
        """Where ``record`` is stored (``file:line``), for messages; None if unknown."""
        return None

    def query_ir_module(
        self, mod: IRModule, target: Target | None = None, workload_name: str = "main"
    ) -> IRModule | None:
        """The module of :meth:`query_schedule`, or None."""
        sch = self.query_schedule(mod, target, workload_name)
        return None if sch is None else sch.mod

    def query(
        self,
        mod: IRModule,
        target: Target | None = None,
        *,
        workload_name: str = "main",
        kind: Literal["schedule", "record", "ir_module"] = "schedule",
    ) -> Schedule | IRModule | TuningRecord | None:
        """The best outcome for ``mod``: a schedule, a record or a module, by ``kind``."""
        if kind == "schedule":
            return self.query_schedule(mod, target, workload_name)
        if kind == "record":
            return self.query_tuning_record(mod, target, workload_name)
        if kind == "ir_module":
            return self.query_ir_module(mod, target, workload_name)
        raise ValueError(
            f"unknown query kind {kind!r}; expected 'schedule', 'record' or 'ir_module'"
        )

    def dump_pruned(self, destination: Database) -> None:
        """Commit the best valid record of every workload into ``destination``."""
        equality = ModuleEquality(self.module_equality)
        groups: dict[int, list[tuple[IRModule, TuningRecord]]] = {}
        for record in latest_per_schedule(self.get_all_tuning_records()):
            if not record.is_valid:
                continue
            mod = record.workload.mod
            chain = groups.setdefault(equality.hash(mod), [])
            for k, (other_mod, best) in enumerate(chain):
                if equality.equal(other_mod, mod):
                    if record.mean_run_sec < best.mean_run_sec:
                        chain[k] = (other_mod, record)
                    break
            else:
                chain.append((mod, record))
        for chain in groups.values():
            for mod, record in chain:
                workload = destination.commit_workload(mod)
                destination.commit_tuning_record(dataclasses.replace(record, workload=workload))

    # scoping --------------------------------------------------------------------------
    def __enter__(self) -> Database:
        tokens = self.__dict__.setdefault("_scope_tokens", [])
        tokens.append(_SCOPE.set(_SCOPE.get() + (self,)))
        return self

    def __exit__(self, *exc) -> None:
        _SCOPE.reset(self.__dict__["_scope_tokens"].pop())

    @staticmethod
    def current() -> Database | None:
        """The innermost database entered with ``with db:``, or None."""
        scope = _SCOPE.get()
        return scope[-1] if scope else None

    @staticmethod
    def create(
        kind: Literal["json", "memory", "union", "ordered_union", "sqlite"]
        | str
        | Callable[[Schedule], bool] = "json",
        *args: Any,
        **kwargs: Any,
    ) -> Database:
        """Create a database: "json", "memory", "union", "ordered_union", "sqlite" (or
        another registered kind, see :mod:`metaschedule.registry`), or a schedule function
        (a ``ScheduleFnDatabase``, registered as "schedule_fn").

        Raises:
            ValueError: an unknown kind (the message lists the known ones).
        """
        if callable(kind):
            return registry.create("database", "schedule_fn", kind, *args, **kwargs)
        return registry.create("database", kind, *args, **kwargs)


class PyDatabase(Database):
    """The base for databases written in Python: subclass it and implement the storage
    methods (decorate with ``@ms.derived_object`` as in TVM)."""


create = Database.create


def check_top_k(top_k: int) -> int:
    if not isinstance(top_k, int) or top_k < 0:
        raise ValueError(f"top_k must be a non-negative integer, got {top_k!r}")
    return top_k
