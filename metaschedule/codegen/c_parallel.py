"""One OpenMP parallel region for a function's consecutive parallel loop nests.

A function whose body runs several parallel loop nests one after another (padding then
a convolution, the max, exp-sum and normalize stages of a softmax, a layout transform)
would open one OpenMP team per nest, and each team costs a wake-up of the sleeping
threads: with passive waiting (the runner's, see :mod:`metaschedule.runner.config`) a
futex round trip per nest, more than a short kernel's own work. Here the nests share one
region::

    float T_max[8];                              // shared: declared before the region
    #pragma omp parallel num_threads(2)
    {
      #pragma omp for schedule(static) nowait    // iteration i writes T_max[i] only ...
      for (i0 = 0; i0 < 8; ++i0) { ... }
      #pragma omp for schedule(static)           // ... and iteration i reads it only
      for (i0_1 = 0; i0_1 < 8; ++i0_1) { ... }
      #pragma omp single
      { ... }                                    // a serial statement between two nests
      #pragma omp for schedule(static)
      for (...) { ... }
    }

Rules (:func:`plan_items`; the plan, frozen: :func:`plan_parallel`; :func:`emit_body`):

* The top level of the body (through ``SeqStmt`` and ``Allocate`` outside every loop) is
  a list of items: parallel loops, serial statements, and statements holding a parallel
  loop deeper inside (a serial loop around one). The latter end a region: they run as
  before, one team per parallel loop in them.
* Between the first and the last parallel loop of a run without such a statement, the
  loops become ``omp for`` and serial statements ``omp single``; the run needs two
  parallel loops to become a region, otherwise the code is what it was.
* Stack arrays allocated at the top level are declared before the region (shared by its
  threads, as they were); heap buffers inside its parallel loops come from the workspace
  once per thread for the whole region.
* Every ``omp for`` and ``omp single`` ends with a barrier unless what follows is proved
  not to race with what came since the last barrier (``nowait``): no buffer written by
  one is touched by the other, or both are ``schedule(static)`` loops of the same trip
  count (OpenMP gives a thread the same iterations of both) whose iteration ``t`` touches
  only elements ``[S*t + c, S*t + c + S)`` of each shared buffer, for one stride ``S``
  and offset ``c`` (:func:`_aligned`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..tir import expr as E
from ..tir.buffer import Buffer
from ..tir.dtype import c_type
from ..tir.functor import Visitor, has_loop_kind
from ..tir.stmt import Allocate, BufferStore, Evaluate, For, ForKind, SeqStmt, Stmt
from ..tir.transform.affine import affine, const_bounds
from .c_expr import linear_index, strip_parens
from .c_ir import heap_allocations
from .c_team import team
from .c_workspace import close_heap, open_heap

if TYPE_CHECKING:
    from .c_writer import CpuEmitter

__all__ = [
    "SHARED_REGIONS",
    "Item",
    "ParallelPlan",
    "Region",
    "Step",
    "Worksharing",
    "emit_body",
    "plan_barriers",
    "plan_items",
    "plan_parallel",
]

#: Whether consecutive parallel nests share a region (False: one team per nest, as
#: before; ``benchmarks/omp_regions.py`` compares the two).
SHARED_REGIONS = True


@dataclass
class _Accesses:
    """The buffers a statement touches, its per-element accesses, and its loops' ranges."""

    touched: set[Buffer] = field(default_factory=set)
    written: set[Buffer] = field(default_factory=set)
    private: set[Buffer] = field(default_factory=set)  # allocated inside: one per iteration
    refs: dict[Buffer, int] = field(default_factory=dict)  # references of any kind
    indexed: dict[Buffer, list[tuple[E.PrimExpr, ...]]] = field(default_factory=dict)
    ranges: dict[E.Var, tuple[E.PrimExpr, E.PrimExpr]] = field(default_factory=dict)

    def shared(self) -> set[Buffer]:
        return self.touched - self.private

    def maybe_written(self) -> set[Buffer]:
        """Stored to, or referenced other than by a load or store (taken as written)."""
        other = {b for b in self.shared() if self.refs[b] != len(self.indexed.get(b, ()))}
        return self.written | other


def _accesses(s: Stmt) -> _Accesses:
    out = _Accesses()

    class _V(Visitor):
        def visit_buffer(self, b: Buffer) -> None:
            out.touched.add(b)
            out.refs[b] = out.refs.get(b, 0) + 1

        def visit_BufferStore(self, st: BufferStore) -> None:
            out.written.add(st.buffer)
            out.indexed.setdefault(st.buffer, []).append(tuple(st.indices))
            self.generic_visit(st)

        def visit_BufferLoad(self, ld: E.BufferLoad) -> None:
            out.indexed.setdefault(ld.buffer, []).append(tuple(ld.indices))
            self.generic_visit(ld)

        def visit_Allocate(self, a: Allocate) -> None:
            out.private.add(a.buffer)
            self.generic_visit(a)

        def visit_For(self, lp: For) -> None:
            out.ranges[lp.loop_var] = (lp.min, lp.extent)
            self.generic_visit(lp)

    _V().visit(s)
    return out


@dataclass(eq=False)
class Item:
    """A top-level statement: ``kind`` is "parallel" (a parallel loop), "serial" (no
    parallel loop in it) or "nested" (a parallel loop inside other statements).
    ``units`` are the unit loops around it (see :class:`Unit`)."""

    stmt: Stmt
    kind: str
    units: tuple[For, ...] = ()
    nowait: bool = False
    _acc: _Accesses | None = None

    @property
    def acc(self) -> _Accesses:
        if self._acc is None:
            self._acc = _accesses(self.stmt)
        return self._acc


def _unit(s: Stmt) -> bool:
    """A serial loop of one iteration (batch 1): its variable is a constant."""
    return (
        isinstance(s, For)
        and s.kind in (ForKind.SERIAL, ForKind.UNROLLED)
        and isinstance(s.extent, E.IntImm)
        and s.extent.value == 1
    )


def plan_items(body: Stmt) -> tuple[list[Stmt], list[Item]]:
    """The top-level allocations and unit loops (in order) and the items of a function
    body (see the module docstring)."""
    outer: list[Stmt] = []
    items: list[Item] = []

    def walk(s: Stmt, units: tuple[For, ...]) -> None:
        if isinstance(s, SeqStmt):
            for x in s.seq:
                walk(x, units)
        elif isinstance(s, Allocate):
            outer.append(s)
            walk(s.body, units)
        elif _unit(s):
            assert isinstance(s, For)
            outer.append(s)
            walk(s.body, (*units, s))
        elif isinstance(s, For) and s.kind is ForKind.PARALLEL:
            items.append(Item(s, "parallel", units))
        elif isinstance(s, Evaluate) and isinstance(s.value, (E.IntImm, E.FloatImm)):
            pass  # a no-op (the code generator skips it too)
        else:
            kind = "nested" if has_loop_kind(s, ForKind.PARALLEL) else "serial"
            items.append(Item(s, kind, units))

    walk(body, ())
    return outer, items


def _runs(items: list[Item]) -> list[tuple[int, int]]:
    """``[start, stop)`` of each region: from the first to the last parallel loop of a run
    of items without a "nested" one, when the run has two parallel loops or more."""
    out, par = [], []
    for i, it in enumerate([*items, Item(SeqStmt(()), "nested")]):
        if it.kind == "parallel":
            par.append(i)
        elif it.kind == "nested":
            if len(par) >= 2:
                out.append((par[0], par[-1] + 1))
            par = []
    return out


# ----------------------------------------------------------------------------- barriers


def _trip(it: Item) -> tuple[int, int] | None:
    """(min, extent) of a parallel loop with constant bounds."""
    lp = it.stmt
    if it.kind != "parallel" or not isinstance(lp, For):
        return None
    if not isinstance(lp.min, E.IntImm) or not isinstance(lp.extent, E.IntImm):
        return None
    return lp.min.value, lp.extent.value


def _blocks(it: Item, buf: Buffer) -> tuple[int, int, int] | None:
    """(S, lo, hi): iteration ``t`` of the parallel loop ``it`` touches only elements
    ``S*t + [lo, hi]`` of ``buf``; None when that is not proved."""
    acc, lp = it.acc, it.stmt
    trip = _trip(it)
    if trip is None or not isinstance(lp, For):
        return None
    indexed = acc.indexed.get(buf, [])
    if len(indexed) != acc.refs.get(buf, 0):  # referenced other than by a load or store
        return None
    ranges = {v: r for v, r in acc.ranges.items() if v is not lp.loop_var}
    ranges.update({u.loop_var: (u.min, u.extent) for u in it.units})
    stride, lo, hi = None, None, None
    for indices in indexed:
        form = affine(linear_index(buf, indices))
        s = form.coef(lp.loop_var)
        rest = form.without(lp.loop_var)
        if s <= 0 or rest.uses(lp.loop_var) or (stride is not None and s != stride):
            return None
        b = const_bounds(rest.to_expr("int64"), ranges)
        if b is None:
            return None
        stride = s
        lo = b[0] + s * trip[0] if lo is None else min(lo, b[0] + s * trip[0])
        hi = b[1] + s * trip[0] if hi is None else max(hi, b[1] + s * trip[0])
    if stride is None or lo is None or hi is None:
        return None
    return stride, lo, hi


def _aligned(a: Item, b: Item, buf: Buffer) -> bool:
    """Iteration ``t`` of ``a`` and iteration ``u != t`` of ``b`` touch distinct elements
    of ``buf`` (both parallel loops of the same trip count)."""
    ta, tb = _trip(a), _trip(b)
    if ta is None or tb is None or ta[1] != tb[1]:
        return False
    ba, bb = _blocks(a, buf), _blocks(b, buf)
    if ba is None or bb is None or ba[0] != bb[0]:
        return False
    return max(ba[2], bb[2]) - min(ba[1], bb[1]) < ba[0]


def _race_free(a: Item, b: Item) -> bool:
    """Threads may run ``b`` while others still run ``a``."""
    sa, sb = a.acc.shared(), b.acc.shared()
    conflicts = (a.acc.maybe_written() & sb) | (b.acc.maybe_written() & sa)
    return all(_aligned(a, b, buf) for buf in conflicts)


def plan_barriers(items: list[Item]) -> None:
    """Set ``nowait`` on the items of one region (the last keeps the region's barrier)."""
    window: list[Item] = []  # run since the last barrier
    for it, nxt in zip(items, items[1:]):
        window.append(it)
        it.nowait = all(_race_free(w, nxt) for w in window)
        if not it.nowait:
            window = []
    if items:
        items[-1].nowait = False


# ----------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Step:
    """A top-level statement as it is written: ``kind`` as :class:`Item`'s, ``units`` the
    unit loops around it, ``nowait`` (in a region) no barrier after it."""

    stmt: Stmt
    kind: str
    units: tuple[For, ...] = ()
    nowait: bool = False


@dataclass(frozen=True)
class Region:
    """Consecutive steps in one ``omp parallel`` region, and the heap buffers its threads
    take from the workspace once each for the whole region."""

    steps: tuple[Step, ...]
    heap: tuple[Buffer, ...] = ()


@dataclass(frozen=True)
class ParallelPlan:
    """A function body's parallel regions (see the module docstring).

    Attributes:
        outer: the top-level allocations and unit loops, declared before the regions;
            empty, with ``parts``, when no two parallel nests share a region (the body is
            then written as it is).
        parts: the steps outside regions and the regions, in order.
    """

    outer: tuple[Stmt, ...] = ()
    parts: tuple[Step | Region, ...] = ()

    @property
    def regions(self) -> tuple[Region, ...]:
        return tuple(p for p in self.parts if isinstance(p, Region))


def _step(it: Item) -> Step:
    return Step(it.stmt, it.kind, it.units, it.nowait)


def plan_parallel(body: Stmt, stack_limit: int, shared_regions: bool = True) -> ParallelPlan:
    """The regions of a function body (``shared_regions``: :data:`SHARED_REGIONS`); heap
    buffers are the allocations of more than ``stack_limit`` bytes."""
    outer, items = plan_items(body)
    runs = _runs(items) if shared_regions else []
    if not runs:
        return ParallelPlan()
    parts: list[Step | Region] = []
    at = 0
    for start, stop in runs:
        parts += [_step(it) for it in items[at:start]]
        region = items[start:stop]
        plan_barriers(region)
        heap: list[Buffer] = []
        for it in region:
            if it.kind == "parallel" and isinstance(it.stmt, For):
                found = heap_allocations(it.stmt.body, True, stack_limit)
                heap += [b for b in found if b not in heap]
        parts.append(Region(tuple(_step(it) for it in region), tuple(heap)))
        at = stop
    parts += [_step(it) for it in items[at:]]
    return ParallelPlan(tuple(outer), tuple(parts))


# ----------------------------------------------------------------------------- emission


@dataclass
class Worksharing:
    """What :meth:`.c_codegen.FunctionWriter._loop` needs for a parallel loop inside a region."""

    nowait: bool
    ok: str | None  # the C flag: this thread's heap buffers were allocated

    def emit_loop(self, fw: CpuEmitter, loop: For, name: str) -> None:
        fw.line("#pragma omp for schedule(static)" + (" nowait" if self.nowait else ""))
        fw.for_header(loop, name)
        if self.ok is not None:
            fw.line(f"  if (!{self.ok}) continue;")
        fw.in_parallel = True
        fw.block(loop.body)
        fw.in_parallel = False
        fw.line("}")


def emit_body(fw: CpuEmitter, body: Stmt, plan: ParallelPlan) -> None:
    """Emit a function body, its consecutive parallel nests in the shared regions of
    ``plan`` (:func:`plan_parallel`)."""
    if not plan.parts:
        fw.stmt(body)
        return
    fw.line("{")
    fw.indent += 1
    declared, units = [], []
    for s in plan.outer:  # shared by the regions' threads: declared before them
        if isinstance(s, For):  # a unit loop: its variable is a constant
            var = s.loop_var
            name = fw.var_names[var] = fw.names.fresh(var.name)
            fw.line(f"const {c_type(var.dtype)} {name} = {strip_parens(fw.expr(s.min))};")
            fw.ranges[var] = (s.min, s.extent)
            units.append(var)
        elif isinstance(s, Allocate) and s.buffer not in fw.hoisted:  # heap: taken at entry
            b = s.buffer
            name = fw.buf_names[b] = fw.buf_names.get(b) or fw.names.fresh(b.name)
            fw.line(f"{c_type(b.dtype)} {name}[{max(1, b.numel())}] __attribute__((aligned(64)));")
            fw.hoisted.add(b)
            declared.append(b)
    for part in plan.parts:
        if isinstance(part, Region):
            _region(fw, part)
        else:
            _emit_step(fw, part)
    for b in declared:
        fw.hoisted.discard(b)
    for var in units:
        del fw.ranges[var]
    fw.indent -= 1
    fw.line("}")


def _emit_step(fw: CpuEmitter, it: Step, sharing: Worksharing | None = None) -> None:
    """``it`` under the unroll annotations of its unit loops (as ``FunctionWriter.loop``
    reads them); a parallel loop of a region as ``omp for`` (``sharing``)."""
    saved = (fw.auto_unroll, fw.explicit_unroll, fw.omp_region)
    try:
        for u in it.units:
            if "pragma_auto_unroll_max_step" in u.annotations:
                fw.auto_unroll = int(u.annotations["pragma_auto_unroll_max_step"])
            if "pragma_unroll_explicit" in u.annotations:
                fw.explicit_unroll = bool(int(u.annotations["pragma_unroll_explicit"]))
        fw.omp_region = sharing
        fw.stmt(it.stmt)
    finally:
        fw.auto_unroll, fw.explicit_unroll, fw.omp_region = saved


def _region(fw: CpuEmitter, region: Region) -> None:
    fw.line(f"#pragma omp parallel num_threads({team(fw)})")
    fw.line("{")
    fw.indent += 1
    ok = None
    heap = list(region.heap)
    if heap:
        test = open_heap(fw, heap)
        ok = fw.names.fresh("heap_ok")
        fw.line(f"const int {ok} = {test};")
        fw.line(f"if (!{ok}) __atomic_store_n(&ms_status, -1, __ATOMIC_RELAXED);")
    for it in region.steps:
        if it.kind == "parallel":
            _emit_step(fw, it, Worksharing(it.nowait, ok))
        else:
            fw.line("#pragma omp single" + (" nowait" if it.nowait else ""))
            fw.line("{")
            fw.indent += 1
            _emit_step(fw, it)
            fw.indent -= 1
            fw.line("}")
    if heap:
        close_heap(fw, heap)
    fw.indent -= 1
    fw.line("}")
