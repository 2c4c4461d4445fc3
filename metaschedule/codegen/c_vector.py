"""Vectorized loops as GCC vector-extension code (the compiler cannot decline it).

The body of ``for v in vectorized(lo, lo + n)`` is emitted once per chunk of lanes,
with vector values: a load or store whose row-major offset is ``base + 1 * v`` is an
unaligned vector load/store, a value that does not depend on ``v`` is broadcast,
arithmetic, comparisons, select, min/max and casts work lane-wise; float32 ``exp``,
``tanh`` and ``sigmoid`` are vector code (:mod:`.c_vmath`), other math intrinsics run
lane by lane. ``n`` is split into chunks of the target's native width (written
out one by one up to :data:`EXPLICIT_CHUNKS` chunks, a chunked loop beyond) and a
power-of-two tail (a single lane is scalar code).

A load at a constant stride other than 1 (a transposed operand such as ``K[b, j, k]``
vectorized over ``j``) is gathered lane by lane into a vector, so the rest of the body
stays vector code. A loop made by fusing two loops (``v // c`` and ``v % c`` in the
body, as RewriteParallelVectorizeUnroll's fuse-then-vectorize produces) is emitted as
a serial loop over ``v // c`` around a vectorized loop over ``v % c``, where the
accesses are unit-stride again.

A body that cannot be written this way (a scattered store, an ``if`` whose condition
depends on ``v``, an inner loop, a store that every lane would write) falls back to a
scalar loop, marked ``#pragma GCC ivdep`` when its iterations are independent. The
generated source says why in a comment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..tir import expr as E
from ..tir.buffer import Buffer
from ..tir.dtype import c_type, is_bool, is_float, is_int, nbytes
from ..tir.functor import Visitor, collect_vars, substitute
from ..tir.stmt import BufferStore, Evaluate, For, ForKind, IfThenElse, SeqStmt, Stmt
from ..tir.transform.affine import Affine, affine, const_bounds
from .c_accumulate import _chunks, _has_load, access_key, value_key
from .c_expr import linear_index, strip_parens
from .c_helpers import c_comment_text

if TYPE_CHECKING:
    from .c_codegen import FunctionWriter

#: Up to this many full-width chunks are emitted one after the other instead of as a loop.
EXPLICIT_CHUNKS = 4
#: A fused loop split back in two unrolls its outer part up to this many iterations.
UNFUSE_UNROLL = 16
#: Whether a serial loop over a reduction is vectorized over its outputs
#: (:func:`vectorize_outputs`). The analytic prior (``cost_model/prior.py``,
#: ``_vectorized_row``) reorders such a nest the same way: its register tiles must be the
#: ones emitted (``tests/cost_model/test_prior.py``).
VECTORIZE_OUTPUTS = True
#: Fewest iterations of a serial loop over a reduction that :func:`vectorize_outputs`
#: makes vector code of.
MIN_OUTPUT_LANES = 4


#: An empty asm statement that takes a vector variable in a register and may change it:
#: the compiler must keep the loaded value in a register (or spill it) instead of
#: re-reading memory at each use.
IN_REG = """\
#if defined(__x86_64__) || defined(__i386__)
#define MS_IN_REG(x) __asm__("" : "+v"(x))
#elif defined(__aarch64__)
#define MS_IN_REG(x) __asm__("" : "+w"(x))
#else
#define MS_IN_REG(x) ((void)0)
#endif"""


class NotVectorizable(Exception):
    """The loop body cannot be written with vector values; the message says why."""


def emit_vectorized(fw: FunctionWriter, loop: For, name: str) -> None:
    """Emit ``loop`` (kind VECTORIZED) as vector code, or as a scalar fallback loop."""
    independent = False
    split = _unfuse(loop)
    if split is not None:
        # v = u * c + w: a serial loop over u around a vectorized loop over w
        fw.line(
            f"// {name}: a fused loop, vectorized over its inner {split.body.extent} iterations"
        )
        fw.stmt(split)
        return
    try:
        if not isinstance(loop.extent, E.IntImm):
            raise NotVectorizable("the extent is not a constant")
        independent = _check_dependences(loop)
        lanes = _native_lanes(fw, loop)
        snap, saved_lines = fw.helpers.snapshot(), fw.lines
        fw.lines = []
        try:
            _emit_chunks(fw, loop, name, lanes)
            emitted = fw.lines
        except NotVectorizable:
            fw.helpers.restore(snap)
            raise
        finally:
            fw.lines = saved_lines
        fw.lines.extend(emitted)
        return
    except NotVectorizable as why:
        if fw.accumulated is not None:
            raise  # a tile in vector variables (c_accumulate) needs vector code
        fw.line(f"// {name}: not vectorized ({c_comment_text(why)})")
    if independent:
        fw.line("#pragma GCC ivdep")
    fw.for_header(loop, name)
    fw.block(loop.body)
    fw.line("}")


def emit_lane_sums(fw: FunctionWriter, loop: For, name: str, accs: tuple[str, ...]) -> bool:
    """Emit the serial loop ``loop``, whose body adds terms to the scalar accumulators
    ``accs`` (see :mod:`.c_accumulate`), as vector code: each accumulator gets a vector of
    partial sums, added up pairwise after the loop (the sum is reordered: this loop's
    alone). False (nothing emitted) if the body is not vector code."""
    extent = loop.extent.value if isinstance(loop.extent, E.IntImm) else 0
    try:
        lanes = _native_lanes(fw, loop)
    except NotVectorizable:
        return False
    while lanes > extent and lanes > 2:
        lanes //= 2
    full = extent // lanes
    if full == 0:
        return False
    dtype = fw.accumulated.dtype if fw.accumulated is not None else "float32"
    snap, saved_lines, saved_indent = fw.helpers.snapshot(), fw.lines, fw.indent
    fw.lines = []
    vt, zero = fw.helpers.vtype(dtype, lanes), fw.helpers.vbroadcast(dtype, lanes)
    hsum = fw.helpers.vhsum(dtype, lanes)
    vaccs = {a: fw.names.fresh(f"{a}_lanes") for a in accs}
    fw.lane_sums = vaccs
    try:
        fw.line("{ // summed in vector lanes, added up after the loop")
        fw.indent += 1
        for v in vaccs.values():
            fw.line(f"{vt} {v} = {zero}(0);")
        body = _VectorBody(fw, loop)
        t = c_type(loop.loop_var.dtype)
        if full == 1:
            _chunk(fw, loop, name, t, 0, lambda: body.emit(lanes))
        else:
            _strided_loop(fw, loop, name, full, lanes, body)
        fw.lane_sums = {}
        for a, v in vaccs.items():
            fw.line(f"{a} = {a} + {hsum}({v});")
        if extent % lanes:  # the remaining iterations, in order
            start = affine(loop.min).offset(full * lanes).to_expr(loop.loop_var.dtype)
            fw.line(
                f"for ({t} {name} = {strip_parens(fw.expr(start))}; "
                f"{name} < {strip_parens(fw.expr(_end(loop)))}; ++{name}) {{"
            )
            fw.block(loop.body)
            fw.line("}")
        fw.indent -= 1
        fw.line("}")
        emitted = fw.lines
    except NotVectorizable:
        fw.helpers.restore(snap)
        fw.indent = saved_indent
        return False
    finally:
        fw.lines = saved_lines
        fw.lane_sums = {}
    fw.lines.extend(emitted)
    return True


def _end(loop: For) -> E.PrimExpr:
    return affine(loop.min).offset(loop.extent.value).to_expr(loop.loop_var.dtype)


# ----------------------------------------------------------------------------- analysis


def _fused_divisor(loop: For) -> int | None:
    """The ``c`` of ``v // c`` / ``v % c`` in the body (the inner extent of two fused
    loops), when ``c`` divides the extent and the loop starts at 0; else None."""
    v = loop.loop_var
    if not (
        isinstance(loop.extent, E.IntImm) and isinstance(loop.min, E.IntImm) and loop.min.value == 0
    ):
        return None
    found: set[int] = set()

    class _V(Visitor):
        def visit_FloorDiv(self, e: E.FloorDiv) -> None:
            self._hit(e)

        def visit_FloorMod(self, e: E.FloorMod) -> None:
            self._hit(e)

        def _hit(self, e) -> None:
            if isinstance(e.b, E.IntImm) and e.b.value > 1 and v in collect_vars(e.a):
                found.add(e.b.value)
            self.generic_visit(e)

    _V().visit(loop.body)
    extent = loop.extent.value
    ok = [c for c in found if extent % c == 0 and c < extent]
    return max(ok) if ok else None


def _unfuse(loop: For) -> For | None:
    """``loop`` as ``for u: for w (vectorized): body[v := u * c + w]`` with its indices
    simplified, when the body divides ``v`` by a constant ``c`` (see
    :func:`_fused_divisor`); None when it does not."""
    from ..tir.stmt import Range
    from ..tir.transform.simplify import _Simplify

    c = _fused_divisor(loop)
    if c is None:
        return None
    v = loop.loop_var
    dt = v.dtype
    u, w = E.Var(v.name + "_o", dt), E.Var(v.name + "_i", dt)
    body = substitute(loop.body, {v: u * E.const(c, dt) + w})
    inner = For(w, E.const(0, dt), E.const(c, dt), ForKind.VECTORIZED, body)
    n_outer = loop.extent.value // c
    outer_kind = ForKind.UNROLLED if n_outer <= UNFUSE_UNROLL else ForKind.SERIAL
    simp = _Simplify()
    simp.analyzer.bind(u, Range(E.const(0, dt), E.const(n_outer, dt)))
    inner = simp.visit(inner)
    return For(u, E.const(0, dt), E.const(n_outer, dt), outer_kind, inner)


def vectorize_outputs(fw: FunctionWriter, loop: For) -> For | None:
    """``loop`` vectorized over the outputs it walks, where the schedule left it serial
    around a reduction: ``for j: for k: C[.., j] = C[.., j] + A[.., k] * B[k, j]`` (``j``
    the innermost spatial loop, unit-stride in ``C``) becomes ``for k: for j
    (vectorized): ...``, whose row :mod:`.c_accumulate` then keeps in vector accumulators
    across ``k`` (17 outputs: 16 lanes and a scalar).

    LLVM does the same for TVM on such a schedule (``j [3,5,17,1]``, ``k [73,7]``): once it
    has unrolled ``k`` its loop vectorizer takes ``j``. Legal because the iterations of
    ``j`` update distinct elements of ``C`` and read no other element of it: each element
    sees its updates in the same order. None unless the nest below ``loop`` is perfect,
    ends in one store, holds a reduction loop and no other spatial loop of more than one
    iteration, every load moves by 0 or 1 element per step of ``j``, and the row fits in
    ``fw.limits.max_accumulators`` vectors."""
    if not VECTORIZE_OUTPUTS or loop.kind is not ForKind.SERIAL:
        return None
    if not isinstance(loop.min, E.IntImm) or not isinstance(loop.extent, E.IntImm):
        return None
    if loop.extent.value < MIN_OUTPUT_LANES:
        return None
    chain: list[For] = []
    body = loop.body
    while isinstance(body, For):
        if body.kind not in (ForKind.SERIAL, ForKind.UNROLLED) or not (
            isinstance(body.extent, E.IntImm) and isinstance(body.min, E.IntImm)
        ):
            return None
        chain.append(body)
        body = body.body
    if not chain or not isinstance(body, BufferStore) or is_bool(body.buffer.dtype):
        return None
    lanes = fw.isa.lanes(body.buffer.dtype)
    if lanes < 2 or len(_chunks(loop.extent.value, lanes)) > fw.limits.max_accumulators:
        return None
    v = loop.loop_var
    store = affine(linear_index(body.buffer, body.indices))
    if store.coef(v) != 1 or store.without(v).uses(v):
        return None
    reduction = False
    for lp in chain:
        if store.uses(lp.loop_var):
            if lp.extent.value != 1:
                return None  # a spatial loop below: j is not the innermost
        else:
            reduction = reduction or lp.extent.value > 1
    if not reduction:
        return None
    key = _form_key(store)
    for a in _accesses(body):
        if a.buffer is body.buffer:
            if _form_key(a.form) != key:
                return None  # another element of C is read
        elif a.form.coef(v) not in (0, 1) or a.form.without(v).uses(v):
            return None
    out: Stmt = For(v, loop.min, loop.extent, ForKind.VECTORIZED, body)
    for lp in reversed(chain):
        out = For(lp.loop_var, lp.min, lp.extent, lp.kind, out, lp.thread_binding, lp.annotations)
    return out


@dataclass
class _Access:
    buffer: Buffer
    form: Affine
    store: bool


def _accesses(body: Stmt) -> list[_Access]:
    out: list[_Access] = []

    class _V(Visitor):
        def visit_BufferLoad(self, e: E.BufferLoad) -> None:
            out.append(_Access(e.buffer, affine(linear_index(e.buffer, e.indices)), False))
            self.generic_visit(e)

        def visit_BufferStore(self, s: BufferStore) -> None:
            out.append(_Access(s.buffer, affine(linear_index(s.buffer, s.indices)), True))
            self.generic_visit(s)

    _V().visit(body)
    return out


def _form_key(form: Affine) -> tuple:
    return tuple(sorted((k, c) for k, (c, _) in form.terms.items())), form.const


def _check_dependences(loop: For) -> bool:
    """True if iterations are independent; raises NotVectorizable if they may not be.

    Every buffer stored in the body must be accessed at one offset that moves with ``v``.
    """
    v = loop.loop_var
    accesses = _accesses(loop.body)
    for buf in {a.buffer for a in accesses if a.store}:
        forms = {_form_key(a.form): a.form for a in accesses if a.buffer is buf}
        if len(forms) > 1:
            raise NotVectorizable(f"{buf.name} is stored and accessed at different offsets")
        form = next(iter(forms.values()))
        if form.without(v).uses(v):
            raise NotVectorizable(f"the offset of {buf.name} is not affine in {v.name}")
        if form.coef(v) == 0:
            raise NotVectorizable(f"every lane would store the same element of {buf.name}")
    return True


def _native_lanes(fw: FunctionWriter, loop: For) -> int:
    widths: list[int] = []
    uses_var_as_value = False

    class _V(Visitor):
        def visit_BufferLoad(self, e: E.BufferLoad) -> None:
            widths.append(nbytes(e.dtype))  # indices are scalar code: not descended

        def visit_BufferStore(self, s: BufferStore) -> None:
            widths.append(nbytes(s.buffer.dtype))
            self.visit(s.value)

        def visit_Cast(self, e: E.Cast) -> None:
            widths.extend((nbytes(e.dtype), nbytes(e.value.dtype)))
            self.visit(e.value)

        def visit_Var(self, e: E.Var) -> None:
            nonlocal uses_var_as_value
            uses_var_as_value = uses_var_as_value or e is loop.loop_var

    _V().visit(loop.body)
    if uses_var_as_value:
        widths.append(nbytes(loop.loop_var.dtype))
    lanes = fw.isa.vector_bytes // max(widths, default=4)
    if lanes < 2:
        raise NotVectorizable("the target's vectors hold a single lane of this type")
    return lanes


# ----------------------------------------------------------------------------- emission


def _strided_loop(
    fw: FunctionWriter, loop: For, name: str, full: int, lanes: int, body: _VectorBody
) -> None:
    """A C loop over the ``full`` chunks of ``lanes`` iterations, one vector body each."""
    stop = affine(loop.min).offset(full * lanes).to_expr(loop.loop_var.dtype)
    fw.for_header(loop, name, step=lanes, stop=stop)
    fw.indent += 1
    body.emit(lanes)
    fw.indent -= 1
    fw.line("}")


def _emit_chunks(fw: FunctionWriter, loop: For, name: str, lanes: int) -> None:
    t = c_type(loop.loop_var.dtype)
    extent = loop.extent.value
    full, tail = divmod(extent, lanes)
    body = _VectorBody(fw, loop)
    if 2 <= full <= EXPLICIT_CHUNKS:
        # a few chunks are written out: every access then has a constant offset, which
        # keeps a small accumulator array in registers
        for c in range(full):
            _chunk(fw, loop, name, t, c * lanes, lambda c=c: body.emit(lanes, c * lanes))
    elif full > EXPLICIT_CHUNKS:
        _strided_loop(fw, loop, name, full, lanes, body)
    if full == 1:
        _chunk(fw, loop, name, t, 0, lambda: body.emit(lanes, 0))
    offset = full * lanes
    width = lanes
    while tail:
        width //= 2
        if tail >= width:
            w = width
            if w == 1:
                _chunk(fw, loop, name, t, offset, lambda: fw.block(loop.body), nested=False)
            else:
                _chunk(fw, loop, name, t, offset, lambda w=w, o=offset: body.emit(w, o))
            offset += w
            tail -= w


def _chunk(fw, loop: For, name: str, t: str, offset: int, emit, nested: bool = True) -> None:
    start = affine(loop.min).offset(offset).to_expr(loop.loop_var.dtype)
    fw.line(f"{{ const {t} {name} = {fw.expr(start)};")
    fw.known[loop.loop_var] = start  # a constant here (see c_invariant)
    try:
        if nested:
            fw.indent += 1
            emit()
            fw.indent -= 1
        else:
            emit()
    finally:
        fw.known.pop(loop.loop_var, None)
    fw.line("}")


@dataclass(frozen=True)
class _Val:
    """A value in vector context: scalar C code, a vector of ``dtype``, or a lane mask."""

    code: str
    kind: str  # "scalar" | "vec" | "mask"
    dtype: str = ""
    bits: int = 0
    src: E.PrimExpr | None = None  # a scalar's expression (its broadcast may be shared)


class _VectorBody:
    def __init__(self, fw: FunctionWriter, loop: For) -> None:
        self.fw, self.h, self.v, self.body = fw, fw.helpers, loop.loop_var, loop.body
        self._dep: dict[int, bool] = {}
        self.lanes = 0
        self.start: int | None = None  # the chunk's first lane; None inside a C loop
        self.guarded = 0  # inside an if or a select: loads there may not run

    def emit(self, lanes: int, start: int | None = None) -> None:
        self.lanes, self.start = lanes, start
        self.stmt(self.body)

    # statements ---------------------------------------------------------------------
    def stmt(self, s: Stmt) -> None:
        fw = self.fw
        if isinstance(s, SeqStmt):
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, BufferStore):
            acc = fw.accumulator(s.buffer, s.indices)
            if acc is not None and acc in fw.lane_sums:
                self._lane_sum(fw.lane_sums[acc], s)
                return
            if acc is not None:
                fw.line(f"{acc} = {self.as_vec(self.expr(s.value), s.buffer.dtype)};")
                return
            self._contiguous(s.buffer, s.indices)
            ptr = f"&{fw.buf_names[s.buffer]}[{fw.index(s.buffer, s.indices)}]"
            if is_bool(s.buffer.dtype):  # bytes of 0/1 from a mask of -1/0
                store = self.h.vstore("int8", self.lanes)
                mask = self.as_mask(self.expr(s.value), 8)
                fw.line(f"{store}((int8_t*){ptr}, -{mask});")
            else:
                value = self.as_vec(self.expr(s.value), s.buffer.dtype)
                fw.line(f"{self.h.vstore(s.buffer.dtype, self.lanes)}({ptr}, {value});")
        elif isinstance(s, IfThenElse):
            if self.depends(s.condition):
                raise NotVectorizable("an if condition depends on the vectorized variable")
            fw.line(f"if ({strip_parens(fw.expr(s.condition))}) {{")
            fw.indent += 1
            self.guarded += 1
            self.stmt(s.then_case)
            fw.indent -= 1
            if s.else_case is not None:
                fw.line("} else {")
                fw.indent += 1
                self.stmt(s.else_case)
                fw.indent -= 1
            self.guarded -= 1
            fw.line("}")
        elif isinstance(s, Evaluate) and isinstance(s.value, (E.IntImm, E.FloatImm)):
            pass
        else:
            raise NotVectorizable(f"the body contains a {type(s).__name__}")

    def _lane_sum(self, vacc: str, s: BufferStore) -> None:
        """``acc = acc + value`` summed lane-wise into the vector ``vacc``."""
        value = s.value
        if not isinstance(value, E.Add):
            raise NotVectorizable(f"{s.buffer.name} is not updated by a sum")
        fw = self.fw
        for mine, other in ((value.a, value.b), (value.b, value.a)):
            if isinstance(mine, E.BufferLoad) and mine.buffer is s.buffer:
                if fw.accumulator(mine.buffer, mine.indices) is None:
                    break
                term = self.as_vec(self.expr(other), s.buffer.dtype)
                fw.line(f"{vacc} = {vacc} + {term};")
                return
        raise NotVectorizable(f"{s.buffer.name} is not updated by a sum of itself")

    def _stride(self, buf: Buffer, indices) -> int:
        """The constant element stride of an access between lanes; raises if it has none."""
        form = affine(linear_index(buf, indices))
        if form.without(self.v).uses(self.v):
            raise NotVectorizable(f"access to {buf.name} is not affine in the vector lanes")
        return form.coef(self.v)

    def _contiguous(self, buf: Buffer, indices) -> None:
        form = affine(linear_index(buf, indices))
        if form.coef(self.v) != 1 or form.without(self.v).uses(self.v):
            raise NotVectorizable(f"access to {buf.name} is not unit-stride in the vector lanes")

    # expressions --------------------------------------------------------------------
    def depends(self, e: E.PrimExpr) -> bool:
        hit = self._dep.get(id(e))
        if hit is None:
            hit = self._dep[id(e)] = self.v in collect_vars(e)
        return hit

    def expr(self, e: E.PrimExpr) -> _Val:
        if not self.depends(e):
            if isinstance(e, E.BufferLoad) and not self.guarded:
                # broadcast once per loop or iteration of the loop around (c_invariant)
                shared = self.fw.invariant_load(e, self.lanes, broadcast=True)
                if shared is not None:
                    return _Val(shared, "vec", e.dtype)
            return _Val(self.fw.expr(e), "scalar", e.dtype, src=e)
        if e is self.v:
            iota = self.h.viota(e.dtype, self.lanes)
            return _Val(f"({self.fw.var_names[e]} + {iota}())", "vec", e.dtype)
        if isinstance(e, E.BufferLoad):
            acc = self.fw.accumulator(e.buffer, e.indices)
            if acc is not None:
                return _Val(acc, "vec", e.dtype)
            stride = self._stride(e.buffer, e.indices)
            ptr = f"&{self.fw.buf_names[e.buffer]}[{self.fw.index(e.buffer, e.indices)}]"
            if stride != 1 and not is_bool(e.dtype):
                # a constant stride (a transposed operand): gather the lanes one by one
                vt = self.h.vtype(e.dtype, self.lanes)
                lanes = ", ".join(f"ms_p[{k * stride}]" for k in range(self.lanes))
                return _Val(
                    f"({{ const {c_type(e.dtype)}* ms_p = {ptr}; ({vt}){{{lanes}}}; }})",
                    "vec",
                    e.dtype,
                )
            self._contiguous(e.buffer, e.indices)
            if is_bool(e.dtype):  # bytes of 0/1 become a mask of -1/0
                load, zero = self.h.vload("int8", self.lanes), self.h.vbroadcast("int8", self.lanes)
                return _Val(f"({load}((const int8_t*){ptr}) != {zero}(0))", "mask", bits=8)
            hoisted = None if self.guarded else self.fw.invariant_load(e, self.lanes)
            if hoisted is not None:  # made before a loop it is invariant in (c_invariant)
                return _Val(hoisted, "vec", e.dtype)
            load = self.h.vload(e.dtype, self.lanes)
            return _Val(self._shared_load(e, f"{load}({ptr})"), "vec", e.dtype)
        if isinstance(e, E.Cast):
            return self._cast(e)
        if isinstance(e, E.CmpOp):
            if is_bool(e.a.dtype):
                raise NotVectorizable("comparison of bool values")
            a, b = self.as_vec(self.expr(e.a), e.a.dtype), self.as_vec(self.expr(e.b), e.b.dtype)
            op = "==" if isinstance(e, E.EQ) else "!=" if isinstance(e, E.NE) else e.symbol
            return _Val(f"({a} {op} {b})", "mask", bits=nbytes(e.a.dtype) * 8)
        if isinstance(e, (E.And, E.Or)):
            if self._unsafe_loads(e.b):
                raise NotVectorizable("a lazily evaluated and/or operand loads from memory")
            a, b = self.expr(e.a), self.expr(e.b)
            bits = a.bits or b.bits or 32
            op = "&" if isinstance(e, E.And) else "|"
            return _Val(
                f"({self.as_mask(a, bits)} {op} {self.as_mask(b, bits)})", "mask", bits=bits
            )
        if isinstance(e, E.Not):
            a = self.expr(e.a)
            bits = a.bits or 32
            return _Val(f"(~{self.as_mask(a, bits)})", "mask", bits=bits)
        if isinstance(e, E.Select):
            return self._select(e)
        if isinstance(e, (E.Min, E.Max)):
            fn = self.h.vminmax(e.symbol, e.dtype, self.lanes)
            return _Val(f"{fn}({self._operands(e)})", "vec", e.dtype)
        if isinstance(e, (E.FloorDiv, E.FloorMod)):
            return self._floor_divmod(e)
        if isinstance(e, (E.Add, E.Sub, E.Mul, E.Div)):
            a, b = self.as_vec(self.expr(e.a), e.dtype), self.as_vec(self.expr(e.b), e.dtype)
            return _Val(f"({a} {e.symbol} {b})", "vec", e.dtype)
        if isinstance(e, E.Call) and is_float(e.dtype):
            fn = self.h.vcall(e.op, e.dtype, self.lanes, len(e.args))
            args = ", ".join(self.as_vec(self.expr(a), e.dtype) for a in e.args)
            return _Val(f"{fn}({args})", "vec", e.dtype)
        raise NotVectorizable(f"{type(e).__name__} on vector lanes")

    def _shared_load(self, e: E.BufferLoad, code: str) -> str:
        """A vector load made once per straight-line block of accumulator updates
        (``fw.shared_loads``, see :func:`.c_accumulate.straight_line`): the first use
        assigns a variable declared ahead of the block and pins it in a register (GCC
        would otherwise fold the load into every use again), later uses read it."""
        return self._shared((access_key(e.buffer, e.indices), self.lanes, self.start), e, code)

    def _shared_broadcast(self, x: _Val, dtype: str) -> str | None:
        """The broadcast of a loaded scalar (a conv's input pixel across its output
        channels) made once per straight-line block, as :meth:`_shared_load`; None when
        the block shares no broadcasts (``fw.shared_broadcasts``) or ``x`` loads nothing."""
        e = x.src
        if not self.fw.shared_broadcasts or e is None or not _has_load(e):
            return None
        # keyed by value (a load by its element, an inlined padding guard by its affine
        # forms), however its indices were written out (the block stores no memory)
        code = f"{self.h.vbroadcast(dtype, self.lanes)}({x.code})"
        return self._shared(("bcast", value_key(e), dtype, self.lanes), e, code, dtype)

    def _shared_select(self, e: E.Select, code: str) -> str:
        """A guarded vector load (an inlined padding: ``cond ? X[...] : 0`` with a
        condition the same for every lane) made once per straight-line block, as
        :meth:`_shared_load`: a window's border tile reads each guarded input vector for
        up to nine updates, and the guard and the load are written once, keyed by value
        (the guard by its affine forms, however each step wrote its indices)."""
        if not _has_load(e):
            return code
        return self._shared(("select", value_key(e), self.lanes, self.start), e, code)

    def _shared(self, key: tuple, e: E.PrimExpr, code: str, dtype: str = "") -> str:
        shared = self.fw.shared_loads
        if shared is None or self.start is None or self.guarded:
            return code
        name = shared.get(key)
        if name is None:
            name = shared[key] = self.fw.names.fresh("ms_ld")
            self.fw.shared_decls.append((self.h.vtype(dtype or e.dtype, self.lanes), name))
            pin = self.fw.pin(name, dtype or e.dtype, self.lanes)
            self.fw.line(f"{name} = {code}; {pin}".rstrip())
        return name

    def _operands(self, e: E.BinaryOp) -> str:
        return f"{self.as_vec(self.expr(e.a), e.dtype)}, {self.as_vec(self.expr(e.b), e.dtype)}"

    def _cast(self, e: E.Cast) -> _Val:
        x = self.expr(e.value)
        if is_bool(e.dtype):
            if x.kind == "mask":
                return x
            zero = self.h.vbroadcast(e.value.dtype, self.lanes)
            return _Val(
                f"({self.as_vec(x, e.value.dtype)} != {zero}(0))",
                "mask",
                bits=nbytes(e.value.dtype) * 8,
            )
        vt = self.h.vtype(e.dtype, self.lanes)
        if x.kind == "mask":  # true lanes are -1: negate to get 1
            return _Val(f"__builtin_convertvector(-{x.code}, {vt})", "vec", e.dtype)
        return _Val(
            f"__builtin_convertvector({self.as_vec(x, e.value.dtype)}, {vt})", "vec", e.dtype
        )

    def _select(self, e: E.Select) -> _Val:
        if is_bool(e.dtype):
            raise NotVectorizable("select of bool values")
        known = self.fw.known_guard(e.condition) if not self.depends(e.condition) else None
        if isinstance(known, bool):  # the loops' ranges decide it
            return self.expr(e.true_value if known else e.false_value)
        self.guarded += 1
        try:
            t = self.as_vec(self.expr(e.true_value), e.dtype)
            f = self.as_vec(self.expr(e.false_value), e.dtype)
        finally:
            self.guarded -= 1
        if known is not None:
            code = f"({self.fw.expr(known)} ? {t} : {f})"
            return _Val(self._shared_select(e, code), "vec", e.dtype)
        if self._unsafe_loads(e.true_value) or self._unsafe_loads(e.false_value):
            # the select may guard loads (padding): evaluating both sides must stay in bounds
            raise NotVectorizable(
                "a select with a lane-dependent condition guards loads that may be out of bounds"
            )
        mask = self.as_mask(self.expr(e.condition), nbytes(e.dtype) * 8)
        fn = self.h.vselect(e.dtype, self.lanes)
        return _Val(f"{fn}({mask}, {t}, {f})", "vec", e.dtype)

    def _floor_divmod(self, e: E.BinaryOp) -> _Val:
        div = isinstance(e, E.FloorDiv)
        a, b = self.as_vec(self.expr(e.a), e.dtype), self.as_vec(self.expr(e.b), e.dtype)
        if is_float(e.dtype):
            floor = self.h.vcall("floor", e.dtype, self.lanes, 1)
            q = f"{floor}({a} / {b})"
            return _Val(q if div else f"({a} - {q} * {b})", "vec", e.dtype)
        if is_int(e.dtype) and self.fw.nonneg(e.a) and isinstance(e.b, E.IntImm) and e.b.value > 0:
            return _Val(f"({a} {'/' if div else '%'} {b})", "vec", e.dtype)
        raise NotVectorizable("floor division of possibly negative lanes")

    def _unsafe_loads(self, e: E.PrimExpr) -> bool:
        """True if ``e`` has a load not provably in bounds over the enclosing loops."""
        unsafe = False
        ranges = self.fw.ranges

        class _V(Visitor):
            def visit_BufferLoad(self, load: E.BufferLoad) -> None:
                nonlocal unsafe
                for idx, dim in zip(load.indices, load.buffer.static_shape()):
                    b = const_bounds(idx, ranges)
                    unsafe = unsafe or b is None or b[0] < 0 or b[1] >= dim
                self.generic_visit(load)

        _V().visit(e)
        return unsafe

    # conversions --------------------------------------------------------------------
    def as_vec(self, x: _Val, dtype: str) -> str:
        if x.kind == "vec":
            return x.code
        if x.kind == "scalar":
            shared = self._shared_broadcast(x, dtype)
            return shared or f"{self.h.vbroadcast(dtype, self.lanes)}({x.code})"
        raise NotVectorizable("a lane mask used as a number")

    def as_mask(self, x: _Val, bits: int) -> str:
        mt = self.h.mask_type(bits, self.lanes)
        if x.kind == "mask":
            return x.code if x.bits == bits else f"__builtin_convertvector({x.code}, {mt})"
        if x.kind == "scalar":
            int_t = {8: "int8", 16: "int16", 32: "int32", 64: "int64"}[bits]
            return f"{self.h.vbroadcast(int_t, self.lanes)}(({x.code}) ? -1 : 0)"
        raise NotVectorizable("a number used as a lane mask")
