"""The plan stage of the C code generator: decisions as frozen data, made before any text.

:func:`plan_function` runs the TIR-to-TIR passes (:data:`.passes.PASSES`) on a lowered
function and decides, from the body and the target's ISA record:

* the heap buffers taken at function entry, and the parallel regions
  (:class:`.c_parallel.ParallelPlan`);
* the register tiles (:class:`.c_accumulate.AccumulatorPlan`) at the loops where they
  start, the serial loops over a reduction vectorized over their outputs
  (:func:`.c_vector.vectorize_outputs`), the fused vectorized loops split back in two
  (:func:`.c_ir.unfuse`), and the init nests folded into the tiles they start
  (:class:`.c_init_fusion.InitFusion`).

The emitter (:mod:`.c_codegen`) writes C from the body and this plan: it looks every
decision up here. A tile whose vector code cannot be written as planned is written as the
loop it was (the plan says what is tried, first); loops made only while writing (an
unrolled copy is the same loop) are planned then, by the same functions. A cost model
reads the same plan::

    plan = plan_function(lower(sch.mod["main"]), "llvm -mcpu=haswell")
    [len(t.points) for t in plan.tiles]          # accumulators of each register tile
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from ..target import Target
from ..tir.buffer import Buffer
from ..tir.function import PrimFunc
from ..tir.stmt import Allocate, For, ForKind, IfThenElse, SeqStmt, Stmt
from .c_accumulate import AccumulatorPlan, plan_accumulators
from .c_expr import CodegenError
from .c_init_fusion import InitFusion, plan_init_fusion
from .c_ir import heap_allocations, unfuse
from .c_limits import TileLimits
from .c_parallel import ParallelPlan, plan_parallel
from .c_vector import vectorize_outputs
from .isa import CpuIsa, isa_of
from .options import CodegenOptions
from .passes import PassContext, run_passes

__all__ = ["FunctionPlan", "PlanContext", "emitted_loops", "plan_body", "plan_function"]


@dataclass(frozen=True)
class PlanContext:
    """What planning reads of the target (a :class:`.c_limits.PlanTarget`)."""

    isa: CpuIsa
    limits: TileLimits

    @staticmethod
    def of(target: Target | str) -> PlanContext:
        isa = isa_of(Target(target))
        return PlanContext(isa, TileLimits.of(isa))


@dataclass(frozen=True, eq=False)
class FunctionPlan:
    """The decisions for one function (see the module docstring).

    Attributes:
        body: the function body after the passes.
        heap: the allocations too large for the stack outside every parallel loop, taken
            once per call at function entry.
        parallel: the parallel regions of the body.
        tiles: ``(loop, plan)`` of each register tile, in the order of the body.
        rows: ``(loop, nest)``: a serial loop over a reduction and the nest it becomes,
            vectorized over its outputs.
        unfused: ``(loop, nest)``: a fused vectorized loop and the nest it is split into.
        inits: ``(init, reduction, fusion)``: an init nest folded into the tiles of the
            reduction nest after it.
    """

    body: Stmt
    heap: tuple[Buffer, ...]
    parallel: ParallelPlan
    tiles: tuple[tuple[For, AccumulatorPlan], ...] = ()
    rows: tuple[tuple[For, For], ...] = ()
    unfused: tuple[tuple[For, For], ...] = ()
    inits: tuple[tuple[Stmt, Stmt, InitFusion], ...] = ()
    # every loop or pair of statements considered, by identity (their objects are held
    # here, so an id is never reused while the plan lives): the emitter's lookups
    _tiles: dict[int, tuple[For, AccumulatorPlan | None]] = field(default_factory=dict, repr=False)
    _rows: dict[int, tuple[For, For | None]] = field(default_factory=dict, repr=False)
    _unfused: dict[int, tuple[For, For | None]] = field(default_factory=dict, repr=False)
    _inits: dict[tuple[int, int], tuple[Stmt, Stmt, InitFusion | None]] = field(
        default_factory=dict, repr=False
    )

    def tile_at(self, loop: For) -> AccumulatorPlan | None | Literal[False]:
        """The tile planned at ``loop``, None if none; False if ``loop`` was not planned
        (a loop made while writing)."""
        hit = self._tiles.get(id(loop))
        return False if hit is None else hit[1]

    def row_at(self, loop: For) -> For | None | Literal[False]:
        """``loop`` vectorized over its outputs, None if not; False if not planned."""
        hit = self._rows.get(id(loop))
        return False if hit is None else hit[1]

    def unfused_at(self, loop: For) -> For | None | Literal[False]:
        """The fused vectorized ``loop`` split in two, None if not; False if not planned."""
        hit = self._unfused.get(id(loop))
        return False if hit is None else hit[1]

    def init_at(self, init: Stmt, red: Stmt) -> InitFusion | None | Literal[False]:
        """The fusion of ``init`` into ``red``, None if none; False if not planned."""
        hit = self._inits.get((id(init), id(red)))
        return False if hit is None else hit[2]


def plan_function(
    func: PrimFunc,
    target: Target | str,
    options: CodegenOptions | None = None,
    *,
    debug: bool = False,
) -> FunctionPlan:
    """The plan of a lowered ``func`` for a cpu ``target``.

    Args:
        func: a lowered PrimFunc (``metaschedule.tir.transform.lower``).
        target: a cpu target.
        options: the code generator's switches (default: those in force).
        debug: plan bounds-checked code (no vector loops made, no register tiles).

    Raises:
        CodegenError: a target of another kind.
    """
    target = Target(target)
    if target.kind != "cpu":
        raise CodegenError(f"the C code generator plans for cpu targets, got {target.kind}")
    if options is None:
        return _plan(func, PlanContext.of(target), CodegenOptions.current(), debug)
    with options.applied():
        return _plan(func, PlanContext.of(target), options, debug)


def plan_body(
    body: Stmt, ctx: PlanContext, *, version_guards: bool = True, inits: bool = True
) -> FunctionPlan:
    """The plan of a lowered function ``body`` with the options in force (the passes run on
    it first). For a cost model that prices some decisions itself:
    ``version_guards=False`` leaves the versioning pass out (no loops written twice),
    ``inits=False`` plans no init fusion (:attr:`FunctionPlan.inits` empty; the tiles
    are the same, and the init nests are planned as the loops they are)."""
    options = CodegenOptions.current()
    return _plan_body(body, ctx, options, False, version_guards, inits)


def emitted_loops(plan: FunctionPlan) -> Stmt:
    """``plan.body`` with the loops the emitter makes while writing in place: each serial
    row vectorized over its outputs (:attr:`FunctionPlan.rows`) and each fused vector loop
    split in two (:attr:`FunctionPlan.unfused`). Loops it keeps are the same objects, so
    :meth:`FunctionPlan.tile_at` answers for them, and for the loops of those made; the
    loops around a replaced one are copies (``tile_at``: False), where no tile was planned
    (the planner went on below them)."""
    made = {id(loop): nest for loop, nest in (*plan.rows, *plan.unfused)}
    if not made:
        return plan.body

    def visit(s: Stmt) -> Stmt:
        if isinstance(s, SeqStmt):
            seq = [visit(x) for x in s.seq]
            return s if all(a is b for a, b in zip(seq, s.seq)) else replace(s, seq=tuple(seq))
        if isinstance(s, For):
            nest = made.get(id(s))
            if nest is not None:
                return visit(nest)
            body = visit(s.body)
            return s if body is s.body else replace(s, body=body)
        if isinstance(s, IfThenElse):
            then = visit(s.then_case)
            other = None if s.else_case is None else visit(s.else_case)
            if then is s.then_case and other is s.else_case:
                return s
            return replace(s, then_case=then, else_case=other)
        if isinstance(s, Allocate):
            body = visit(s.body)
            return s if body is s.body else replace(s, body=body)
        return s

    return visit(plan.body)


def _plan(func: PrimFunc, ctx: PlanContext, options: CodegenOptions, debug: bool) -> FunctionPlan:
    return _plan_body(func.body, ctx, options, debug, dict(options.items)["version_guards"])


def _plan_body(
    body: Stmt,
    ctx: PlanContext,
    options: CodegenOptions,
    debug: bool,
    version_guards: bool,
    inits: bool = True,
) -> FunctionPlan:
    opts = dict(options.items)
    passes = PassContext(ctx.isa, opts["auto_vectorize"], version_guards, debug)
    body = run_passes(body, passes)
    limit = opts["stack_alloc_limit"]
    heap = tuple(heap_allocations(body, False, limit))
    parallel = plan_parallel(body, limit, opts["shared_regions"])
    plan = FunctionPlan(body, heap, parallel)
    if not debug:
        _Planner(ctx, opts["unfuse_unroll"], plan, inits).walk(body)
    found = plan._tiles.values()
    object.__setattr__(plan, "tiles", tuple((lp, t) for lp, t in found if t is not None))
    rows = plan._rows.values()
    object.__setattr__(plan, "rows", tuple((lp, r) for lp, r in rows if r is not None))
    unfused = plan._unfused.values()
    object.__setattr__(plan, "unfused", tuple((lp, u) for lp, u in unfused if u is not None))
    fused = plan._inits.values()
    object.__setattr__(plan, "inits", tuple((i, r, f) for i, r, f in fused if f is not None))
    return plan


class _Planner:
    """Walks the body as the emitter will, planning each loop it reaches outside a tile."""

    def __init__(
        self, ctx: PlanContext, unfuse_unroll: int, plan: FunctionPlan, inits: bool = True
    ) -> None:
        self.ctx, self.unfuse_unroll, self.plan, self.inits = ctx, unfuse_unroll, plan, inits

    def walk(self, s: Stmt) -> None:
        if isinstance(s, SeqStmt):
            seq, i = s.seq, 0
            while i < len(seq):
                if self.inits and i + 1 < len(seq):
                    fusion = plan_init_fusion(self.ctx, seq[i], seq[i + 1])
                    self.plan._inits[(id(seq[i]), id(seq[i + 1]))] = (seq[i], seq[i + 1], fusion)
                    if fusion is not None:  # the init nest is not written
                        self.walk(seq[i + 1])
                        i += 2
                        continue
                self.walk(seq[i])
                i += 1
        elif isinstance(s, For):
            self.loop(s)
        elif isinstance(s, IfThenElse):
            self.walk(s.then_case)
            if s.else_case is not None:
                self.walk(s.else_case)
        elif isinstance(s, Allocate):
            self.walk(s.body)

    def loop(self, loop: For) -> None:
        tile = plan_accumulators(self.ctx, loop)
        self.plan._tiles[id(loop)] = (loop, tile)
        if tile is not None:
            return
        row = vectorize_outputs(self.ctx, loop)
        self.plan._rows[id(loop)] = (loop, row)
        if row is not None:
            self.walk(row)
            return
        if loop.kind is ForKind.VECTORIZED:
            split = unfuse(loop, self.unfuse_unroll)
            self.plan._unfused[id(loop)] = (loop, split)
            if split is not None:
                self.walk(split)
                return
        self.walk(loop.body)
