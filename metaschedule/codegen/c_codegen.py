"""C source for lowered PrimFuncs (the CPU back end).

A pipeline, as TVM's lowering and tinygrad's renderer are: the TIR-to-TIR passes
(:data:`.passes.PASSES`), then the plan (:func:`.plan.plan_function`: frozen decisions on
register tiles, init fusion, rows made vector code, parallel regions and heap buffers),
then this module's :class:`FunctionWriter`, which writes C from the body and the plan (its
stages: :mod:`.c_vector`, :mod:`.c_accumulate_emit`, :mod:`.c_invariant`,
:mod:`.c_parallel`). Broadcasts shared in registers depend on the code written around
them: a function that shares some is written twice, the second time with the decisions
of the first (:class:`.c_invariant.SharedPlan`); no stage edits text another wrote.

Each function becomes ``int32_t <symbol>(void** args)``: ``args[i]`` points to the
data of parameter ``i``, a dense row-major array; the return value is 0 on success.
Loops map to C as follows:

* ``parallel``: the outermost parallel loop of a nest becomes
  ``#pragma omp parallel for num_threads(<target.num_cores>)``; nested ones run serially.
  Consecutive top-level parallel nests share one region instead (:mod:`.c_parallel`).
* ``vectorized``: GCC vector extensions, see :mod:`.c_vector`. A serial loop over a
  reduction (``for j: for k: C[j] += ...``, ``j`` the innermost spatial loop) is made
  vector code too, as LLVM's loop vectorizer does for TVM (``c_vector.vectorize_outputs``).
* serial loops around a register tile (:mod:`.c_accumulate`): loads invariant in them are
  made once before them, broadcasts read as vectors and scalars once per iteration
  (:mod:`.c_invariant`).
* ``unroll``: ``#pragma GCC unroll <extent>``. A loop annotated with
  ``pragma_auto_unroll_max_step = S`` unrolls every loop of its nest whose total step
  count is at most ``S`` (and at most :data:`AUTO_UNROLL_STEPS`, which bounds the
  compiler's work); ``pragma_unroll_explicit = 1`` replicates the body of such
  loops instead of relying on the pragma, but only while the replicated nest stays
  within :data:`EXPLICIT_UNROLL_STEPS` statements: the source stays bounded (an
  unroll of 512 steps is a pragma on a loop whose body holds at most that many copies,
  not 512 copies), so a build takes the compiler a fraction of a second. A register
  tile's steps are written out up to :data:`EXPLICIT_TILE_STEPS` when that lets
  :mod:`.c_invariant` keep loads out of the loop around the tile.
* ``thread_binding``: rejected, it is for GPU targets.

Before emission, loop bodies whose loads are guarded by inlined padding get an unguarded
copy for the iterations where every guard holds, chosen by one test per iteration
(:mod:`.c_versioning`; ``VERSION_GUARDS = False`` turns it off). A loop nest the schedule
left without a vector loop gets one where a loop of unit stride can move innermost
without changing a result, as LLVM gives TVM's kernels (:mod:`.c_autovector`;
``AUTO_VECTORIZE = False`` turns it off).

Allocations of up to :data:`STACK_ALLOC_LIMIT` bytes are stack arrays declared where
the ``Allocate`` is (inside a loop: one per iteration, which costs nothing). Larger
ones go on the heap, and are hoisted so that ``malloc`` never runs in a loop: those
outside every parallel loop are taken once per call at the top of the function,
those inside a parallel loop once per thread, in an ``omp parallel`` region that
wraps the ``omp for``. Reusing the memory between iterations is safe because a
lowered ``Allocate`` promises nothing about the initial contents, and lowering
(``plan_allocations``) places a buffer used in a parallel loop inside its body, so
each iteration's buffer is private to its thread.
Heap buffers come from a workspace kept between calls (:mod:`.c_workspace`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..target import Target
from ..tir import expr as E
from ..tir.buffer import Buffer
from ..tir.dtype import c_type
from ..tir.function import IRModule, PrimFunc
from ..tir.stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    SeqStmt,
    Stmt,
)
from . import c_ir
from .c_accumulate import AccumulatorPlan, plan_accumulators
from .c_accumulate_emit import emit_accumulated, emit_fused_init
from .c_expr import CodegenError, linear_index, strip_parens
from .c_helpers import HEADER, Helpers, c_comment_text
from .c_init_fusion import InitFusion, plan_init_fusion
from .c_invariant import InvariantScope, SharedPlan
from .c_ir import (
    access_key,
    affine_add,
    alloc_bytes,
    heap_allocations,
    numel_checked,
    steps,
    unfuse,
)
from .c_limits import TileLimits
from .c_parallel import Worksharing, emit_body
from .c_team import team
from .c_vector import IN_REG, NotVectorizable, emit_lane_sums, emit_vectorized, vectorize_outputs
from .c_workspace import close_heap, open_heap, workspace_globals
from .c_writer import C_RESERVED, CWriter, NameTable, ParamInfo, param_infos
from .debug import DEBUG_C, OOB_STATUS, DebugSites
from .isa import CpuIsa, isa_of
from .options import CodegenOptions
from .plan import FunctionPlan, plan_function

#: Allocations up to this many bytes live on the stack, larger ones on the heap.
STACK_ALLOC_LIMIT = 32 * 1024
#: Largest step count (:func:`steps`) of a loop that ``pragma_unroll_explicit`` replicates
#: in the source; larger nests get ``#pragma GCC unroll`` (bounded source, fast builds).
EXPLICIT_UNROLL_STEPS = 16
#: ... and up to this many in a register tile (:mod:`.c_accumulate`) whose steps, written
#: out, read values invariant in the loop around the tile: :mod:`.c_invariant` then keeps
#: them in registers (mmodd's 7 steps of a 51-lane row, 35 statements, with the output
#: rows 1020 bytes apart: 0.45x -> 0.73x TVM on one thread).
EXPLICIT_TILE_STEPS = 64
#: Largest step count of a loop unrolled by ``pragma_auto_unroll_max_step`` (a larger
#: setting unrolls the inner loops up to this many steps): GCC's complete unrolling of a
#: 512-step nest of vector code takes it tens of seconds, LLVM's (TVM's) a fraction.
AUTO_UNROLL_STEPS = 64
#: ... and of register-sized vector statements: a 56-step loop of 64-lane rows is 448 of
#: them on AVX2 (8 floats a register), 2 s of GCC's time for one candidate.
AUTO_UNROLL_PIECES = 256
#: Guarded loop bodies (inlined padding) get an unguarded copy for the iterations where
#: every guard holds (:mod:`.c_versioning`).
VERSION_GUARDS = True
#: Scalar loop nests get a vector loop where one can move innermost (:mod:`.c_autovector`).
AUTO_VECTORIZE = True


@dataclass(frozen=True)
class CFunction:
    name: str
    symbol: str
    params: tuple[ParamInfo, ...]


@dataclass(frozen=True)
class CSource:
    """Generated C: ``code`` defines one function per entry of ``functions``."""

    code: str
    functions: tuple[CFunction, ...]


# ----------------------------------------------------------------------------- module


def codegen_c(
    mod: IRModule | PrimFunc,
    target: Target | str = "cpu",
    debug: DebugSites | None = None,
    options: CodegenOptions | None = None,
) -> CSource:
    """C source for every (lowered) function of ``mod``.

    With ``debug`` (see :mod:`.debug`), every access is bounds-checked at run time and
    its site recorded in ``debug``. ``options``: the code generator's switches (default:
    those in force, :meth:`.CodegenOptions.current`).
    """
    if options is not None:
        with options.applied():
            return codegen_c(mod, target, debug)
    target = Target(target)
    if target.kind != "cpu":
        raise CodegenError(f"the C code generator is for cpu targets, got {target.kind}")
    if isinstance(mod, PrimFunc):
        mod = IRModule({"main": mod})
    helpers = Helpers()
    symbols = NameTable()
    bodies, functions = [], []
    for name, func in mod.items():
        symbol = symbols.fresh(name + "_kernel" if name in C_RESERVED else name)
        code, writer = _write_function(func, target, helpers, name, symbol, debug)
        bodies.append(code)
        functions.append(CFunction(name, symbol, writer.param_infos()))
    parts = [
        f"// Generated by metaschedule for target: {c_comment_text(target)}",
        HEADER,
        helpers.source(),
        DEBUG_C if debug is not None else "",
    ]
    code = "\n".join([p for p in parts if p] + bodies)
    return CSource(code, tuple(functions))


def _write_function(
    func: PrimFunc,
    target: Target,
    helpers: Helpers,
    name: str,
    symbol: str,
    debug: DebugSites | None,
) -> tuple[str, FunctionWriter]:
    """The C of ``func``: written once; if that decided to share broadcasts
    (:class:`.c_invariant.SharedPlan`), written again with the decisions, each use
    spelled as decided (the first text is dropped, with the helpers it added)."""
    mine = Helpers()
    mine.restore(helpers.snapshot())
    writer = FunctionWriter(func, target, mine, name)
    writer.debug = debug
    code = writer.emit(symbol)
    if not writer.shares_found:
        helpers.restore(mine.snapshot())
        return code, writer
    assert debug is None  # bounds-checked code keeps no tile in registers
    shared = SharedPlan(tuple(writer.shares_found))
    again = FunctionWriter(func, target, helpers, name, plan=writer.plan, shared=shared)
    return again.emit(symbol), again


# ----------------------------------------------------------------------------- functions


class FunctionWriter(CWriter):
    """Emits one function (text, names and expressions: :class:`.c_writer.CWriter`); the
    stages (:mod:`.c_vector`, :mod:`.c_accumulate_emit`, :mod:`.c_invariant`,
    :mod:`.c_parallel`) call back into it (:class:`.c_writer.CpuEmitter`)."""

    def __init__(
        self,
        func: PrimFunc,
        target: Target,
        helpers: Helpers,
        name: str,
        *,
        plan: FunctionPlan | None = None,
        shared: SharedPlan | None = None,
    ) -> None:
        super().__init__(name, helpers)
        self.func, self.target = func, target
        # the shared broadcasts of each scope, by the order scopes are opened (c_invariant):
        # as planned, or (None) as decided while writing, into shares_found
        self.planned_shares = None if shared is None else dict(shared.scopes)
        self.shares_found: list[tuple[int, tuple[tuple[int, str, int], ...]]] = []
        self.scopes_opened = 0
        self._isa = isa_of(target) if target.kind == "cpu" else None
        self._limits = TileLimits.of(self._isa) if self._isa is not None else None
        self.in_parallel = False
        self.hoisted: set[Buffer] = set()  # heap buffers allocated at function/thread entry
        self.auto_unroll: int | None = None
        self.explicit_unroll = False
        self.debug: DebugSites | None = None  # set: bounds-check every access
        self.workspace: list[tuple[str, int]] = []  # (slot array, slots) of hoisted buffers
        # a tile kept in variables (c_accumulate): its buffer and element -> variable
        self.accumulated: Buffer | None = None
        self.accumulators: dict[tuple, str] = {}
        # the loop summing scalar accumulators in SIMD lanes, and the accumulators
        self.simd_reduction: tuple[E.Var, tuple[str, ...]] | None = None
        self.lane_sums: dict[str, str] = {}  # scalar accumulator -> its vector of sums
        # vector loads shared by the straight-line updates of a tile (c_accumulate):
        # element key -> variable, and the (type, name) declarations to place before them
        self.shared_loads: dict[tuple, str] | None = None
        self.shared_decls: list[tuple[str, str]] = []
        self.shared_broadcasts = False  # ... and the broadcasts of loaded scalars too
        # an init nest folded into the accumulators of a planned loop (c_accumulate)
        self.pending_init: InitFusion | None = None
        self.init_uses: set[int] = set()  # the roots of pending_init emitted so far
        self.symbol = ""
        self.omp_region: Worksharing | None = None  # set: a loop of a shared region (c_parallel)
        self.plan = plan  # set by emit (plan_function) if not given
        # serial C loops being emitted, innermost last, and the loads hoisted out of them
        # (c_invariant); variables bound to constants by written-out code (unrolled
        # copies, vector chunks) and their values
        self.scopes: list[InvariantScope] = []
        self.known: dict[E.Var, E.PrimExpr] = {}

    @property
    def isa(self) -> CpuIsa:
        """The CPU's ISA record (:func:`.isa.isa_of`)."""
        if self._isa is None:
            raise CodegenError(f"{self.target.kind} code has no CPU ISA record")
        return self._isa

    @property
    def limits(self) -> TileLimits:
        """How large register tiles may grow on the ISA."""
        if self._limits is None:
            raise CodegenError(f"{self.target.kind} code has no register tiles")
        return self._limits

    def pin(self, name: str, dtype: str, lanes: int) -> str:
        """The statement that keeps the variable ``name`` (``lanes`` ``dtype`` values) in a
        register (:data:`.c_vector.IN_REG`), or an empty string when it does not fit one
        (a vector wider than the ISA's: no asm operand could hold it)."""
        if not self.isa.fits_register(dtype, lanes):
            return ""
        return f"{self.helpers.need('MS_IN_REG', IN_REG)}({name});"

    # output ---------------------------------------------------------------------------
    def param_infos(self) -> tuple[ParamInfo, ...]:
        return param_infos(self.func)

    def heap_allocations(self, s: Stmt, inside_parallel: bool) -> list[Buffer]:
        """Allocations in ``s`` too large for the stack (:data:`STACK_ALLOC_LIMIT`), see
        :func:`.c_ir.heap_allocations`."""
        return heap_allocations(s, inside_parallel, STACK_ALLOC_LIMIT)

    def emit(self, symbol: str) -> str:
        for b in self.func.params:
            try:
                b.static_shape()
            except ValueError:
                raise CodegenError(
                    f"dynamic shapes are not supported: parameter {b.name} of {self.name} has "
                    f"shape {tuple(str(s) for s in b.shape)}"
                ) from None
        self.symbol = symbol
        head = [f"int32_t {symbol}(void** args) {{"]
        for i, b in enumerate(self.func.params):
            name = self.buf_names[b] = self.names.fresh(b.name)
            t = c_type(b.dtype)
            head.append(f"  {t}* restrict {name} = ({t}*)args[{i}];")
        head.append("  int32_t ms_status = 0;")
        if self.debug is not None:
            head.append("  ms_oob_site = -1;")
        if self.plan is None:
            self.plan = plan_function(self.func, self.target, debug=self.debug is not None)
        plan = self.plan
        body, heap = plan.body, list(plan.heap)
        if heap:
            ok = open_heap(self, heap, per_thread=False)
            self.line(f"if ({ok}) {{")
            self.indent += 1
            emit_body(self, body, plan.parallel)  # parallel nests share regions (c_parallel)
            self.indent -= 1
            self.line("} else {")
            self.line("  ms_status = -1;")
            self.line("}")
            close_heap(self, heap)
        else:
            emit_body(self, body, plan.parallel)
        if self.debug is not None:
            self.line(f"if (ms_oob_site >= 0) ms_status = {OOB_STATUS};")
        lines = self.lines
        if self.workspace:  # take the workspace for this call, give it back at the end
            head.append(
                f"  const int ms_ws_mine = !__atomic_exchange_n(&{symbol}_ws_busy, 1, "
                "__ATOMIC_ACQUIRE);"
            )
            release = f"  if (ms_ws_mine) __atomic_store_n(&{symbol}_ws_busy, 0, __ATOMIC_RELEASE);"
            lines = [*lines, release]
        ws = workspace_globals(self.symbol, self.workspace)
        return "\n".join([*ws, *head, *lines, "  return ms_status;", "}", ""])

    # statements -----------------------------------------------------------------------
    def stmt(self, s: Stmt) -> None:
        if isinstance(s, SeqStmt):
            i, seq = 0, s.seq
            while i < len(seq):
                if i + 1 < len(seq) and self.fused_init(seq[i], seq[i + 1]):
                    i += 2  # an init nest and the reduction nest it starts (c_accumulate)
                    continue
                self.stmt(seq[i])
                i += 1
        elif isinstance(s, BufferStore):
            acc = self.accumulator(s.buffer, s.indices)
            if acc is not None:
                self.line(f"{acc} = {strip_parens(self.expr(s.value))};")
                return
            index = self.index(s.buffer, s.indices, "store")
            self.line(f"{self.buf_names[s.buffer]}[{index}] = {strip_parens(self.expr(s.value))};")
        elif isinstance(s, For):
            self.loop(s)
        elif isinstance(s, IfThenElse):
            self.if_then_else(s)
        elif isinstance(s, Allocate):
            self.allocate(s)
        elif isinstance(s, Evaluate):
            if not isinstance(s.value, (E.IntImm, E.FloatImm)):
                self.line(f"(void)({self.expr(s.value)});")
        elif isinstance(s, (Block, BlockRealize)):
            raise CodegenError(
                f"function {self.name} still contains blocks; lower it first "
                "(metaschedule.tir.transform.lower)"
            )
        else:
            raise CodegenError(f"cannot generate C for statement {type(s).__name__}")

    def fused_init(self, init: Stmt, red: Stmt) -> bool:
        """Emit a reduction nest with the init nest before it folded into its register
        accumulators (:func:`.c_accumulate.emit_fused_init`); False if that does not apply."""
        if self.target.kind != "cpu" or self.debug is not None or self.accumulated is not None:
            return False
        if self.pending_init is not None:
            return False
        fusion = self.plan.init_at(init, red) if self.plan is not None else False
        if fusion is False:  # a pair made while writing: planned now
            fusion = plan_init_fusion(self, init, red)
        return fusion is not None and emit_fused_init(self, fusion, red)

    def tile_at(self, loop: For) -> AccumulatorPlan | None:
        """The register tile planned at ``loop`` (:meth:`.plan.FunctionPlan.tile_at`)."""
        tile = self.plan.tile_at(loop) if self.plan is not None else False
        return plan_accumulators(self, loop) if tile is False else tile

    def row_at(self, loop: For) -> For | None:
        """``loop`` vectorized over its outputs, if planned so (:meth:`.FunctionPlan.row_at`)."""
        row = self.plan.row_at(loop) if self.plan is not None else False
        return vectorize_outputs(self, loop) if row is False else row

    def unfused(self, loop: For) -> For | None:
        """The fused vectorized ``loop`` split in two, if it is one (:func:`.c_ir.unfuse`)."""
        split = self.plan.unfused_at(loop) if self.plan is not None else False
        return unfuse(loop, c_ir.UNFUSE_UNROLL) if split is False else split

    def allocate(self, s: Allocate) -> None:
        b = s.buffer
        if b in self.hoisted:  # allocated at function or thread entry
            self.stmt(s.body)
            return
        name = self.buf_names.get(b) or self.names.fresh(b.name)
        self.buf_names[b] = name
        numel = numel_checked(b)
        if alloc_bytes(b) > STACK_ALLOC_LIMIT:  # only when allocate() is used directly
            raise CodegenError(f"heap allocation of {b.name} was not hoisted")
        self.line("{")
        self.line(f"  {c_type(b.dtype)} {name}[{max(1, numel)}] __attribute__((aligned(64)));")
        self.block(s.body)
        self.line("}")

    # loops ----------------------------------------------------------------------------
    def loop(self, loop: For) -> None:
        saved = (self.auto_unroll, self.explicit_unroll)
        ann = loop.annotations
        if "pragma_auto_unroll_max_step" in ann:
            self.auto_unroll = int(ann["pragma_auto_unroll_max_step"])
        if "pragma_unroll_explicit" in ann:
            self.explicit_unroll = bool(int(ann["pragma_unroll_explicit"]))
        try:
            # reduction tiles in variables (c_accumulate): CPU code, not bounds-checked
            cpu = self.target.kind == "cpu" and self.debug is None
            if cpu and self.accumulated is None:
                plan = self.tile_at(loop)
                init = self.pending_init
                if init is not None and any(r is loop for r in init.roots):
                    # checked before the nest was started (c_accumulate_emit.init_fails)
                    if plan is None or not emit_accumulated(self, plan, init.value, checked=True):
                        raise AssertionError(f"no fused init at {loop.loop_var.name}")
                    self.init_uses.add(id(loop))
                    return
                if plan is not None and emit_accumulated(self, plan):
                    return
                outputs = self.row_at(loop)  # a serial loop over a reduction
                if outputs is not None:
                    self.stmt(outputs)
                    return
            self._loop(loop)
        finally:
            self.auto_unroll, self.explicit_unroll = saved

    def _loop(self, loop: For) -> None:
        if loop.kind is ForKind.THREAD_BINDING:
            raise CodegenError(
                f"loop {loop.loop_var.name} is bound to {loop.thread_binding} in {self.name}, "
                "but bind is for GPU targets; the cpu target cannot run thread-bound loops"
            )
        var = loop.loop_var
        # replicated (explicitly unrolled) bodies reuse the names of their first copy
        name = self.var_names.get(var) or self.names.fresh(var.name)
        self.var_names[var] = name
        self.ranges[var] = (loop.min, loop.extent)
        try:
            if loop.kind is ForKind.VECTORIZED and self.debug is None:
                emit_vectorized(self, loop, name)
                return
            mode = self._unroll_mode(loop)
            if mode == "explicit":
                for k in range(c_ir.int_value(loop.extent)):
                    value = affine_add(loop.min, E.const(k, var.dtype))
                    self.line(f"{{ const {c_type(var.dtype)} {name} = {self.expr(value)};")
                    self.known[var] = value
                    try:
                        self.block(loop.body)
                    finally:
                        del self.known[var]
                    self.line("}")
                return
            parallel = loop.kind is ForKind.PARALLEL and not self.in_parallel
            if parallel and self.omp_region is not None:  # in a shared region (c_parallel)
                self.omp_region.emit_loop(self, loop, name)
                return
            at = len(self.lines)  # where loads hoisted out of the loop go (c_invariant)
            if parallel:
                heap = self.heap_allocations(loop.body, inside_parallel=True)
                if heap:
                    self.parallel_with_heap(loop, name, heap)
                    return
                self.line(f"#pragma omp parallel for num_threads({team(self)}) schedule(runtime)")
            elif self.simd_reduction is not None and self.simd_reduction[0] is var:
                accs, self.simd_reduction = self.simd_reduction[1], None
                if emit_lane_sums(self, loop, name, accs):  # see c_accumulate
                    return
                if mode == "pragma":
                    self.line(f"#pragma GCC unroll {min(c_ir.int_value(loop.extent), 65534)}")
            elif mode == "pragma":
                self.line(f"#pragma GCC unroll {min(c_ir.int_value(loop.extent), 65534)}")
            elif loop.kind is ForKind.PARALLEL:
                self.line("// parallel loop nested in a parallel region: runs serially")
            scope = None
            unit = isinstance(loop.extent, E.IntImm) and loop.extent.value == 1
            if unit:  # its variable is a constant (c_invariant)
                self.known[var] = loop.min
            elif not parallel:
                outer = frozenset(v for v in self.ranges if v is not var)
                index, self.scopes_opened = self.scopes_opened, self.scopes_opened + 1
                scope = InvariantScope(loop, outer, self.lines, at, self.indent)
                scope.index = index
                if self.planned_shares is not None:
                    planned = self.planned_shares.get(index, ())
                    scope.shares = {t: (n, w) for t, n, w in planned}
                self.scopes.append(scope)
            self.for_header(loop, name)
            if scope is not None:
                scope.body_at = len(self.lines)
            saved, self.in_parallel = self.in_parallel, self.in_parallel or parallel
            try:
                self.block(loop.body)
            finally:
                self.in_parallel = saved
                if scope is not None:
                    self.scopes.pop()
                if unit:
                    del self.known[var]
            self.line("}")
            if scope is not None:
                scope.close(self)
                if scope.decided and self.planned_shares is None:
                    found = tuple((t, n, w) for t, (n, w) in scope.decided.items())
                    self.shares_found.append((scope.index, found))
        finally:
            del self.ranges[var]

    def parallel_with_heap(self, loop: For, name: str, heap: list[Buffer]) -> None:
        """An ``omp parallel`` region whose threads each allocate ``heap`` once, around
        the ``omp for`` of ``loop``."""
        self.line(f"#pragma omp parallel num_threads({team(self)})")
        self.line("{")
        self.indent += 1
        ok = open_heap(self, heap)
        ok_name = self.names.fresh("heap_ok")
        self.line(f"const int {ok_name} = {ok};")
        self.line(f"if (!{ok_name}) __atomic_store_n(&ms_status, -1, __ATOMIC_RELAXED);")
        self.line("#pragma omp for schedule(static)")
        self.for_header(loop, name)
        self.in_parallel = True
        self.line(f"  if (!{ok_name}) continue;")
        self.block(loop.body)
        self.in_parallel = False
        self.line("}")
        close_heap(self, heap)
        self.indent -= 1
        self.line("}")

    def invariant_load(self, load: E.BufferLoad, lanes: int, broadcast: bool = False) -> str | None:
        """``load`` (``lanes`` of it, or broadcast to ``lanes``) read from a register that
        the innermost serial loop being emitted loads once, before it or per iteration
        (:mod:`.c_invariant`); only in the code of a register tile. None: a load."""
        if self.accumulated is None or not self.scopes or load.buffer is self.accumulated:
            return None
        return self.scopes[-1].value(self, load, lanes, broadcast)

    def accumulator(self, buf: Buffer, indices: tuple[E.PrimExpr, ...]) -> str | None:
        """The variable holding ``buf[indices]`` (see :mod:`.c_accumulate`), or None.

        Raises NotVectorizable for another element of the accumulated buffer (its tile
        would be out of date in memory): what the checks before writing a tile
        (:func:`.c_accumulate_emit.tile_fails`) and vector code find out.
        """
        if buf is not self.accumulated:
            return None
        acc = self.accumulators.get(access_key(buf, indices))
        if acc is None:
            raise NotVectorizable(f"an access to {buf.name} outside its accumulators")
        return acc

    def index(self, buf: Buffer, indices: tuple[E.PrimExpr, ...], kind: str = "load") -> str:
        """The flat index; in debug mode wrapped in a run-time bounds check."""
        flat = super().index(buf, indices)
        if self.debug is None:
            return flat
        numel = numel_checked(buf)
        access = f"{buf.name}[{', '.join(str(i) for i in indices)}]"
        site = self.debug.add(kind, buf.name, numel, access, self.name)
        return f"ms_checked({flat}, {numel}, {site})"

    def _unroll_mode(self, loop: For) -> str | None:
        const_extent = isinstance(loop.extent, E.IntImm)
        wanted = loop.kind is ForKind.UNROLLED and const_extent
        if (
            not wanted
            and loop.kind is ForKind.SERIAL
            and self.auto_unroll
            and const_extent
            and steps(loop) <= min(self.auto_unroll, AUTO_UNROLL_STEPS)
            and steps(loop, self.isa.vector_bytes) <= AUTO_UNROLL_PIECES
        ):
            wanted = True
        if not wanted:
            return None
        n = steps(loop)
        if self.explicit_unroll and n <= EXPLICIT_UNROLL_STEPS:
            return "explicit"
        if (
            self.explicit_unroll
            and n <= EXPLICIT_TILE_STEPS
            and self.accumulated is not None
            and self.scopes
            and self.scopes[-1].hoists_from(self, loop)
        ):
            return "explicit"
        return "pragma"


__all__ = [
    "CFunction",
    "CSource",
    "CodegenError",
    "FunctionWriter",
    "ParamInfo",
    "codegen_c",
    "linear_index",
    "steps",
]
