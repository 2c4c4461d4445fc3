"""C source for lowered PrimFuncs (the CPU back end).

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

Heap buffers come from a workspace kept between calls (one slot per buffer and
thread, allocated on first use, freed when the library is unloaded), as TVM's
workspace pool does: a fresh ``malloc`` of a large buffer on every call maps new pages
and faults them in, which costs more than a small kernel itself (a padded input of
1 MB for a depthwise convolution of 100 us). A call that finds the workspace in use
(the same kernel called from two host threads at once) allocates its own.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

from ..target import Target
from ..tir import expr as E
from ..tir.buffer import Buffer
from ..tir.dtype import c_type, nbytes
from ..tir.function import IRModule, PrimFunc
from ..tir.functor import Visitor
from ..tir.names import unique_name
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
from ..tir.transform.affine import affine
from .c_accumulate import (
    InitFusion,
    InitNotTaken,
    TileLimits,
    access_key,
    emit_accumulated,
    emit_fused_init,
    plan_accumulators,
)
from .c_autovector import vectorize_scalar_nests, widen_vector_loops
from .c_expr import CodegenError, ExprWriter, linear_index, strip_parens
from .c_helpers import HEADER, Helpers, c_comment_text
from .c_invariant import InvariantScope
from .c_parallel import Worksharing, emit_body
from .c_vector import IN_REG, emit_lane_sums, emit_vectorized, vectorize_outputs
from .c_versioning import version_guards
from .debug import DEBUG_C, OOB_STATUS, DebugSites
from .isa import CpuIsa, isa_of

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
#: Guarded loop bodies (inlined padding) get an unguarded copy for the iterations where
#: every guard holds (:mod:`.c_versioning`).
VERSION_GUARDS = True
#: Scalar loop nests get a vector loop where one can move innermost (:mod:`.c_autovector`).
AUTO_VECTORIZE = True

_C_RESERVED = {
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "bool",
    "true",
    "false",
    "main",
    "args",
    "errno",
    "abs",
    "exp",
    "log",
    "sqrt",
    "tanh",
    "erf",
    "floor",
    "ceil",
    "round",
    "sin",
    "cos",
    "pow",
    "free",
    "malloc",
    "memcpy",
    "memset",
    "NAN",
    "INFINITY",
    "fabs",
    "trunc",
    "exp2",
    "log2",
    "nearbyint",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "uint8_t",
    "size_t",
    "l",
}
#: more libm names a kernel (named after its graph operator: ``expm1``, ``log1p``) must
#: not take
_C_RESERVED |= {
    "expm1", "log1p", "log10", "sinh", "cosh", "tan", "asin", "acos", "atan", "atan2",
    "asinh", "acosh", "atanh", "cbrt", "hypot", "fmin", "fmax", "fmod", "rint", "lround",
    "copysign", "nan", "isnan", "isinf", "signbit", "ldexp", "frexp", "modf", "remainder",
    "lgamma", "tgamma", "erfc", "exit", "abort", "printf",
}  # fmt: skip


@dataclass(frozen=True)
class ParamInfo:
    """A parameter of a generated function, as the runtime checks it."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    written: bool


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


class NameTable:
    """Unique C identifiers derived from IR name hints."""

    def __init__(self, taken: set[str] | None = None) -> None:
        self.used: set[str] = set(_C_RESERVED) | (taken or set())

    def fresh(self, hint: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_]", "_", hint) or "v"
        if base[0].isdigit():
            base = "v_" + base
        if base.startswith(("ms_", "__")) or keyword.iskeyword(base):
            base = "u_" + base
        name = unique_name(base, self.used)
        self.used.add(name)
        return name


# ----------------------------------------------------------------------------- module


def codegen_c(
    mod: IRModule | PrimFunc, target: Target | str = "cpu", debug: DebugSites | None = None
) -> CSource:
    """C source for every (lowered) function of ``mod``.

    With ``debug`` (see :mod:`.debug`), every access is bounds-checked at run time and
    its site recorded in ``debug``.
    """
    target = Target(target)
    if target.kind != "cpu":
        raise CodegenError(f"the C code generator is for cpu targets, got {target.kind}")
    if isinstance(mod, PrimFunc):
        mod = IRModule({"main": mod})
    helpers = Helpers()
    symbols = NameTable()
    bodies, functions = [], []
    for name, func in mod.items():
        symbol = symbols.fresh(name + "_kernel" if name in _C_RESERVED else name)
        writer = FunctionWriter(func, target, helpers, name)
        writer.debug = debug
        bodies.append(writer.emit(symbol))
        functions.append(CFunction(name, symbol, writer.param_infos()))
    parts = [
        f"// Generated by metaschedule for target: {c_comment_text(target)}",
        HEADER,
        helpers.source(),
        DEBUG_C if debug is not None else "",
    ]
    code = "\n".join([p for p in parts if p] + bodies)
    return CSource(code, tuple(functions))


def _written_buffers(stmt: Stmt) -> set[Buffer]:
    out: set[Buffer] = set()

    class _V(Visitor):
        def visit_BufferStore(self, s: BufferStore) -> None:
            out.add(s.buffer)
            self.generic_visit(s)

    _V().visit(stmt)
    return out


# ----------------------------------------------------------------------------- functions


class FunctionWriter(ExprWriter):
    """Emits one function (expressions: :class:`.c_expr.ExprWriter`); :mod:`.c_vector` calls
    back into it for scalar parts."""

    def __init__(self, func: PrimFunc, target: Target, helpers: Helpers, name: str) -> None:
        self.func, self.target, self.helpers, self.name = func, target, helpers, name
        self._isa = isa_of(target) if target.kind == "cpu" else None
        self._limits = TileLimits.of(self._isa) if self._isa is not None else None
        self.names = NameTable()
        self.var_names: dict[E.Var, str] = {}
        self.buf_names: dict[Buffer, str] = {}
        self.ranges: dict[E.Var, tuple[E.PrimExpr, E.PrimExpr]] = {}
        self.lines: list[str] = []
        self.indent = 1
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
        self.version = VERSION_GUARDS  # an unguarded copy of guarded loop bodies (c_versioning)
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
    def line(self, text: str) -> None:
        self.lines.append("  " * self.indent + text)

    def param_infos(self) -> tuple[ParamInfo, ...]:
        written = _written_buffers(self.func.body)
        return tuple(
            ParamInfo(b.name, b.dtype, b.static_shape(), b in written) for b in self.func.params
        )

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
        body = self.func.body
        if AUTO_VECTORIZE and self.debug is None:  # debug code checks accesses one by one
            body = widen_vector_loops(vectorize_scalar_nests(body), self.isa.vector_bytes)
        body = version_guards(body) if self.version else body
        heap = _heap_allocations(body, inside_parallel=False)
        if heap:
            ok = self.open_heap(heap, per_thread=False)
            self.line(f"if ({ok}) {{")
            self.indent += 1
            emit_body(self, body)  # parallel nests share regions (c_parallel)
            self.indent -= 1
            self.line("} else {")
            self.line("  ms_status = -1;")
            self.line("}")
            self.close_heap(heap)
        else:
            emit_body(self, body)
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
        return "\n".join(
            [*self._workspace_globals(), *head, *lines, "  return ms_status;", "}", ""]
        )

    def _workspace_globals(self) -> list[str]:
        """The slot arrays of the workspace, its busy flag and the destructor that frees
        it when the library is unloaded."""
        if not self.workspace:
            return []
        sym = self.symbol
        out = [f"static int {sym}_ws_busy = 0;"]
        out += [f"static void* {arr}[{n}];" for arr, n in self.workspace]
        out.append(f"__attribute__((destructor)) static void {sym}_ws_free(void) {{")
        for arr, n in self.workspace:
            out.append(f"  for (int i = 0; i < {n}; ++i) free({arr}[i]);")
        out.append("}")
        return out

    def open_heap(self, bufs: list[Buffer], per_thread: bool = True) -> str:
        """Declare hoisted heap buffers, from the workspace when this call holds it (see
        the module docstring); returns the C test that all succeeded."""
        names = []
        slots = self.target.num_cores if per_thread else 1
        tid = "omp_get_thread_num()" if per_thread else "0"
        if per_thread:
            self.helpers.need("omp_get_thread_num", "int omp_get_thread_num(void);")
        self.helpers.need("ms_ws_get", _WS_GET)
        for b in bufs:
            name = self.buf_names[b] = self.names.fresh(b.name)
            t, size = c_type(b.dtype), -(-_alloc_bytes(b) // 64) * 64
            arr = f"{self.symbol}_ws{len(self.workspace)}"
            self.workspace.append((arr, slots))
            self.line(
                f"{t}* restrict {name} = ({t}*)ms_ws_get(ms_ws_mine, {arr}, {slots}, "
                f"{tid}, {size});"
            )
            self.hoisted.add(b)
            names.append(name)
        return " && ".join(f"{n} != NULL" for n in names)

    def close_heap(self, bufs: list[Buffer]) -> None:
        for b in bufs:
            self.line(f"if (!ms_ws_mine) free({self.buf_names[b]});")
            self.hoisted.discard(b)

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
            self.line(f"if ({strip_parens(self.expr(s.condition))}) {{")
            self.block(s.then_case)
            if s.else_case is not None:
                self.line("} else {")
                self.block(s.else_case)
            self.line("}")
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
        return emit_fused_init(self, init, red)

    def block(self, s: Stmt) -> None:
        self.indent += 1
        self.stmt(s)
        self.indent -= 1

    def allocate(self, s: Allocate) -> None:
        b = s.buffer
        if b in self.hoisted:  # allocated at function or thread entry
            self.stmt(s.body)
            return
        name = self.buf_names.get(b) or self.names.fresh(b.name)
        self.buf_names[b] = name
        numel = _numel_checked(b)
        if _alloc_bytes(b) > STACK_ALLOC_LIMIT:  # only when allocate() is used directly
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
                plan = plan_accumulators(self, loop)
                init = self.pending_init
                if init is not None and any(r is loop for r in init.roots):
                    if plan is None or not emit_accumulated(self, plan, init.value):
                        raise InitNotTaken(loop.loop_var.name)
                    self.init_uses.add(id(loop))
                    return
                if plan is not None and emit_accumulated(self, plan):
                    return
                outputs = vectorize_outputs(self, loop)  # a serial loop over a reduction
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
                for k in range(loop.extent.value):
                    value = _add(loop.min, E.const(k, var.dtype))
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
                heap = _heap_allocations(loop.body, inside_parallel=True)
                if heap:
                    self.parallel_with_heap(loop, name, heap)
                    return
                self.line(
                    f"#pragma omp parallel for num_threads({self.target.num_cores}) "
                    "schedule(static)"
                )
            elif self.simd_reduction is not None and self.simd_reduction[0] is var:
                accs, self.simd_reduction = self.simd_reduction[1], None
                if emit_lane_sums(self, loop, name, accs):  # see c_accumulate
                    return
                if mode == "pragma":
                    self.line(f"#pragma GCC unroll {min(loop.extent.value, 65534)}")
            elif mode == "pragma":
                self.line(f"#pragma GCC unroll {min(loop.extent.value, 65534)}")
            elif loop.kind is ForKind.PARALLEL:
                self.line("// parallel loop nested in a parallel region: runs serially")
            scope = None
            unit = isinstance(loop.extent, E.IntImm) and loop.extent.value == 1
            if unit:  # its variable is a constant (c_invariant)
                self.known[var] = loop.min
            elif not parallel:
                outer = frozenset(v for v in self.ranges if v is not var)
                scope = InvariantScope(loop, outer, self.lines, at, self.indent)
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
        finally:
            del self.ranges[var]

    def parallel_with_heap(self, loop: For, name: str, heap: list[Buffer]) -> None:
        """An ``omp parallel`` region whose threads each allocate ``heap`` once, around
        the ``omp for`` of ``loop``."""
        self.line(f"#pragma omp parallel num_threads({self.target.num_cores})")
        self.line("{")
        self.indent += 1
        ok = self.open_heap(heap)
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
        self.close_heap(heap)
        self.indent -= 1
        self.line("}")

    def for_header(self, loop: For, name: str, step: int = 1, stop: E.PrimExpr | None = None):
        t = c_type(loop.loop_var.dtype)
        lo = self.expr(loop.min)
        stop = stop if stop is not None else _add(loop.min, loop.extent)
        inc = f"++{name}" if step == 1 else f"{name} += {step}"
        end = strip_parens(self.expr(stop))
        self.line(f"for ({t} {name} = {strip_parens(lo)}; {name} < {end}; {inc}) {{")

    def invariant_load(self, load: E.BufferLoad, lanes: int, broadcast: bool = False) -> str | None:
        """``load`` (``lanes`` of it, or broadcast to ``lanes``) read from a register that
        the innermost serial loop being emitted loads once, before it or per iteration
        (:mod:`.c_invariant`); only in the code of a register tile. None: a load."""
        if self.accumulated is None or not self.scopes or load.buffer is self.accumulated:
            return None
        return self.scopes[-1].value(self, load, lanes, broadcast)

    def accumulator(self, buf: Buffer, indices: tuple[E.PrimExpr, ...]) -> str | None:
        """The variable holding ``buf[indices]`` (see :mod:`.c_accumulate`), or None.

        Raises NotVectorizable for another element of the accumulated buffer: the plan
        is abandoned (its tile would be out of date in memory).
        """
        if buf is not self.accumulated:
            return None
        acc = self.accumulators.get(access_key(buf, indices))
        if acc is None:
            from .c_vector import NotVectorizable

            raise NotVectorizable(f"an access to {buf.name} outside its accumulators")
        return acc

    def index(self, buf: Buffer, indices: tuple[E.PrimExpr, ...], kind: str = "load") -> str:
        """The flat index; in debug mode wrapped in a run-time bounds check."""
        flat = super().index(buf, indices)
        if self.debug is None:
            return flat
        numel = _numel_checked(buf)
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


#: A workspace slot (allocated on first use) when the call holds the workspace and the
#: thread has a slot; a fresh allocation, freed by the caller, otherwise.
_WS_GET = """\
static inline void* ms_ws_get(int mine, void** slots, int n, int tid, size_t size) {
  if (!mine || tid < 0 || tid >= n) return aligned_alloc(64, size);
  if (slots[tid] == NULL) slots[tid] = aligned_alloc(64, size);
  return slots[tid];
}"""


# ----------------------------------------------------------------------------- helpers


def _add(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    form = affine(a) + affine(b)
    return form.to_expr(a.dtype)


def _numel_checked(b: Buffer) -> int:
    try:
        return b.numel()
    except ValueError:
        raise CodegenError(
            f"dynamic shapes are not supported: allocation of {b.name} "
            f"has shape {tuple(str(x) for x in b.shape)}"
        ) from None


def _alloc_bytes(b: Buffer) -> int:
    return max(1, _numel_checked(b)) * nbytes(b.dtype)


def _heap_allocations(s: Stmt, inside_parallel: bool) -> list[Buffer]:
    """Heap-sized allocations in ``s``, in order: those outside every parallel loop
    (``inside_parallel=False``), or all of them (``s`` is a parallel loop's body)."""
    out: list[Buffer] = []

    class _V(Visitor):
        def visit_For(self, loop: For) -> None:
            if loop.kind is ForKind.PARALLEL and not inside_parallel:
                return  # allocated per thread by that loop
            self.generic_visit(loop)

        def visit_Allocate(self, a: Allocate) -> None:
            if _alloc_bytes(a.buffer) > STACK_ALLOC_LIMIT and a.buffer not in out:
                out.append(a.buffer)
            self.generic_visit(a)

    _V().visit(s)
    return out


def steps(s: Stmt) -> int:
    """How many innermost statements one execution of ``s`` runs (for auto-unroll)."""
    if isinstance(s, SeqStmt):
        return sum(steps(x) for x in s.seq)
    if isinstance(s, For):
        inner = steps(s.body)
        if s.kind is ForKind.VECTORIZED and _stores_contiguous(s):
            return inner
        if s.kind is ForKind.VECTORIZED and isinstance(s.extent, E.IntImm):
            # a scattered store (a transposing copy): c_vector writes a scalar loop
            return s.extent.value * inner
        if not isinstance(s.extent, E.IntImm):
            return 1 << 62
        return s.extent.value * inner
    if isinstance(s, IfThenElse):  # one branch runs (a versioned body: either copy)
        return max(steps(s.then_case), steps(s.else_case) if s.else_case is not None else 0)
    if isinstance(s, Allocate):
        return steps(s.body)
    return 1


def _stores_contiguous(loop: For) -> bool:
    """Whether every store in ``loop`` is unit-stride in its variable (vector code can
    write it; else the vector loop is emitted as a scalar loop)."""
    ok = True

    class _V(Visitor):
        def visit_BufferStore(self, st: BufferStore) -> None:
            nonlocal ok
            form = affine(linear_index(st.buffer, st.indices))
            var = loop.loop_var
            ok = ok and form.coef(var) in (0, 1) and not form.without(var).uses(var)
            self.generic_visit(st)

    _V().visit(loop.body)
    return ok


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
