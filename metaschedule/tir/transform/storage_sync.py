"""Pass: insert ``__syncthreads()`` barriers where shared memory passes between threads.

On a GPU the threads of a block run a kernel body each; a thread-bound loop
(``threadIdx.x``, ...) does not iterate: it names the thread's own index. Whatever one
thread stores to a ``shared`` buffer, another may read, so between a statement that
writes a shared buffer and a later one that reads it (or reads then overwrites it) all
threads must meet at a barrier. This pass works on the per-thread program: in every
sequence of statements, it puts a barrier before a statement that conflicts with a
shared-memory access made since the last barrier (read after write, write after read,
write after write), and at the end of a serial loop's body when the next iteration's
accesses conflict with those of the end of the body.

A barrier never goes inside a branch whose condition depends on the thread index (the
threads that skip it would never arrive); such a branch is taken as one statement. The
barrier is ``Evaluate(Call("int32", "tvm_storage_sync", ("shared",)))``, which the CUDA
code generator prints as ``__syncthreads()`` and the GPU emulator of
:mod:`metaschedule.tir.gpu_emulator` executes as a barrier.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import expr as E
from ..buffer import Buffer
from ..function import PrimFunc
from ..functor import Visitor, collect_vars, replace_fields
from ..stmt import Allocate, BufferStore, Evaluate, For, ForKind, IfThenElse, SeqStmt, Stmt, seq

__all__ = ["STORAGE_SYNC", "insert_storage_sync", "is_storage_sync", "storage_sync"]

#: The intrinsic name of a barrier.
STORAGE_SYNC = "tvm_storage_sync"


def storage_sync(scope: str = "shared") -> Evaluate:
    """A barrier statement for ``scope`` memory."""
    return Evaluate(E.Call("int32", STORAGE_SYNC, (E.StringImm(scope),)))


def is_storage_sync(stmt: Stmt) -> bool:
    """Whether ``stmt`` is a barrier made by :func:`storage_sync`."""
    return (
        isinstance(stmt, Evaluate)
        and isinstance(stmt.value, E.Call)
        and stmt.value.op == STORAGE_SYNC
    )


@dataclass
class _Accesses:
    reads: set[Buffer] = field(default_factory=set)
    writes: set[Buffer] = field(default_factory=set)

    def conflicts(self, other: _Accesses, waw: bool = True) -> bool:
        """Whether ``other`` (later) conflicts with these (earlier) accesses.

        Across iterations of one loop (``waw=False``) two writes do not conflict: a
        loop's iterations write their own elements (a cooperative fetch).
        """
        later_writes = other.writes if waw else set()
        return bool((self.writes & (other.reads | later_writes)) or (self.reads & other.writes))

    def update(self, other: _Accesses) -> None:
        self.reads |= other.reads
        self.writes |= other.writes

    def __bool__(self) -> bool:
        return bool(self.reads or self.writes)


class _SharedAccesses(Visitor):
    def __init__(self) -> None:
        self.acc = _Accesses()

    def visit_BufferStore(self, s: BufferStore) -> None:
        if s.buffer.scope == "shared":
            self.acc.writes.add(s.buffer)
        self.generic_visit(s)

    def visit_BufferLoad(self, e: E.BufferLoad) -> None:
        if e.buffer.scope == "shared":
            self.acc.reads.add(e.buffer)
        self.generic_visit(e)


def _accesses(stmt: Stmt) -> _Accesses:
    v = _SharedAccesses()
    v.visit(stmt)
    return v.acc


class _Inserter:
    """Rewrites the per-thread program; ``pending`` are the accesses since the last barrier."""

    def __init__(self, thread_vars: set[E.Var]):
        self.thread_vars = thread_vars

    def stmt(self, s: Stmt, pending: _Accesses) -> Stmt:
        """``s`` with barriers; ``pending`` is updated to the accesses after it."""
        if isinstance(s, SeqStmt):
            out: list[Stmt] = []
            for child in s.seq:
                acc = _accesses(child)
                if acc and pending.conflicts(acc) and self._splittable(child) is False:
                    out.append(storage_sync())
                    pending.reads.clear()
                    pending.writes.clear()
                out.append(self.stmt(child, pending))
            return seq(*out)
        if isinstance(s, For) and _is_thread_axis(s):
            return replace_fields(s, body=self.stmt(s.body, pending))
        if isinstance(s, For) and _accesses(s.body):
            return self._loop(s, pending)
        if isinstance(s, Allocate):
            return replace_fields(s, body=self.stmt(s.body, pending))
        if isinstance(s, IfThenElse) and not (collect_vars(s.condition) & self.thread_vars):
            before = _Accesses(set(pending.reads), set(pending.writes))
            then = self.stmt(s.then_case, pending)
            other = before
            els = None if s.else_case is None else self.stmt(s.else_case, other)
            pending.update(other)
            return replace_fields(s, then_case=then, else_case=els)
        acc = _accesses(s)
        if acc and pending.conflicts(acc):
            pending.reads.clear()
            pending.writes.clear()
            pending.update(acc)
            return seq(storage_sync(), s)
        pending.update(acc)
        return s

    def _splittable(self, child: Stmt) -> bool:
        """False when ``child`` is handled as one unit (a barrier goes before it)."""
        if isinstance(child, (For, Allocate)) or (
            isinstance(child, IfThenElse) and not (collect_vars(child.condition) & self.thread_vars)
        ):
            return True
        return False

    def _loop(self, loop: For, pending: _Accesses) -> Stmt:
        body_acc = _accesses(loop.body)
        if pending.conflicts(body_acc):
            # The first iteration conflicts with what came before the loop.
            pending.reads.clear()
            pending.writes.clear()
            body = self.stmt(loop.body, pending)
            return seq(storage_sync(), self._close(loop, body, pending))
        body = self.stmt(loop.body, pending)
        return self._close(loop, body, pending)

    def _close(self, loop: For, body: Stmt, pending: _Accesses) -> Stmt:
        """Add a barrier at the end of the body when the next iteration conflicts."""
        if pending.conflicts(_first_accesses(body), waw=False):
            body = seq(body, storage_sync())
            pending.reads.clear()
            pending.writes.clear()
        return replace_fields(loop, body=body)


def _is_thread_axis(loop: For) -> bool:
    """A loop that names a block or thread index (it does not iterate in a thread);
    virtual threads (``vthread``) are serial loops of each thread."""
    return loop.kind is ForKind.THREAD_BINDING and not loop.thread_binding.startswith("vthread")


def _first_accesses(body: Stmt) -> _Accesses:
    """The shared accesses from the start of ``body`` up to its first barrier."""
    acc = _Accesses()
    stmts = body.seq if isinstance(body, SeqStmt) else (body,)
    for s in stmts:
        if is_storage_sync(s):
            break
        acc.update(_accesses(s))
    return acc


class _ThreadVars(Visitor):
    def __init__(self) -> None:
        self.vars: set[E.Var] = set()

    def visit_For(self, loop: For) -> None:
        if loop.kind is ForKind.THREAD_BINDING and loop.thread_binding.startswith("threadIdx"):
            self.vars.add(loop.loop_var)
        self.generic_visit(loop)


def insert_storage_sync(func: PrimFunc) -> PrimFunc:
    """Insert shared-memory barriers in ``func`` (see the module docstring)."""
    finder = _ThreadVars()
    finder.visit(func.body)
    if not finder.vars:
        return func
    return func.with_body(_Inserter(finder.vars).stmt(func.body, _Accesses()))
