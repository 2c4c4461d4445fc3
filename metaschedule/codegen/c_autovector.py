"""Vector lanes for a loop nest the schedule left scalar, as LLVM gives them to TVM.

A tile whose innermost spatial factor is 1 leaves no loop to vectorize: TVM's
``RewriteParallelVectorizeUnroll`` finds no contiguous innermost loop, and neither does
ours. TVM's kernels still run as vector code, because LLVM unrolls the small inner
loops and vectorizes the loop around them. A depthwise tile of 16 channels (``c_2``)
around a window of 3 rows (``ry_1``) of 8 output rows (``y_3``) each::

    for c_2 in range(16):                  # channels: unit stride in every access
      for ry_1 in range(3):
        for y_3 in range(8):               # the innermost loops, c_3 = 1 gone
          out[y_3, c_2] += X[2*y_3 + ry_1, c_2] * K[ry_1, c_2]

GCC does not vectorize an outer loop, so our C ran such a nest as scalar code, 0.12x
TVM's kernel on the same schedule (``same_decisions.py dw2``). Here the loop moves
inside the loops below it and becomes the vector loop::

    for ry_1 in range(3):
      for y_3 in range(8):
        for c_2 in vectorized(16):
          out[y_3, c_2] += X[2*y_3 + ry_1, c_2] * K[ry_1, c_2]

and the rest of the code generator treats it as a vectorized tile (its accumulators
kept in registers, :mod:`.c_accumulate`). Where only reduction loops lie below the loop,
:func:`.c_vector.vectorize_outputs` makes the same move while it emits the loop, and
this pass leaves the nest to it; here the loops below may be spatial too (the output
rows of a tile), and an init nest and its update nest under the loop they were
decomposed at each get the loop. The move is made only where it changes no
result: the nest under the loop is a chain of loops around one store, no loop of it is
vectorized or parallel, and distinct iterations of the loop write distinct elements (its
stride in the stored element is 1, and every other loop of the chain moves the element
by a multiple of its extent); the store may read only the element it writes (an
accumulation). Each element then gets the same updates in the same order.

A vector loop narrower than the target's vectors (``c_3`` of 4 channels, the schedule's
innermost factor) is widened the same way: with the loop of more than one iteration
just above it, when the two walk every access as one contiguous run (``c_2`` of 16
moving each access by 4 elements)::

    for c_2 in range(16):
      for c_3 in vectorized(4):   # 4 lanes of 16
        out[.., c_2 * 4 + c_3] += X[.., c_2 * 4 + c_3] * K[.., c_2 * 4 + c_3]

becomes one vector loop of 64 lanes (four full vectors), as LLVM's loop vectorizer
widens TVM's: on TVM's second-best ``dw2`` record our C ran 0.25x TVM's kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from ..tir import expr as E
from ..tir.arith.analyzer import Analyzer
from ..tir.buffer import Buffer
from ..tir.dtype import nbytes
from ..tir.functor import Mutator, Visitor, substitute
from ..tir.stmt import BufferStore, For, ForKind, Range, SeqStmt, Stmt
from ..tir.transform.affine import Affine, affine
from .c_expr import linear_index
from .c_ir import access_key, affine_key

__all__ = [
    "MAX_GATHER_BYTES",
    "MAX_WIDENED_VECTORS",
    "MIN_LANES",
    "vectorize_scalar_nests",
    "widen_vector_loops",
]

#: Fewest iterations of a loop worth vector lanes.
MIN_LANES = 4
#: Widest span of memory, in bytes, whose elements one gathered vector load reads.
MAX_GATHER_BYTES = 256
#: Most native vectors a widened vector loop spans.
MAX_WIDENED_VECTORS = 4

_SCALAR_KINDS = (ForKind.SERIAL, ForKind.UNROLLED)


def vectorize_scalar_nests(body: Stmt) -> Stmt:
    """``body`` with each scalar loop nest that qualifies (module docstring) given a
    vector loop: the deepest loop of the chain whose iterations write distinct,
    adjacent elements, moved innermost and vectorized."""
    return _Sink().visit(body)


def widen_vector_loops(body: Stmt, vector_bytes: int) -> Stmt:
    """``body`` with each vector loop narrower than ``vector_bytes`` fused with the loop
    of more than one iteration just above it, where the two walk every access as one
    contiguous run (module docstring)."""
    if vector_bytes <= 0:
        return body
    return _Widen(vector_bytes).visit(body)


def _chain(loop: For) -> tuple[list[For], Stmt]:
    """The perfect chain of loops from ``loop`` down, and the statement under them."""
    loops, s = [loop], loop.body
    while isinstance(s, For):
        loops.append(s)
        s = s.body
    return loops, s


def _const(e: E.PrimExpr) -> int | None:
    return e.value if isinstance(e, E.IntImm) else None


def _scalar(loops: list[For]) -> bool:
    return all(lp.kind in _SCALAR_KINDS and not lp.annotations for lp in loops)


@dataclass
class _Nest:
    """A chain of loops below the lane loop and the one store under it."""

    loops: list[For]
    store: BufferStore


def _nests(below: list[For], inner: Stmt) -> list[_Nest] | None:
    """The nests under a lane loop: the chain below it down to one store, or, for a
    sequence of chains (an init nest and its update nest, under the loop they were
    decomposed at), each chain."""
    if isinstance(inner, BufferStore):
        return [_Nest(below, inner)]
    if below or not isinstance(inner, SeqStmt):
        return None
    out = []
    for item in inner.seq:
        if not isinstance(item, For):
            return None
        loops, store = _chain(item)
        if not isinstance(store, BufferStore) or not _scalar(loops):
            return None
        out.append(_Nest(loops, store))
    return out


class _Sink(Mutator):
    def visit_For(self, loop: For) -> Stmt:
        loops, inner = _chain(loop)
        if not _scalar(loops):
            # a parallel or annotated loop on top: the chain below it may qualify
            k = max(i for i, lp in enumerate(loops) if not _scalar([lp]))
            if loops[k].kind is ForKind.VECTORIZED:
                return loop
            top = loops[k]
            return _rebuilt(loops[:k], top.with_body(self.visit(top.body)))
        for k in range(len(loops) - 1, -1, -1):
            nests = _nests(loops[k + 1 :], inner)
            if nests is not None and _lanes_fit(loops[k], nests):
                return _rebuilt(loops[:k], _moved(loops[k], nests))
        return cast(Stmt, self.generic_visit(loop))  # a mutated For


def _rebuilt(loops: list[For], body: Stmt) -> Stmt:
    for lp in reversed(loops):
        body = For(lp.loop_var, lp.min, lp.extent, lp.kind, body, None, lp.annotations)
    return body


def _moved(lane: For, nests: list[_Nest]) -> Stmt:
    """Each nest with the lane loop innermost, vectorized (a fresh variable per copy)."""
    out: list[Stmt] = []
    for nest in nests:
        var = lane.loop_var if len(nests) == 1 else E.Var(lane.loop_var.name, lane.loop_var.dtype)
        store = nest.store if var is lane.loop_var else substitute(nest.store, {lane.loop_var: var})
        vec = For(var, lane.min, lane.extent, ForKind.VECTORIZED, store)
        out.append(_rebuilt(nest.loops, vec))
    return out[0] if len(out) == 1 else SeqStmt(tuple(out))


def _lanes_fit(lane: For, nests: list[_Nest]) -> bool:
    """Whether ``lane`` can carry the vector lanes of every nest below it: its distinct
    iterations write distinct, adjacent elements of one buffer, each store reads only
    the element it writes, and some nest has a loop to move it below (an innermost
    loop is the schedule's to vectorize)."""
    extent = _const(lane.extent)
    if extent is None or extent < MIN_LANES:
        return False
    if all(_const(lp.extent) == 1 for nest in nests for lp in nest.loops):
        return False
    if len(nests) == 1 and not _spatial_below(nests[0]):
        return False  # only reductions below: c_vector.vectorize_outputs moves it
    var, bases = lane.loop_var, set()
    buffers = {nest.store.buffer for nest in nests}
    if len(buffers) > 1:
        return False
    for nest in nests:
        form = affine(linear_index(nest.store.buffer, nest.store.indices))
        if form.coef(var) != 1 or form.without(var).uses(var):
            return False
        if not all(_apart(form, lp, extent) for lp in nest.loops):
            return False
        if not _reads_only_its_element(nest.store) or not _near_reads(nest.store, var, extent):
            return False
        base = form.without(var)
        for lp in nest.loops:
            base = base.without(lp.loop_var)
        bases.add(affine_key(base))
    # the nests write the same elements of the lane loop's iterations (an init and its
    # update): distributing the lane loop over them keeps each element's order
    return len(bases) == 1


def _spatial_below(nest: _Nest) -> bool:
    """Whether a loop of more than one iteration below the lane loop moves the stored
    element (a spatial loop, not only reductions)."""
    form = affine(linear_index(nest.store.buffer, nest.store.indices))
    return any(_const(lp.extent) != 1 and form.uses(lp.loop_var) for lp in nest.loops)


def _apart(form: Affine, other: For, extent: int) -> bool:
    """Whether ``other`` moves the stored element by a multiple of ``extent`` (0
    included), so that it never lands on an element of another lane."""
    var = other.loop_var
    if _const(other.extent) == 1:  # one iteration: it moves nothing
        return True
    return not form.without(var).uses(var) and form.coef(var) % extent == 0


def _near_reads(store: BufferStore, var: E.Var, extent: int) -> bool:
    """Whether every load of the store's value reads the lanes of ``var`` close
    together: stride 0 or 1, or a gather within :data:`MAX_GATHER_BYTES` (a packed
    weight read with a stride of 3, three cache lines for 16 lanes). A transposed
    operand's lanes a row apart each (one cache line per lane) ran 3x slower than the
    scalar nest (``benchmarks/codegen_ab.py tbg``)."""
    for buf, indices in _loads(store.value):
        form = affine(linear_index(buf, indices))
        stride = abs(form.coef(var))
        if form.without(var).uses(var):
            return False
        if stride > 1 and stride * (extent - 1) * nbytes(buf.dtype) > MAX_GATHER_BYTES:
            return False
    return True


def _reads_only_its_element(store: BufferStore) -> bool:
    """Whether every load of the stored buffer in the store's value is of the element
    it writes."""
    key = access_key(store.buffer, store.indices)
    loads = _loads(store.value)
    return all(access_key(b, idx) == key for b, idx in loads if b is store.buffer)


# ----------------------------------------------------------------------------- widening
class _Widen(Mutator):
    def __init__(self, vector_bytes: int) -> None:
        self.vector_bytes = vector_bytes

    def visit_For(self, loop: For) -> Stmt:
        loops, inner = _chain(loop)
        if not isinstance(inner, BufferStore):
            return cast(Stmt, self.generic_visit(loop))  # a mutated For
        widened = self._widened(loops, inner)
        return loop if widened is None else widened

    def _widened(self, loops: list[For], store: BufferStore) -> Stmt | None:
        vec = loops[-1]
        e_v = _const(vec.extent)
        native = self.vector_bytes // nbytes(store.buffer.dtype)
        if vec.kind is not ForKind.VECTORIZED or e_v is None or e_v >= native:
            return None
        k = len(loops) - 2  # the nearest loop above of more than one iteration
        while k >= 0 and _const(loops[k].extent) == 1:
            k -= 1
        if k < 0 or not _scalar([loops[k]]):
            return None
        outer, e_o = loops[k], _const(loops[k].extent)
        if e_o is None or e_o * e_v > MAX_WIDENED_VECTORS * native:
            return None
        if not (_is_const(vec.min, 0) and _is_const(outer.min, 0)):
            return None
        if not _reads_only_its_element(store):
            return None
        accesses = [(store.buffer, store.indices), *_loads(store.value)]
        for buf, indices in accesses:
            form = affine(linear_index(buf, indices))
            c_v, c_o = form.coef(vec.loop_var), form.coef(outer.loop_var)
            rest = form.without(vec.loop_var).without(outer.loop_var)
            if rest.uses(vec.loop_var) or rest.uses(outer.loop_var):
                return None
            if c_v not in (0, 1) or c_o != e_v * c_v:
                return None
            if buf is store.buffer and c_v != 1:
                return None
        fused = E.Var(f"{outer.loop_var.name}_{vec.loop_var.name}_fused", vec.loop_var.dtype)
        step = E.const(e_v, fused.dtype)
        analyzer = Analyzer()
        analyzer.bind(fused, Range(E.const(0, fused.dtype), E.const(e_o * e_v, fused.dtype)))
        vmap = {outer.loop_var: E.FloorDiv(fused, step), vec.loop_var: E.FloorMod(fused, step)}
        new_store = _Simplified(analyzer).visit(substitute(store, vmap))
        dt = fused.dtype
        body = For(fused, E.const(0, dt), E.const(e_o * e_v, dt), ForKind.VECTORIZED, new_store)
        return _rebuilt([lp for lp in loops[:-1] if lp is not outer], body)


def _is_const(e: E.PrimExpr, value: int) -> bool:
    return isinstance(e, E.IntImm) and e.value == value


def _loads(value: E.PrimExpr) -> list[tuple[Buffer, tuple[E.PrimExpr, ...]]]:
    out = []

    class _Loads(Visitor):
        def visit_BufferLoad(self, load: E.BufferLoad) -> None:
            out.append((load.buffer, load.indices))
            self.generic_visit(load)

    _Loads().visit(value)
    return out


class _Simplified(Mutator):
    """Indices simplified (``(f // 4) * 4 + f % 4`` to ``f``)."""

    def __init__(self, analyzer: Analyzer) -> None:
        self.analyzer = analyzer

    def visit_BufferLoad(self, load: E.BufferLoad) -> E.PrimExpr:
        load = cast(E.BufferLoad, self.generic_visit(load))  # a mutated BufferLoad
        return E.BufferLoad(load.buffer, tuple(self.analyzer.simplify(i) for i in load.indices))

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        value = self.visit(store.value)
        indices = tuple(self.analyzer.simplify(i) for i in store.indices)
        return BufferStore(store.buffer, value, indices)
