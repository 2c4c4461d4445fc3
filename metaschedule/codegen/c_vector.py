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
from ..tir.dtype import c_type, is_bool, nbytes
from ..tir.functor import Visitor
from ..tir.stmt import BufferStore, Evaluate, For, ForKind, IfThenElse, SeqStmt, Stmt
from ..tir.transform.affine import Affine, affine
from .c_expr import linear_index, strip_parens
from .c_helpers import Helpers, c_comment_text
from .c_ir import access_key, chunks, int_value
from .c_vector_body import NotVectorizable, VectorBody
from .c_writer import CWriter

if TYPE_CHECKING:
    from .c_limits import PlanTarget
    from .c_writer import CpuEmitter, VectorEmitter

#: Up to this many full-width chunks are emitted one after the other instead of as a loop.
EXPLICIT_CHUNKS = 4
#: Whether a serial loop over a reduction is vectorized over its outputs
#: (:func:`vectorize_outputs`). The analytic prior walks the nest it makes
#: (:func:`.plan.emitted_loops`).
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


def emit_vectorized(fw: CpuEmitter, loop: For, name: str) -> None:
    """Emit ``loop`` (kind VECTORIZED) as vector code, or as a scalar fallback loop (the
    choice is made first, by :func:`vector_code_fails`)."""
    split = fw.unfused(loop)
    if split is not None:
        # v = u * c + w: a serial loop over u around a vectorized loop over w
        assert isinstance(split.body, For)  # unfuse: the inner, vectorized loop
        fw.line(
            f"// {name}: a fused loop, vectorized over its inner {split.body.extent} iterations"
        )
        fw.stmt(split)
        return
    # in a register tile, checked with the tile (c_accumulate_emit.tile_fails)
    why = None if fw.accumulated is not None else vector_code_fails(fw, loop)
    if why is None:
        _emit_chunks(fw, loop, name, _native_lanes(fw, loop))
        return
    if fw.accumulated is not None:  # checked before the tile was started: a bug
        raise AssertionError(f"a register tile's vector code cannot be written: {why}")
    fw.line(f"// {name}: not vectorized ({c_comment_text(why)})")
    if _independent(loop):
        fw.line("#pragma GCC ivdep")
    fw.for_header(loop, name)
    fw.block(loop.body)
    fw.line("}")


def vector_code_fails(fw: VectorEmitter, loop: For) -> str | None:
    """Why the vectorized ``loop`` cannot be written as vector code, None if it can: the
    checks of writing it, made by writing it to a writer that keeps nothing
    (:class:`DryWriter`)."""
    try:
        if not isinstance(loop.extent, E.IntImm):
            raise NotVectorizable("the extent is not a constant")
        _check_dependences(loop)
        _emit_chunks(DryWriter(fw), loop, "v", _native_lanes(fw, loop))
    except NotVectorizable as why:
        return str(why)
    return None


def _independent(loop: For) -> bool:
    """Whether the iterations of ``loop`` are proved independent (``ivdep``)."""
    if not isinstance(loop.extent, E.IntImm):
        return False
    try:
        return _check_dependences(loop)
    except NotVectorizable:
        return False


def emit_lane_sums(fw: CpuEmitter, loop: For, name: str, accs: tuple[str, ...]) -> bool:
    """Emit the serial loop ``loop``, whose body adds terms to the scalar accumulators
    ``accs`` (see :mod:`.c_accumulate`), as vector code: each accumulator gets a vector of
    partial sums, added up pairwise after the loop (the sum is reordered: this loop's
    alone). False (nothing emitted) if the body is not vector code (checked first, on a
    writer that keeps nothing)."""
    extent = loop.extent.value if isinstance(loop.extent, E.IntImm) else 0
    try:
        lanes = _native_lanes(fw, loop)
    except NotVectorizable:
        return False
    while lanes > extent and lanes > 2:
        lanes //= 2
    if extent // lanes == 0:
        return False
    try:
        _lane_sums(DryWriter(fw), loop, name, accs, lanes)
    except NotVectorizable:
        return False
    _lane_sums(fw, loop, name, accs, lanes)
    return True


def _lane_sums(fw: VectorEmitter, loop: For, name: str, accs: tuple[str, ...], lanes: int) -> None:
    """Write :func:`emit_lane_sums`'s code (raises NotVectorizable where it cannot)."""
    extent = int_value(loop.extent)
    full = extent // lanes
    dtype = fw.accumulated.dtype if fw.accumulated is not None else "float32"
    vt, zero = fw.helpers.vtype(dtype, lanes), fw.helpers.vbroadcast(dtype, lanes)
    hsum = fw.helpers.vhsum(dtype, lanes)
    vaccs = {a: fw.names.fresh(f"{a}_lanes") for a in accs}
    fw.lane_sums = vaccs
    try:
        fw.line("{ // summed in vector lanes, added up after the loop")
        fw.indent += 1
        for v in vaccs.values():
            fw.line(f"{vt} {v} = {zero}(0);")
        body = VectorBody(fw, loop)
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
    finally:
        fw.lane_sums = {}


class DryWriter(CWriter):
    """The writer as vector code reads it, keeping nothing written to it: its lines,
    helpers, names and constants are its own, every value a plain load (no invariant or
    shared loads: they change the text, not whether it can be written). Writing a loop
    on it is the check that the loop can be written (:func:`vector_code_fails`)."""

    def __init__(self, fw: VectorEmitter, tile: tuple[Buffer, set[tuple]] | None = None) -> None:
        super().__init__(fw.name, Helpers())
        self.fw, self.target = fw, fw.target
        self.var_names, self.buf_names = dict(fw.var_names), fw.buf_names
        self.ranges, self.known = dict(fw.ranges), dict(fw.known)
        self.accumulated, self.lane_sums = fw.accumulated, dict(fw.lane_sums)
        # a tile about to be written (c_accumulate_emit): its buffer and accumulators' keys
        self.tile = tile
        if tile is not None:
            self.accumulated = tile[0]
        self.shared_loads: dict[tuple, str] | None = None
        self.shared_decls: list[tuple[str, str]] = []
        self.shared_broadcasts = False

    @property
    def isa(self):
        return self.fw.isa

    def accumulator(self, buf: Buffer, indices: tuple[E.PrimExpr, ...]) -> str | None:
        if self.tile is None:
            return self.fw.accumulator(buf, indices)
        if buf is not self.tile[0]:
            return None
        if access_key(buf, indices) not in self.tile[1]:
            raise NotVectorizable(f"an access to {buf.name} outside its accumulators")
        return "acc"

    def invariant_load(self, load: E.BufferLoad, lanes: int, broadcast: bool = False) -> None:
        return None

    def pin(self, name: str, dtype: str, lanes: int) -> str:
        return ""

    def index(self, buf: Buffer, indices: tuple[E.PrimExpr, ...], kind: str = "load") -> str:
        """No text (it is not kept): only the checks of the loads inside the indices."""
        for i in indices:
            _check_loads(self, i)
        return "0"

    def stmt(self, s: Stmt) -> None:
        """Scalar code (a vector loop's last lane, a remainder loop, a tile's loops): only
        what can fail in it, an access to a tile's buffer outside its accumulators, and
        the vector loops inside."""
        if isinstance(s, SeqStmt):
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, BufferStore):
            self.accumulator(s.buffer, s.indices)
            self.expr(s.value)
        elif isinstance(s, IfThenElse):
            self.expr(s.condition)
            self.stmt(s.then_case)
            if s.else_case is not None:
                self.stmt(s.else_case)
        elif isinstance(s, For):
            self.var_names[s.loop_var] = s.loop_var.name
            self.ranges[s.loop_var] = (s.min, s.extent)
            split = self.unfused(s) if s.kind is ForKind.VECTORIZED else None
            if split is not None:  # written as the loops it is split into
                self.stmt(split)
            elif s.kind is ForKind.VECTORIZED and self.accumulated is not None:
                why = vector_code_fails(self, s)
                if why is not None:
                    raise NotVectorizable(why)
            else:
                self.stmt(s.body)
        elif isinstance(s, Evaluate):
            self.expr(s.value)
        else:
            self.stmt_other(s)

    def stmt_other(self, s: Stmt) -> None:
        """Statements vector code does not reach (an allocation): their bodies."""
        body = getattr(s, "body", None)
        if isinstance(body, Stmt):
            self.stmt(body)

    def unfused(self, loop: For) -> For | None:
        return self.fw.unfused(loop)


def _check_loads(w: DryWriter, e: E.PrimExpr) -> None:
    """The accumulator checks of the loads in ``e`` (an index: a gather's ``idx[i]``)."""

    class _V(Visitor):
        def visit_BufferLoad(self, load: E.BufferLoad) -> None:
            w.accumulator(load.buffer, load.indices)
            self.generic_visit(load)

    _V().visit(e)


def _end(loop: For) -> E.PrimExpr:
    return affine(loop.min).offset(int_value(loop.extent)).to_expr(loop.loop_var.dtype)


# ----------------------------------------------------------------------------- analysis


def vectorize_outputs(fw: PlanTarget, loop: For) -> For | None:
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
    if lanes < 2 or len(chunks(loop.extent.value, lanes)) > fw.limits.max_accumulators:
        return None
    v = loop.loop_var
    store = affine(linear_index(body.buffer, body.indices))
    if store.coef(v) != 1 or store.without(v).uses(v):
        return None
    reduction = False
    for lp in chain:
        if store.uses(lp.loop_var):
            if int_value(lp.extent) != 1:
                return None  # a spatial loop below: j is not the innermost
        else:
            reduction = reduction or int_value(lp.extent) > 1
    if not reduction:
        return None
    key = _form_key(store)
    for a in _accesses(body):
        if a.buffer is body.buffer:
            if _form_key(a.form) != key:
                return None  # another element of C is read
        elif a.form.coef(v) not in (0, 1) or a.form.without(v).uses(v):
            return None
    out: For = For(v, loop.min, loop.extent, ForKind.VECTORIZED, body)
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


def _native_lanes(fw: VectorEmitter, loop: For) -> int:
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
    fw: VectorEmitter, loop: For, name: str, full: int, lanes: int, body: VectorBody
) -> None:
    """A C loop over the ``full`` chunks of ``lanes`` iterations, one vector body each."""
    stop = affine(loop.min).offset(full * lanes).to_expr(loop.loop_var.dtype)
    fw.for_header(loop, name, step=lanes, stop=stop)
    fw.indent += 1
    body.emit(lanes)
    fw.indent -= 1
    fw.line("}")


def _emit_chunks(fw: VectorEmitter, loop: For, name: str, lanes: int) -> None:
    t = c_type(loop.loop_var.dtype)
    extent = int_value(loop.extent)
    full, tail = divmod(extent, lanes)
    body = VectorBody(fw, loop)
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
