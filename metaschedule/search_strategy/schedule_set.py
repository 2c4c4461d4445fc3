"""Schedules up to the structure of their module: what a search has seen or measured.

:func:`schedule_bucket` hashes a module's loop nest skeleton; :class:`ScheduleSet` keeps
modules by bucket and tells those of a bucket apart with ``structural_equal``, and
keeps traces by key for records not replayed; :class:`ScheduleInfo` is a schedule with
its bucket and trace key, computed once.
"""

from __future__ import annotations

from typing import Any

from ..schedule import Schedule
from ..tir.expr import FloatImm, IntImm
from ..tir.function import IRModule, PrimFunc
from ..tir.stmt import BlockRealize, For, SeqStmt, Stmt
from ..tir.structural import structural_equal
from .base import trace_key

__all__ = ["ScheduleInfo", "ScheduleSet", "schedule_bucket"]


def schedule_bucket(mod: IRModule | PrimFunc) -> int:
    """A hash of a module's loop nest skeleton, consistent with ``structural_equal(...,
    map_free_vars=True)`` (structurally equal modules get equal buckets): per function,
    its statements in order with the constant loop bounds, loop kinds and threads, block
    names and iteration counts, and the annotations' keys with their int, float or
    string values (a value of any other kind counts as unknown). Where
    :func:`~metaschedule.tir.structural.structural_hash` spells every expression,
    this walks the statements only: the search buckets every schedule it makes by it
    (schedules that differ only in their expressions share a bucket, and
    ``structural_equal`` tells them apart). Within one process only (``hash`` of
    strings is salted)."""
    funcs = [mod] if isinstance(mod, PrimFunc) else list(mod.functions.values())
    return hash(tuple(sorted(hash(_skeleton(f.body)) for f in funcs)))


def _skeleton(body: Stmt) -> tuple:
    out: list = []
    stack = [body]
    while stack:
        s = stack.pop()
        t = type(s)
        if t is For:
            out.append(
                (_scalar(s.min), _scalar(s.extent), s.kind, s.thread_binding, _ann(s.annotations))
            )
            stack.append(s.body)
        elif t is SeqStmt:
            out.append(len(s.seq))
            stack.extend(reversed(s.seq))
        elif t is BlockRealize:
            block = s.block
            out.append((block.name_hint, len(block.iter_vars), _ann(block.annotations)))
            stack.append(block.body)
            if block.init is not None:
                stack.append(block.init)
        else:
            out.append(t.__name__)
    return tuple(out)


def _scalar(x: Any) -> Any:
    if isinstance(x, (IntImm, FloatImm)):
        return x.value
    if isinstance(x, (int, float, str)):
        return x
    return "?"


def _ann(annotations: Any) -> tuple:
    return tuple(sorted((k, _scalar(v)) for k, v in annotations.items())) if annotations else ()


class ScheduleInfo:
    """A schedule with its module bucket and trace key, computed once."""

    __slots__ = ("_bucket", "_tkey", "sch")

    def __init__(self, sch: Schedule):
        self.sch = sch
        self._bucket: int | None = None
        self._tkey: str | None = None

    @property
    def bucket(self) -> int:
        if self._bucket is None:
            self._bucket = schedule_bucket(self.sch.mod)
        return self._bucket

    @property
    def tkey(self) -> str:
        if self._tkey is None:
            self._tkey = trace_key(self.sch.trace)
        return self._tkey


class ScheduleSet:
    """Schedules up to the structure of their module (bucketed by
    :func:`schedule_bucket`, told apart by ``structural_equal``), and traces by key."""

    def __init__(self) -> None:
        self._mods: dict[int, list[IRModule]] = {}
        self._trace_keys: set[str] = set()

    def add(self, info: ScheduleInfo) -> None:
        if not self.contains(info, check_traces=False):
            self._mods.setdefault(info.bucket, []).append(info.sch.mod)

    def add_trace_key(self, key: str) -> None:
        self._trace_keys.add(key)

    def discard(self, info: ScheduleInfo) -> None:
        """Forget this very module (by identity)."""
        bucket = self._mods.get(info.bucket, [])
        bucket[:] = [m for m in bucket if m is not info.sch.mod]

    def contains(self, info: ScheduleInfo, check_traces: bool = True) -> bool:
        mod = info.sch.mod
        for other in self._mods.get(info.bucket, ()):
            if other is mod or structural_equal(other, mod, map_free_vars=True):
                return True
        return check_traces and bool(self._trace_keys) and info.tkey in self._trace_keys

    def __len__(self) -> int:
        return sum(len(v) for v in self._mods.values()) + len(self._trace_keys)
