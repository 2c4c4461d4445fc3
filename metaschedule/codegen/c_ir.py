"""Facts about lowered TIR that several stages of the C code generator read.

Keys that identify an element or a value within one scope (:func:`access_key`,
:func:`value_key`), the vector pieces of a loop (:func:`chunks`), a fused vectorized loop
split back in two (:func:`unfuse`), and the sizes, allocations and step counts of
statements. Pure functions of the IR: no writer state, no emitted text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from ..tir import expr as E
from ..tir.buffer import Buffer
from ..tir.dtype import is_int, nbytes
from ..tir.functor import Visitor, collect_vars, substitute
from ..tir.stmt import Allocate, BufferStore, For, ForKind, IfThenElse, Range, SeqStmt, Stmt
from ..tir.transform.affine import Affine, affine, structural_key
from ..tir.transform.simplify import _Simplify
from .c_expr import CodegenError, linear_form, linear_index

#: A fused loop split back in two (:func:`unfuse`) unrolls its outer part up to this many
#: iterations.
UNFUSE_UNROLL = 16

__all__ = [
    "LazyPoints",
    "access_key",
    "affine_add",
    "affine_key",
    "alloc_bytes",
    "chunks",
    "form_key",
    "fused_divisor",
    "has_load",
    "heap_allocations",
    "int_value",
    "numel_checked",
    "steps",
    "stores_contiguous",
    "vector_pieces",
    "unfuse",
    "value_key",
    "written_buffers",
]


# ----------------------------------------------------------------------------- constants


def int_value(e: E.PrimExpr) -> int:
    """The value of ``e``, an integer constant by the caller's check (a loop's extent or
    start that a plan or an earlier test found to be an :class:`IntImm`)."""
    assert isinstance(e, E.IntImm), f"expected an integer constant, got {e}"
    return e.value


# ----------------------------------------------------------------------------- keys


def affine_key(form: Affine) -> tuple:
    """A key equal for equal affine forms."""
    return tuple(sorted((k, c) for k, (c, _) in form.terms.items())), form.const


def form_key(buf: Buffer, form: Affine) -> tuple:
    """The key of the element of ``buf`` at the flat offset ``form``."""
    return id(buf), *affine_key(form)


def access_key(buf: Buffer, indices) -> tuple:
    """The key of an access's element offset (equal for the same element in one scope)."""
    return form_key(buf, linear_form(buf, indices))


def value_key(e: E.PrimExpr) -> tuple:
    """A key equal for scalar expressions that compute the same value in one scope, as
    written out for different steps (``X[(y + 1) + 0]`` and ``X[y + (0 + 1)]``): a load
    by its element, integer arithmetic and comparisons by affine form (an inlined
    padding guard ``1 <= y + ry``), the rest by structure."""
    if isinstance(e, E.BufferLoad):
        return ("load", *access_key(e.buffer, e.indices))
    if isinstance(e, E.CmpOp) and is_int(e.a.dtype):
        return (type(e).__name__, affine_key(affine(e.a) - affine(e.b)))
    if is_int(e.dtype) and not isinstance(e, (E.Select, E.Call)):
        return ("int", affine_key(affine(e)))
    if isinstance(e, E.BinaryOp):
        return (type(e).__name__, e.dtype, value_key(e.a), value_key(e.b))
    if isinstance(e, E.Not):
        return ("Not", value_key(e.a))
    if isinstance(e, E.Cast):
        return ("Cast", e.dtype, value_key(e.value))
    if isinstance(e, E.Select):
        return ("Select", *(value_key(x) for x in (e.condition, e.true_value, e.false_value)))
    if isinstance(e, E.Call):
        return ("Call", e.dtype, e.op, *(value_key(a) for a in e.args))
    return structural_key(e)


def has_load(e: E.PrimExpr) -> bool:
    """Whether ``e`` reads memory."""
    found: list[E.BufferLoad] = []

    class _V(Visitor):
        def visit_BufferLoad(self, load: E.BufferLoad) -> None:
            found.append(load)

    _V().visit(e)
    return bool(found)


# ----------------------------------------------------------------------------- vector loops


def chunks(extent: int, lanes: int) -> list[tuple[int, int]]:
    """``(start, width)`` of the pieces of a vector loop of ``extent``: vectors of
    ``lanes``, then the remainder in power-of-two pieces, widest first (as the vector code
    of :mod:`.c_vector` covers it), a width of 1 being a scalar: 50 over 16 lanes is
    16, 16, 16, 2."""
    out = [(c * lanes, lanes) for c in range(extent // lanes)]
    start, rest = extent - extent % lanes, extent % lanes
    width = lanes
    while rest:
        while width > rest:
            width //= 2
        out.append((start, width))
        start, rest = start + width, rest - width
    return out


def fused_divisor(loop: For) -> int | None:
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


def unfuse(loop: For, unroll_up_to: int) -> For | None:
    """``loop`` as ``for u: for w (vectorized): body[v := u * c + w]`` with its indices
    simplified, when the body divides ``v`` by a constant ``c`` (see
    :func:`fused_divisor`); ``u`` is unrolled when it makes at most ``unroll_up_to``
    iterations. None when the body does not divide ``v``."""
    c = fused_divisor(loop)
    if c is None:
        return None
    v = loop.loop_var
    dt = v.dtype
    u, w = E.Var(v.name + "_o", dt), E.Var(v.name + "_i", dt)
    body = substitute(loop.body, {v: u * E.const(c, dt) + w})
    inner = For(w, E.const(0, dt), E.const(c, dt), ForKind.VECTORIZED, body)
    n_outer = int_value(loop.extent) // c
    outer_kind = ForKind.UNROLLED if n_outer <= unroll_up_to else ForKind.SERIAL
    simp = _Simplify()
    simp.analyzer.bind(u, Range(E.const(0, dt), E.const(n_outer, dt)))
    inner = simp.visit(inner)
    return For(u, E.const(0, dt), E.const(n_outer, dt), outer_kind, inner)


# ----------------------------------------------------------------------------- statements


class LazyPoints(Sequence[Stmt]):
    """A tile's points, made on first use: a cost model reading a plan only counts them."""

    def __init__(self, count: int, make: Callable[[], list[Stmt]]) -> None:
        self._count, self._make = count, make
        self._made: tuple[Stmt, ...] | None = None

    def _points(self) -> tuple[Stmt, ...]:
        made = self._made
        if made is None:
            made = self._made = tuple(self._make())
            assert len(made) == self._count
        return made

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i):  # type: ignore[override]
        return self._points()[i]

    def __iter__(self) -> Iterator[Stmt]:
        return iter(self._points())

    def __eq__(self, other: object) -> bool:  # equal to the same points in a tuple
        if isinstance(other, (tuple, list, LazyPoints)):
            return self._points() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._points())


def written_buffers(stmt: Stmt) -> set[Buffer]:
    """The buffers ``stmt`` stores into."""
    out: set[Buffer] = set()

    class _V(Visitor):
        def visit_BufferStore(self, s: BufferStore) -> None:
            out.add(s.buffer)
            self.generic_visit(s)

    _V().visit(stmt)
    return out


def numel_checked(b: Buffer) -> int:
    """The elements of ``b``; :class:`CodegenError` for a dynamic shape."""
    try:
        return b.numel()
    except ValueError:
        raise CodegenError(
            f"dynamic shapes are not supported: allocation of {b.name} "
            f"has shape {tuple(str(x) for x in b.shape)}"
        ) from None


def alloc_bytes(b: Buffer) -> int:
    """The bytes an allocation of ``b`` takes (at least one element)."""
    return max(1, numel_checked(b)) * nbytes(b.dtype)


def heap_allocations(s: Stmt, inside_parallel: bool, stack_limit: int) -> list[Buffer]:
    """Allocations in ``s`` of more than ``stack_limit`` bytes, in order: those outside
    every parallel loop (``inside_parallel=False``), or all of them (``s`` is a parallel
    loop's body)."""
    out: list[Buffer] = []

    class _V(Visitor):
        def visit_For(self, loop: For) -> None:
            if loop.kind is ForKind.PARALLEL and not inside_parallel:
                return  # allocated per thread by that loop
            self.generic_visit(loop)

        def visit_Allocate(self, a: Allocate) -> None:
            if alloc_bytes(a.buffer) > stack_limit and a.buffer not in out:
                out.append(a.buffer)
            self.generic_visit(a)

    _V().visit(s)
    return out


def steps(s: Stmt, vector_bytes: int | None = None) -> int:
    """How many innermost statements one execution of ``s`` runs (for auto-unroll).

    A contiguous vector loop is one statement, or, given the register's ``vector_bytes``,
    one per register-sized piece it is written as (a 64-lane float loop is 8 statements
    on AVX2): what the C compiler has to unroll."""
    if isinstance(s, SeqStmt):
        return sum(steps(x, vector_bytes) for x in s.seq)
    if isinstance(s, For):
        inner = steps(s.body, vector_bytes)
        if s.kind is ForKind.VECTORIZED and stores_contiguous(s):
            return inner * vector_pieces(s, vector_bytes)
        if s.kind is ForKind.VECTORIZED and isinstance(s.extent, E.IntImm):
            # a scattered store (a transposing copy): c_vector writes a scalar loop
            return s.extent.value * inner
        if not isinstance(s.extent, E.IntImm):
            return 1 << 62
        return s.extent.value * inner
    if isinstance(s, IfThenElse):  # one branch runs (a versioned body: either copy)
        then = steps(s.then_case, vector_bytes)
        return max(then, steps(s.else_case, vector_bytes) if s.else_case is not None else 0)
    if isinstance(s, Allocate):
        return steps(s.body, vector_bytes)
    return 1


def vector_pieces(loop: For, vector_bytes: int | None) -> int:
    """How many register-sized pieces the widest store of vector loop ``loop`` takes
    (1 without ``vector_bytes``, or when its extent is not a constant)."""
    if vector_bytes is None or not isinstance(loop.extent, E.IntImm):
        return 1
    widest = 0

    class _V(Visitor):
        def visit_BufferStore(self, st: BufferStore) -> None:
            nonlocal widest
            widest = max(widest, nbytes(st.buffer.dtype))
            self.generic_visit(st)

    _V().visit(loop.body)
    return max(1, -(-loop.extent.value * widest // vector_bytes))


def stores_contiguous(loop: For) -> bool:
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


def affine_add(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    """``a + b`` as one affine form (``i + 0 + 1`` becomes ``i + 1``), of ``a``'s type."""
    form = affine(a) + affine(b)
    return form.to_expr(a.dtype)
