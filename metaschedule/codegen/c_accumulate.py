"""Register accumulators: a reduction's output tile kept in variables across its loops.

A tiled reduction lowers to loops of this shape (SSRSRS tiling, innermost tile ``N``)::

    for r0 in ...:                        # reduction loops: B's offset does not use them
      for r1 in ...:
        for i in range(2):                # N: constant extents, all in B's offset
          for j in vectorized(32):
            B[base + 64 * i + j] = B[base + 64 * i + j] + A[..] * W[..]

Every ``B`` element of ``N`` is read and written on every iteration of ``r0, r1``. C
compilers keep such a tile in registers only when ``N`` is unrolled completely before
their loop-invariant code motion runs, which GCC does for few nests (LLVM does it by
default, so TVM's schedules get it for free). Here the code generator does it itself:
before the reduction loops each element (or vector of lanes) of the tile is loaded into
its own variable, the loops update the variables (``N`` written out point by point),
and after them the variables are stored back::

    ms_f32x16 acc0 = load(&B[base]), acc1 = ..., acc3 = ...;
    for r0: for r1:
        acc0 = acc0 + ...; acc1 = ...; acc2 = ...; acc3 = ...;
    store(&B[base], acc0); ...

The rewrite applies to a perfect loop nest ending in a single store whose value reads
``B`` only at the stored element, when ``N`` holds at most ``TileLimits.max_accumulators``
distinct elements or vectors. A vectorized loop whose extent is not a multiple of the
lanes (50 over 16) keeps whole vectors, then its remainder in narrower vectors and a
scalar (16, 16, 16, 2), as :mod:`.c_vector` covers such a loop. A tile loop whose points
lie side by side along the vector loop (``j_2`` of ``j_2 x j_3`` where every access uses
``ext(j_3) * j_2 + j_3``) can be merged into it first (:func:`merge_contiguous`, with
:data:`MERGE_CONTIGUOUS`): five 51-lane points of a row become one 255-lane run (19
accumulators, not 25), four 8-lane points two vectors of 16 (what LLVM's SLP vectorizer
does for TVM). Buffers are distinct
memory (parameters are ``restrict``, allocations are separate), so no other access in the
loops can touch the tile.

Scalar accumulators summed along a contiguous innermost loop (a dot product, e.g. a
batched matmul ``Q @ K^T`` whose spatial tile is not vectorized) would stay scalar: C
compilers vectorize a float sum only when allowed to reorder it, and then add the lanes
up one by one after the loop. Such a loop is written as vector code here
(:func:`.c_vector.emit_lane_sums`): a vector of partial sums per accumulator, added up
pairwise after the loop. Only this loop's sum is reordered (as LLVM's fast-math flags
allow TVM); no compiler flag changes the rest of the program.

A tile of fewer vectors than the multiply-add's latency needs in flight (``for f in 2:
for ry, rx: 4 updates``: each accumulator's updates wait for each other) takes in the
tile loops just above its reduction loops (:data:`JAM_SMALL_TILES`, unroll and jam: ``for
ry, rx: 8 updates``), as LLVM gets by unrolling ``f`` for TVM: a TVM record of a grouped
conv2d with this shape ran 150 GFLOPS here against LLVM's 231, 174 jammed (one thread).

A reduction block decomposed by ``RewriteReductionBlock`` leaves its init as a loop nest
just before the reduction nest: the tile is stored (zeros) and loaded back into the
accumulators right away. When the init nest writes exactly the tile's elements (its
loops matched one for one with the spatial loops above the tile, unit loops as
constants), the accumulators start from the init value instead and the init nest is not
emitted (:func:`plan_init_fusion`): each element is stored once, after its last update,
as LLVM's store forwarding and dead-store elimination give TVM once the nest is
unrolled::

    for xx_1:                                 for xx_1:
      for xx_3_init: for f_init: B[..] = 0      { acc0 = bcast(0); ... acc7 = bcast(0);
      { acc0 = load(&B[..]); ...        ->        for ry, rx: acc0 += ...; ...
        for ry, rx: acc0 += ...; ...              store(&B[..], acc0); ... }
        store(&B[..], acc0); ... }
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..tir import expr as E
from ..tir.buffer import Buffer
from ..tir.dtype import c_type, is_int, nbytes
from ..tir.functor import Visitor, collect_vars, substitute
from ..tir.stmt import BufferStore, For, ForKind, IfThenElse, SeqStmt, Stmt
from ..tir.transform.affine import Affine, affine, structural_key
from .c_expr import linear_index
from .c_helpers import c_comment_text
from .isa import CpuIsa

if TYPE_CHECKING:
    from .c_codegen import FunctionWriter


#: Whether a reduction loop among the tile loops joins the region (see plan_accumulators).
HOIST_INNER_REDUCTIONS = True

#: Whether a tile of more than TileLimits.max_accumulators points, with no smaller tile planned
#: deeper in its nest, has its outermost tile loops moved outside the reduction loops
#: (each of their iterations then keeps its own part of the tile in variables; legal as
#: hoisting is: distinct tile points update distinct elements).
SPLIT_LARGE_TILES = True
#: ... when at least TileLimits.min_split_accumulators stay.

#: Whether a tile too small to hide the latency of its multiply-adds (fewer than
#: ``TileLimits.min_split_accumulators`` chains) takes in the tile loops just above its
#: region (unroll and jam: ``for f in 0..2: for ry, rx: 4 updates`` becomes ``for ry, rx:
#: 8 updates``; legal as hoisting is) while it stays within
#: ``TileLimits.jam_accumulators``.
JAM_SMALL_TILES = True

#: Shortest loop worth a SIMD reduction (below, the final horizontal sum costs more).
MIN_SIMD_REDUCTION = 4

#: The innermost reduction loops of a vector tile are written out as straight-line code
#: when they make at most this many steps and :data:`STRAIGHT_STATEMENTS` updates,
STRAIGHT_STEPS = 16
STRAIGHT_STATEMENTS = 256
#: ... when the tile leaves registers for the shared loads
#: (``TileLimits.max_straight_accumulators``), and when two steps read the same input
#: vector or broadcast scalar (a sliding window; see :func:`straight_line`).
MIN_STRAIGHT_LANES = 4

#: Whether the straight-line updates share the broadcasts of loaded scalars too (a
#: convolution's input pixel across the output-channel vectors; see straight_line) ...
SHARE_BROADCASTS = True
#: ... when the accumulators and the shared values held at once fit the vector registers,
#: or when the tile has at most ``TileLimits.broadcast_accumulators``.

#: Whether the updates of one step are written in the order of the tile's points that
#: keeps fewest loaded operands live at once (see :func:`update_order`).
ORDER_UPDATES = True

#: Whether a tile loop whose points lie side by side along the vector loop is merged into
#: it (see :func:`merge_contiguous`). The analytic prior (``cost_model/prior.py``,
#: ``register_tiles``) counts merged tiles the same way: its tiles must be the ones
#: emitted (``tests/cost_model/test_prior.py``).
MERGE_CONTIGUOUS = True

#: Whether an init nest is folded into the accumulators it starts (see plan_init_fusion).
FUSE_INIT = True
#: Most elements of an init nest compared element by element with a tile.
MAX_INIT_ELEMENTS = 4096


@dataclass(frozen=True)
class TileLimits:
    """How large register tiles may grow on one ISA (from :class:`~.isa.CpuIsa`; the
    figures in parentheses are AVX-512's, with 32 vector registers).

    Attributes:
        max_accumulators: most accumulator variables (vectors, or scalars without a
            vectorized loop) of one tile: twice the registers (64), as a few spills cost
            less than the memory round trip on every update of a tile left in memory.
        min_split_accumulators: fewest accumulators a split tile keeps, and the size
            below which a tile is jammed: the independent chains that hide the latency
            of a multiply-add (8: two FMA pipes of latency 4).
        jam_accumulators: most accumulators of a jammed tile (half the registers: 16).
        max_straight_accumulators: most accumulators of a tile written out straight,
            leaving registers for the shared loads (all but 4: 28; measured, 32 of 16
            lanes or 49 of 2 lanes ran up to 2x slower written out).
        straight_registers: registers that accumulators and shared values fit in (32).
        broadcast_accumulators: a tile this small shares its broadcasts whatever it
            holds (16; measured on random conv2d schedules, one thread: tiles of 28
            accumulators holding 16 to 55 values more ran 0.35-1.1x, GCC spilled them;
            tiles of 8 to 16 holding up to 57 more mostly 1.05-1.3x).
    """

    max_accumulators: int
    min_split_accumulators: int
    jam_accumulators: int
    max_straight_accumulators: int
    straight_registers: int
    broadcast_accumulators: int

    @staticmethod
    def of(isa: CpuIsa) -> TileLimits:
        regs = isa.vector_registers
        return TileLimits(
            max_accumulators=2 * regs,
            min_split_accumulators=max(8, isa.fma_chains),
            jam_accumulators=regs // 2,
            max_straight_accumulators=regs - 4,
            straight_registers=regs,
            broadcast_accumulators=regs // 2,
        )


__all__ = [
    "TileLimits",
    "AccumulatorPlan",
    "InitFusion",
    "InitNotTaken",
    "emit_accumulated",
    "emit_fused_init",
    "merge_contiguous",
    "plan_accumulators",
    "plan_init_fusion",
    "simd_reduction_loop",
    "straight_line",
]


@dataclass(frozen=True)
class AccumulatorPlan:
    """The loops a tile stays in variables across, and the tile's points.

    Attributes:
        region: the reduction loops (outermost first); ``region[0]`` is the planned loop.
        points: the innermost nest written out, one statement per accumulator: a store
            with the tile loops replaced by constants (wrapped in a vectorized loop of
            ``lanes`` iterations when ``lanes > 1``).
        buffer: the accumulated buffer.
        lanes: lanes per accumulator (1: scalars).
        outer: tile loops moved outside the region (a tile too large for the register
            budget, see :data:`SPLIT_LARGE_TILES`), outermost first.
    """

    region: tuple[For, ...]
    points: tuple[Stmt, ...]
    buffer: Buffer
    lanes: int
    outer: tuple[For, ...] = ()


def _form_key(buf: Buffer, form: Affine) -> tuple:
    return id(buf), *affine_key(form)


def access_key(buf: Buffer, indices) -> tuple:
    """The key of an access's element offset (equal for the same element in one scope)."""
    return _form_key(buf, affine(linear_index(buf, indices)))


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


def affine_key(form: Affine) -> tuple:
    return tuple(sorted((k, c) for k, (c, _) in form.terms.items())), form.const


def _accesses(body: Stmt) -> tuple[list[BufferStore], list[E.BufferLoad]] | None:
    """The stores and loads of a loop-free body (stores, ifs, sequences), or None when
    it holds anything else."""
    stores: list[BufferStore] = []
    loads: list[E.BufferLoad] = []

    class _V(Visitor):
        def visit_BufferLoad(self, load: E.BufferLoad) -> None:
            loads.append(load)
            self.generic_visit(load)

    def walk(s: Stmt) -> bool:
        if isinstance(s, SeqStmt):
            return all(walk(x) for x in s.seq)
        if isinstance(s, IfThenElse):
            _V().visit(s.condition)
            return walk(s.then_case) and (s.else_case is None or walk(s.else_case))
        if isinstance(s, BufferStore):
            stores.append(s)
            for i in s.indices:
                _V().visit(i)
            _V().visit(s.value)
            return True
        return False

    return (stores, loads) if walk(body) else None


def _guarded_by(body: Stmt, loop_vars: set[E.Var]) -> bool:
    """Whether a condition in ``body`` uses one of ``loop_vars`` (a tile loop of an
    imperfect split guards its points: the accumulators, loaded before and stored after
    the region unconditionally, would touch elements outside the buffer)."""
    found = []

    class _V(Visitor):
        def visit_IfThenElse(self, s: IfThenElse) -> None:
            if collect_vars(s.condition) & loop_vars:
                found.append(s)
            self.generic_visit(s)

    _V().visit(body)
    return bool(found)


def _const_extent(loop: For) -> int | None:
    if isinstance(loop.extent, E.IntImm) and isinstance(loop.min, E.IntImm):
        return loop.extent.value
    return None


def _chain(loop: For) -> tuple[list[For], Stmt]:
    """The perfectly nested loops from ``loop`` down and their innermost body; a fused
    vectorized loop is split back (see ``c_vector._unfuse``)."""
    from .c_vector import _unfuse

    chain: list[For] = []
    cur: Stmt = loop
    while isinstance(cur, For):
        chain.append(cur)
        cur = cur.body
    if chain[-1].kind is ForKind.VECTORIZED:
        split = _unfuse(chain[-1])
        if split is not None and isinstance(split.body, For):
            chain[-1:] = [split, split.body]
            cur = split.body.body
    return chain, cur


def _lanes(fw: FunctionWriter, vec: For, dtype: str) -> int | None:
    """Lanes of the widest accumulator of a vectorized tile loop: the native width when
    the extent reaches it, else the widest power of two within the extent (a remainder
    becomes narrower accumulators, see :func:`_chunks`: 28 floats are 16 + 8 + 4, as
    LLVM legalizes such a vector; 12 are 8 + 4); None for a loop of one lane."""
    native = fw.isa.vector_bytes // max(1, nbytes(dtype))
    ext = vec.extent.value
    if native < 2 or ext < 2:
        return None
    return native if ext >= native else 1 << (ext.bit_length() - 1)


def _chunks(extent: int, lanes: int) -> list[tuple[int, int]]:
    """``(start, width)`` of the accumulators of a vector loop of ``extent``: vectors of
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


def _width(point: Stmt) -> int:
    """Lanes of a planned point: its vector loop's extent, 1 for a scalar point."""
    return point.extent.value if isinstance(point, For) else 1


def _loop_points(loops: list[For], base: dict[E.Var, E.PrimExpr]) -> list[dict]:
    """Every assignment of constant-extent ``loops``' variables to their values (the first
    loop outermost), each on top of ``base``."""
    combos: list[dict[E.Var, E.PrimExpr]] = [base]
    for lp in loops:
        lo, dt = lp.min.value, lp.loop_var.dtype
        combos = [
            {**c, lp.loop_var: E.const(lo + k, dt)} for c in combos for k in range(lp.extent.value)
        ]
    return combos


def plan_accumulators(fw: FunctionWriter, loop: For, split: bool = True) -> AccumulatorPlan | None:
    """The plan for keeping a tile in variables from ``loop`` on, or None (see the module
    docstring for when it applies). ``split``: a tile too large may be split (see
    :data:`SPLIT_LARGE_TILES`), and the tile loops above a small one jammed into it
    (:data:`JAM_SMALL_TILES`; ``loop`` is then the outermost of them)."""
    if loop.kind not in (ForKind.SERIAL, ForKind.UNROLLED) or not _const_extent(loop):
        return None
    chain, body = _chain(loop)
    found = _accesses(body)
    if found is None or not found[0]:
        return None
    stores, loads = found
    buf = stores[0].buffer
    form = affine(linear_index(buf, stores[0].indices))
    key = _form_key(buf, form)
    if any(s.buffer is not buf or access_key(buf, s.indices) != key for s in stores):
        return None  # two buffers, or two elements, stored
    if any(ld.buffer is buf and access_key(buf, ld.indices) != key for ld in loads):
        return None  # another element of the accumulated buffer is read

    # region: the leading loops the offset does not use; tile: the rest
    def in_offset(lp: For) -> bool:
        return form.uses(lp.loop_var) and _const_extent(lp) != 1

    if _const_extent(loop) == 1:
        return None  # not the start of a region (a unit loop: the next one may be)
    jam = in_offset(loop)  # tile loops above the region: jammed into a small tile
    if jam and not (JAM_SMALL_TILES and HOIST_INNER_REDUCTIONS and split):
        return None
    n_region = 0
    while n_region < len(chain) and not in_offset(chain[n_region]):
        n_region += 1
    region, tile = chain[:n_region], chain[n_region:]
    if any(lp.kind not in (ForKind.SERIAL, ForKind.UNROLLED) for lp in region):
        return None
    # unit loops are constants (the tile's first element must be addressable before them)
    consts: dict[E.Var, E.PrimExpr] = {
        lp.loop_var: lp.min for lp in region if _const_extent(lp) == 1
    }
    region = [lp for lp in region if _const_extent(lp) != 1]
    # the tile: constant extents, each loop in the offset; a vectorized loop innermost.
    # A reduction loop among the tile loops (the offset does not use it, e.g. ``k_1`` of
    # ``k_0, j_2, k_1, i_3, j_3``) joins the region: iterations of distinct tile points
    # touch distinct elements, so running it outside them keeps each element's order of
    # updates and lets the whole tile stay in variables across both reduction loops.
    vec = None
    for i, lp in enumerate(tile):
        ext = _const_extent(lp)
        if ext is None or lp.kind not in (ForKind.SERIAL, ForKind.UNROLLED, ForKind.VECTORIZED):
            return None
        if lp.kind is ForKind.VECTORIZED:
            if i != len(tile) - 1:
                return None
            vec = lp
        elif ext != 1 and HOIST_INNER_REDUCTIONS and not form.uses(lp.loop_var):
            region.append(lp)  # a reduction loop inside the tile: hoisted into the region
        elif ext != 1 and (
            form.coef(lp.loop_var) == 0 or form.without(lp.loop_var).uses(lp.loop_var)
        ):
            return None  # the tile loop must move the offset by a constant stride
    tile = [lp for lp in tile if all(lp is not r for r in region)]
    if jam and not region:
        return None  # no reduction loop to keep the tile across
    if _guarded_by(body, {lp.loop_var for lp in tile}):
        return None  # an imperfect tile: some points do not exist, yet would be stored
    if vec is not None and MERGE_CONTIGUOUS:
        while (merged := merge_contiguous(tile, vec, body)) is not None:
            tile, vec, body = merged
        form = affine(linear_index(buf, _store_of(body).indices))
    lanes = 1
    if vec is not None:
        lanes_or_none = _lanes(fw, vec, buf.dtype)
        if lanes_or_none is None:
            return None
        lanes = lanes_or_none
        if form.coef(vec.loop_var) != 1 or form.without(vec.loop_var).uses(vec.loop_var):
            return None
    scalar_loops = [lp for lp in tile if lp is not vec]
    n_points = 1
    for lp in scalar_loops:
        n_points *= lp.extent.value
    pieces = _chunks(vec.extent.value, lanes) if vec is not None else [(0, 1)]
    chunks = len(pieces)
    outer: list[For] = []
    if jam and (lanes == 1 or not _worth_jamming(fw, chain, n_points * chunks)):
        return None
    limits = fw.limits
    if n_points * chunks > limits.max_accumulators:
        if not (split and SPLIT_LARGE_TILES) or _planned_deeper(fw, chain):
            return None
        while scalar_loops and n_points * chunks > limits.max_accumulators:
            outer.append(scalar_loops.pop(0))
            n_points //= outer[-1].extent.value
        fewest = limits.min_split_accumulators
        if not fewest <= n_points * chunks <= limits.max_accumulators:
            return None
    # points: every combination of the tile's scalar loops and vector chunks
    combos = _loop_points(scalar_loops, consts)
    points: list[Stmt] = []
    offsets: list[tuple[int, int]] = []
    lane = E.Var(vec.loop_var.name, vec.loop_var.dtype) if vec is not None else None
    for combo in combos:
        base = sum(form.coef(v) * int(x.value) for v, x in combo.items() if v not in consts)
        if vec is None or lane is None:
            points.append(substitute(body, combo))
            offsets.append((base, 1))
            continue
        w, dt = vec.loop_var, vec.loop_var.dtype
        for first, width in pieces:
            start = vec.min.value + first
            if width == 1:  # the last element of a remainder: a scalar accumulator
                points.append(substitute(body, {**combo, w: E.const(start, dt)}))
            else:
                point = substitute(body, {**combo, w: lane + E.const(start, dt)})
                points.append(For(lane, E.const(0, dt), E.const(width, dt), vec.kind, point))
            offsets.append((base + start, width))
    # distinct elements: the lane ranges [offset, offset + width) must not overlap
    ordered = sorted(offsets)
    if any(b[0] - a[0] < a[1] for a, b in zip(ordered, ordered[1:])):
        return None
    return AccumulatorPlan(tuple(region), tuple(points), buf, lanes, tuple(outer))


def merge_contiguous(tile: list[For], vec: For, body: Stmt) -> tuple[list[For], For, Stmt] | None:
    """A tile loop ``L`` merged into the vector loop ``V`` when every access uses them
    only as ``ext(V) * L + V`` (the points of ``L`` lie side by side in memory), e.g.
    ``j_2`` (5) around ``j_3`` (51): one 255-lane loop, kept in 15 vectors of 16 lanes
    and a tail of 8, 4, 2, 1 instead of 5 x (16, 16, 16, 2, 1). Returns the tile without
    ``L``, the merged loop and the body indexed by it; None if no tile loop merges."""
    ext_v, mv = vec.extent.value, vec.min.value
    for lp in tile:
        ext_l = _const_extent(lp)
        if lp is vec or ext_l is None or ext_l == 1:
            continue
        if not _side_by_side(body, lp.loop_var, vec.loop_var, ext_v):
            continue
        u = E.Var(vec.loop_var.name, vec.loop_var.dtype)
        new_body = substitute(body, {lp.loop_var: lp.min, vec.loop_var: u + E.const(mv, u.dtype)})
        merged = For(u, E.const(0, u.dtype), E.const(ext_l * ext_v, u.dtype), vec.kind, new_body)
        rest = [x for x in tile if x is not lp and x is not vec] + [merged]
        return rest, merged, new_body
    return None


def _side_by_side(body: Stmt, outer: E.Var, inner: E.Var, ext_inner: int) -> bool:
    """Whether ``outer`` and ``inner`` occur in ``body`` only in buffer indices, each
    index affine in them with ``coef(outer) == ext_inner * coef(inner)``."""
    ok = [True]
    pair = {outer, inner}

    def index_ok(idx: E.PrimExpr) -> bool:
        form = affine(idx)
        rest = form.without(outer).without(inner)
        return not (rest.uses(outer) or rest.uses(inner)) and (
            form.coef(outer) == ext_inner * form.coef(inner)
        )

    class _V(Visitor):
        def visit_BufferLoad(self, e: E.BufferLoad) -> None:
            ok[0] = ok[0] and all(index_ok(i) for i in e.indices)

        def visit_Var(self, e: E.Var) -> None:
            if e in pair:
                ok[0] = False

    def walk(s: Stmt) -> None:
        if isinstance(s, SeqStmt):
            for x in s.seq:
                walk(x)
        elif isinstance(s, IfThenElse):
            _V().visit(s.condition)
            walk(s.then_case)
            if s.else_case is not None:
                walk(s.else_case)
        elif isinstance(s, BufferStore):
            ok[0] = ok[0] and all(index_ok(i) for i in s.indices)
            _V().visit(s.value)
        else:
            ok[0] = False

    walk(body)
    return ok[0]


def _worth_jamming(fw: FunctionWriter, chain: list[For], accumulators: int) -> bool:
    """Whether the tile loops heading ``chain`` join the tile of the region below them
    (:data:`JAM_SMALL_TILES`): that tile has fewer than ``min_split_accumulators``
    accumulators, the jammed one at most ``jam_accumulators`` (:class:`TileLimits`)."""
    if accumulators > fw.limits.jam_accumulators:
        return False
    deeper = _deeper_plan(fw, chain)
    return deeper is not None and len(deeper.points) < fw.limits.min_split_accumulators


def _deeper_plan(fw: FunctionWriter, chain: list[For]) -> AccumulatorPlan | None:
    """The plan of the first loop below ``chain[0]`` that starts a tile fitting as it is
    (``split=False``: neither split nor jammed), or None."""
    for lp in chain[1:]:
        plan = plan_accumulators(fw, lp, split=False)
        if plan is not None:
            return plan
    return None


def _planned_deeper(fw: FunctionWriter, chain: list[For]) -> bool:
    """Whether a loop below ``chain[0]`` starts a tile that fits as it is."""
    return _deeper_plan(fw, chain) is not None


def simd_reduction_loop(plan: AccumulatorPlan) -> For | None:
    """The innermost reduction loop of ``plan`` if its scalar accumulators may be summed
    in SIMD lanes: every point adds to its accumulator (``acc = acc + value``) and every
    other load walks memory with stride 0 or 1 along the loop; else None."""
    if plan.lanes != 1 or not plan.region:
        return None
    inner = plan.region[-1]
    extent = _const_extent(inner)
    if extent is None or extent < MIN_SIMD_REDUCTION or inner.kind is not ForKind.SERIAL:
        return None
    buf = plan.buffer
    if not buf.dtype.startswith("float"):
        return None
    for point in plan.points:
        if not isinstance(point, BufferStore) or not isinstance(point.value, E.Add):
            return None
        key = access_key(buf, point.indices)
        a, b = point.value.a, point.value.b
        acc_side = [x for x in (a, b) if isinstance(x, E.BufferLoad) and x.buffer is buf]
        if len(acc_side) != 1 or access_key(buf, acc_side[0].indices) != key:
            return None
        found = _accesses(point)
        if found is None:
            return None
        for ld in found[1]:
            if ld.buffer is buf:
                continue
            form = affine(linear_index(ld.buffer, ld.indices))
            if form.coef(inner.loop_var) not in (0, 1) or form.without(inner.loop_var).uses(
                inner.loop_var
            ):
                return None
    return inner


def straight_line(
    plan: AccumulatorPlan, limits: TileLimits
) -> tuple[tuple[For, ...], Stmt | None, bool]:
    """The region split into its outer loops and, for a vector tile, its innermost loops
    written out: every update of every step, step by step, as one sequence (None if no
    loop qualifies, see :data:`STRAIGHT_STEPS`), and whether the broadcast scalars are
    shared too.

    Written out, the updates of neighbouring points and steps read the same values (a
    3x3 window slid by one pixel reads each input pixel up to three times: a vector of a
    depthwise input, the broadcast input scalar of a convolution over channels; a weight
    is shared by the tile's pixels): each is loaded (and broadcast) once and kept in a
    register (``FunctionWriter.shared_loads``), as LLVM's value numbering does for TVM
    after it unrolls the same nest. Broadcasts are shared when two steps read the same
    one and the accumulators and the values held at once fit the vector registers
    (or the accumulators are few, :class:`TileLimits`); else only the vector
    loads, if two steps read the same vector. Each element is updated by the same steps
    in the same order.
    """
    n = len(plan.points)
    if plan.lanes < MIN_STRAIGHT_LANES or n > limits.max_straight_accumulators:
        return plan.region, None, False
    steps, k = 1, len(plan.region)
    while k > 0:
        lp = plan.region[k - 1]
        ext = _const_extent(lp)
        if ext is None or lp.kind not in (ForKind.SERIAL, ForKind.UNROLLED):
            break
        if steps * ext > STRAIGHT_STEPS or n * steps * ext > STRAIGHT_STATEMENTS:
            break
        steps, k = steps * ext, k - 1
    inner = plan.region[k:]
    if not inner:
        return plan.region, None, False
    combos = _loop_points(list(inner), {})
    vectors_reused, broadcasts_reused, held = _shared_values(plan, combos)
    fits = n + held <= limits.straight_registers or n <= limits.broadcast_accumulators
    broadcasts = SHARE_BROADCASTS and broadcasts_reused and fits
    if not (broadcasts or vectors_reused):
        return plan.region, None, False  # nothing to share that the compiler does not share
    updates = [substitute(p, c) for c in combos for p in plan.points]
    return plan.region[:k], SeqStmt(updates), broadcasts


def update_order(plan: AccumulatorPlan) -> tuple[Stmt, ...]:
    """The points in the order their updates are written in a step: the tile's own
    order, or its points grouped by the broadcast scalar they read when that keeps fewer
    loaded operands live at once (:func:`_peak_live`).

    A convolution's tile is an outer product: a broadcast input scalar per pixel times a
    weight vector per output-channel vector. Written weight vector by weight vector (the
    tile loops' order when the channel loop is outside the pixel loop), every pixel's
    broadcast stays live across the step (14 pixels by 2 vectors: 28 accumulators, 14
    broadcasts and a vector, 43 of AVX-512's 32 registers); written pixel by pixel, two
    weight vectors and one broadcast (31). GCC keeps the written order (it schedules no
    instructions before register allocation on x86) and spills accumulators to the stack
    instead: a load and a store on a chain of updates in every step. Measured on cbr's
    third-best tuned schedule (one thread): five accumulators spilled, 244 GFLOPS;
    grouped, none, 265. Vector operands are not grouped (a depthwise tile, input vector
    times weight vector: 0.98x). Each accumulator's updates, and so the result, are the
    same in any order: the points update distinct elements and only read other buffers.
    """
    points = plan.points
    if not ORDER_UPDATES or len(points) < 3:
        return points
    operands = [
        [
            (vector, _width(p), access_key(ld.buffer, ld.indices))
            for ld, vector in _operands(p, plan.buffer)
        ]
        for p in points
    ]
    first: dict[tuple, int] = {}
    for i, keys in enumerate(operands):
        for k in keys:
            first.setdefault(k, i)
    # grouped by their broadcasts (each broadcast's points in the tile's order)
    order = sorted(
        range(len(points)), key=lambda i: (sorted(first[k] for k in operands[i] if not k[0]), i)
    )
    if _peak_live(operands, order) < _peak_live(operands, range(len(points))):
        return tuple(points[i] for i in order)
    return points


def _peak_live(operands: list[list[tuple]], order) -> int:
    """The most operand values live at once when the points' updates are written in
    ``order``: each from its first use to its last, one step at a time."""
    span: dict[tuple, list[int]] = {}
    for pos, i in enumerate(order):
        for k in operands[i]:
            span.setdefault(k, [pos, pos])[1] = pos
    return _most_at_once(span.values(), len(operands))


def _most_at_once(spans: Iterable[Sequence[int]], n: int) -> int:
    """The most of the inclusive ``[first, last]`` spans over ``0..n-1`` that overlap at
    one position."""
    live = [0] * (n + 1)
    for first, last in spans:
        live[first] += 1
        live[last + 1] -= 1
    most = cur = 0
    for d in live:
        cur += d
        most = max(most, cur)
    return most


def _shared_values(plan: AccumulatorPlan, combos: list[dict]) -> tuple[bool, bool, int]:
    """``(vectors reused, broadcasts reused, held)`` for the points updated step by step
    (``combos``: the steps): whether two steps read the same input vector, the same
    broadcast scalar (a window sliding over its input; within one step the compiler
    shares loads itself), and the most of these values held in registers at once, each
    from its first to its last use (what the written-out updates keep busy beside the
    accumulators)."""
    operands = [_operands(point, plan.buffer) for point in plan.points]
    uses: dict[tuple, list[int]] = {}  # key -> [first step, first update, last update]
    reused = [False, False]  # broadcast, vector
    update = 0
    for step, combo in enumerate(combos):
        for point, loads in zip(plan.points, operands):
            for ld, vector in loads:
                indices = [substitute(i, combo) for i in ld.indices]
                key = (vector, _width(point), access_key(ld.buffer, indices))
                use = uses.setdefault(key, [step, update, update])
                use[2] = update
                if use[0] != step:
                    reused[vector] = True
            update += 1
    held = [(first, last) for _, first, last in uses.values() if last > first]
    return reused[True], reused[False], _most_at_once(held, update)


def _operands(point: Stmt, acc: Buffer) -> list[tuple[E.BufferLoad, bool]]:
    """The loads of a vector point that the written-out updates may share, each with
    True for a vector (unit stride along the lanes), False for a broadcast scalar (no
    lane dependence); gathers and the accumulated buffer ``acc`` are left out."""
    if not isinstance(point, For):
        return []
    found = _accesses(point.body)
    if found is None:
        return []
    lane, out = point.loop_var, []
    for ld in found[1]:
        if ld.buffer is acc:
            continue
        form = affine(linear_index(ld.buffer, ld.indices))
        if not form.uses(lane):
            out.append((ld, False))
        elif form.coef(lane) == 1 and not form.without(lane).uses(lane):
            out.append((ld, True))
    return out


def _store_of(point: Stmt) -> BufferStore:
    found = _accesses(point.body if isinstance(point, For) else point)
    assert found is not None and found[0]
    return found[0][0]


def _first_lane(point: Stmt) -> tuple[E.PrimExpr, ...]:
    """The indices of a point's store at its first lane."""
    store = _store_of(point)
    if isinstance(point, For):
        return tuple(substitute(i, {point.loop_var: point.min}) for i in store.indices)
    return store.indices


def emit_accumulated(
    fw: FunctionWriter, plan: AccumulatorPlan, init: E.PrimExpr | None = None
) -> bool:
    """Emit the plan; False (nothing emitted) if a point cannot be written as planned
    (its vector code would fall back to scalar code). ``init``: the value every
    accumulator starts from (a fused init nest, see :func:`plan_init_fusion`) instead of
    the tile's contents in memory."""
    from .c_vector import NotVectorizable

    buf, lanes = plan.buffer, plan.lanes
    t = c_type(buf.dtype)
    snap, saved_lines, saved_indent = fw.helpers.snapshot(), fw.lines, fw.indent
    fw.lines = []
    names: list[str] = []
    fw.accumulated = buf
    try:
        for lp in plan.outer:  # a split tile: its outer loops around the region
            name = fw.var_names.get(lp.loop_var) or fw.names.fresh(lp.loop_var.name)
            fw.var_names[lp.loop_var] = name
            fw.ranges[lp.loop_var] = (lp.min, lp.extent)
            fw.for_header(lp, name)
            fw.indent += 1
        loops = c_comment_text(", ".join(lp.loop_var.name for lp in plan.region))
        n = len(plan.points)
        widths = "/".join(str(w) for w in sorted({_width(p) for p in plan.points}, reverse=True))
        what = f"{n} accumulator{'s' if n > 1 else ''}" + (
            f" of {widths} lanes" if lanes > 1 else ""
        )
        fw.line(f"{{ // {c_comment_text(buf.name)} kept in {what} across loops {loops}")
        fw.indent += 1
        value = fw.expr(init) if init is not None else None
        for point in plan.points:
            name = fw.names.fresh(f"{buf.name}_acc")
            names.append(name)
            elem = f"{fw.buf_names[buf]}[{fw.index(buf, _first_lane(point))}]"
            width = _width(point)  # lanes, or fewer for a vector loop's remainder
            vt = fw.helpers.vtype(buf.dtype, width) if width > 1 else t
            if value is not None:
                start = (
                    f"{fw.helpers.vbroadcast(buf.dtype, width)}({value})" if width > 1 else value
                )
                fw.line(f"{vt} {name} = {start};")
            elif width > 1:
                fw.line(f"{vt} {name} = {fw.helpers.vload(buf.dtype, width)}(&{elem});")
            else:
                fw.line(f"{t} {name} = {elem};")
            fw.accumulators[access_key(buf, _store_of(point).indices)] = name
        simd = simd_reduction_loop(plan)
        if simd is not None:
            fw.simd_reduction = (simd.loop_var, tuple(names))
        ordered = dataclasses.replace(plan, points=update_order(plan))
        outer, straight, broadcasts = straight_line(ordered, fw.limits)
        body: Stmt = SeqStmt(list(ordered.points)) if len(plan.points) > 1 else plan.points[0]
        if straight is not None:
            body = straight
            fw.shared_loads, fw.shared_decls = {}, []
            fw.shared_broadcasts = broadcasts
        decls_at = len(fw.lines)
        for lp in reversed(outer):
            body = For(
                lp.loop_var, lp.min, lp.extent, lp.kind, body, lp.thread_binding, lp.annotations
            )
        fw.stmt(body)
        # the shared loads' variables, declared before the loops (each pass assigns them
        # before it reads them: the updates are straight-line code)
        by_type: dict[str, list[str]] = {}
        for vt_name, ld in fw.shared_decls:
            by_type.setdefault(vt_name, []).append(ld)
        fw.lines[decls_at:decls_at] = [
            "  " * fw.indent + f"{vt_name} {', '.join(lds)};" for vt_name, lds in by_type.items()
        ]
        fw.accumulators.clear()
        fw.accumulated = None
        for point, name in zip(plan.points, names):
            elem = f"{fw.buf_names[buf]}[{fw.index(buf, _first_lane(point))}]"
            width = _width(point)
            vstore = fw.helpers.vstore(buf.dtype, width) if width > 1 else ""
            fw.line(f"{vstore}(&{elem}, {name});" if width > 1 else f"{elem} = {name};")
        fw.indent -= 1
        fw.line("}")
        for _ in plan.outer:
            fw.indent -= 1
            fw.line("}")
        emitted = fw.lines
    except NotVectorizable:
        fw.helpers.restore(snap)
        fw.indent = saved_indent
        return False
    finally:
        for lp in plan.outer:
            fw.ranges.pop(lp.loop_var, None)
        fw.lines = saved_lines
        fw.accumulators.clear()
        fw.accumulated = None
        fw.simd_reduction = None
        fw.shared_loads, fw.shared_decls = None, []
        fw.shared_broadcasts = False
    fw.lines.extend(emitted)
    return True


# ----------------------------------------------------------------------------- fused init
class InitNotTaken(Exception):
    """The planned loop of a fused init was emitted without it (see emit_fused_init)."""


@dataclass(frozen=True)
class InitFusion:
    """An init nest folded into the accumulators of the reduction nest after it.

    Attributes:
        roots: the loops of the reduction nest where accumulator plans start (one, or
            one per copy of a versioned body).
        value: the value the init stores (into every element of the tile).
    """

    roots: tuple[For, ...]
    value: E.PrimExpr


def _has_load(e: E.PrimExpr) -> bool:
    found: list[E.BufferLoad] = []

    class _V(Visitor):
        def visit_BufferLoad(self, load: E.BufferLoad) -> None:
            found.append(load)

    _V().visit(e)
    return bool(found)


def plan_init_fusion(fw: FunctionWriter, init: Stmt, red: Stmt) -> InitFusion | None:
    """Whether the init nest ``init`` (run just before ``red``) can start ``red``'s
    accumulators instead of being stored: ``init`` is a perfect nest storing one
    load-free value into buffer ``B``; ``red`` descends through serial loops (each
    non-unit one matched with the next non-unit loop of ``init``, same extent) to a
    loop where :func:`plan_accumulators` keeps a tile of ``B`` in variables; and the
    rest of ``init`` stores exactly that tile's elements. None otherwise."""
    if not FUSE_INIT or not isinstance(init, For) or not isinstance(red, For):
        return None
    ichain, ibody = _chain(init)
    if not isinstance(ibody, BufferStore):
        return None
    if any(
        _const_extent(lp) is None
        or lp.kind not in (ForKind.SERIAL, ForKind.UNROLLED, ForKind.VECTORIZED)
        for lp in ichain
    ):
        return None
    ivars = {lp.loop_var for lp in ichain}
    if _has_load(ibody.value) or collect_vars(ibody.value) & ivars:
        return None
    roots = _fused_roots(fw, ichain, ibody, 0, {}, {}, red)
    return InitFusion(tuple(roots), ibody.value) if roots else None


def _fused_roots(
    fw: FunctionWriter,
    ichain: list[For],
    ibody: BufferStore,
    k: int,
    subst: dict[E.Var, E.PrimExpr],
    red_consts: dict[E.Var, E.PrimExpr],
    cur: Stmt,
) -> list[For] | None:
    """The planned loops below ``cur`` whose tiles are what the init nest from
    ``ichain[k]`` on writes (``subst``: init loops already matched; ``red_consts``: unit
    loops of the reduction nest), or None. Both copies of a versioned body
    (:mod:`.c_versioning`) must take the init."""
    if isinstance(cur, IfThenElse):
        if cur.else_case is None:
            return None
        then = _fused_roots(fw, ichain, ibody, k, subst, red_consts, cur.then_case)
        other = _fused_roots(fw, ichain, ibody, k, subst, red_consts, cur.else_case)
        return then + other if then and other else None
    if not isinstance(cur, For):
        return None
    plan = plan_accumulators(fw, cur)
    if plan is not None:
        return [cur] if _covers(ichain[k:], ibody, subst, red_consts, plan) else None
    ext = _const_extent(cur)
    if ext is None or cur.kind not in (ForKind.SERIAL, ForKind.UNROLLED):
        return None
    if ext == 1:
        red_consts = {**red_consts, cur.loop_var: cur.min}
    else:
        subst = dict(subst)
        while k < len(ichain) and _const_extent(ichain[k]) == 1:
            subst[ichain[k].loop_var] = ichain[k].min
            k += 1
        if k == len(ichain):
            return None
        ilp = ichain[k]
        same = _const_extent(ilp) == ext and ilp.min.value == cur.min.value
        if not same or ilp.kind is ForKind.VECTORIZED:
            return None
        subst[ilp.loop_var] = cur.loop_var
        k += 1
    return _fused_roots(fw, ichain, ibody, k, subst, red_consts, cur.body)


def _covers(
    rest: list[For],
    ibody: BufferStore,
    subst: dict[E.Var, E.PrimExpr],
    red_consts: dict[E.Var, E.PrimExpr],
    plan: AccumulatorPlan,
) -> bool:
    """Whether the init loops ``rest`` store exactly the elements of ``plan``'s tile."""
    buf = plan.buffer
    if buf is not ibody.buffer:
        return False
    n = 1
    for lp in rest:
        n *= lp.extent.value
    if n > MAX_INIT_ELEMENTS:
        return False
    combos = _loop_points(rest, subst)
    init_keys = {access_key(buf, [substitute(i, c) for i in ibody.indices]) for c in combos}
    tile_keys = set()
    for point in plan.points:
        bid, terms, const = access_key(buf, [substitute(i, red_consts) for i in _first_lane(point)])
        tile_keys.update((bid, terms, const + lane) for lane in range(_width(point)))
    return init_keys == tile_keys


def emit_fused_init(fw: FunctionWriter, init: Stmt, red: Stmt) -> bool:
    """Emit ``red`` with ``init`` folded into its accumulators (see
    :func:`plan_init_fusion`); False (nothing emitted) when it does not apply."""
    fusion = plan_init_fusion(fw, init, red)
    if fusion is None:
        return False
    snap, n_lines, indent = fw.helpers.snapshot(), len(fw.lines), fw.indent
    fw.pending_init, fw.init_uses = fusion, set()
    try:
        fw.stmt(red)
        taken = fw.init_uses == {id(r) for r in fusion.roots}
    except InitNotTaken:
        taken = False
    finally:
        fw.pending_init = None
    if not taken:  # e.g. the tile's vector code fell back to scalar code
        del fw.lines[n_lines:]
        fw.helpers.restore(snap)
        fw.indent = indent
    return taken
