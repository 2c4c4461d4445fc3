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

A tensorized reduction's points are calls of a dot product (:mod:`.c_intrin`) that
update ``lanes`` int32 elements of ``C`` through a pointer: a tile of them (rows of ``A``
by vectors of ``B``, an outer product) is kept in vector variables in the same way, each
call written as its register form (``acc = ms_dot_16x4_vnni_acc(acc, &A[..], &B[..], 4)``)
and the calls of a step sharing the broadcast of ``A`` and the vector of ``B`` (the
compiler's value numbering: no store lies between them any more).

A reduction block decomposed by ``RewriteReductionBlock`` leaves its init as a loop nest
just before the reduction nest: the tile is stored (zeros) and loaded back into the
accumulators right away. When the init nest writes exactly the tile's elements (its
loops matched one for one with the spatial loops above the tile, unit loops as
constants), the accumulators start from the init value instead and the init nest is not
emitted (:func:`.c_init_fusion.plan_init_fusion`): each element is stored once, after its
last update, as LLVM's store forwarding and dead-store elimination give TVM once the nest
is unrolled::

    for xx_1:                                 for xx_1:
      for xx_3_init: for f_init: B[..] = 0      { acc0 = bcast(0); ... acc7 = bcast(0);
      { acc0 = load(&B[..]); ...        ->        for ry, rx: acc0 += ...; ...
        for ry, rx: acc0 += ...; ...              store(&B[..], acc0); ... }
        store(&B[..], acc0); ... }
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..tir import expr as E
from ..tir.buffer import Buffer
from ..tir.dtype import nbytes
from ..tir.functor import Visitor, collect_vars, substitute
from ..tir.stmt import BufferStore, Evaluate, For, ForKind, IfThenElse, SeqStmt, Stmt
from ..tir.transform.affine import affine
from . import c_ir
from .c_expr import linear_index
from .c_intrin import accumulating_call
from .c_ir import (
    LazyPoints,
    access_key,
    affine_key,
    chunks,
    form_key,
    int_value,
    unfuse,
    value_key,
)
from .c_limits import PlanTarget, TileLimits

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
#: vector or broadcast scalar (a sliding window; see :func:`.c_straight.straight_line`).
MIN_STRAIGHT_LANES = 4

#: Whether the straight-line updates share the broadcasts of loaded scalars too (a
#: convolution's input pixel across the output-channel vectors; see straight_line) ...
SHARE_BROADCASTS = True
#: ... when the accumulators and the shared values held at once fit the vector registers,
#: or when the tile has at most ``TileLimits.broadcast_accumulators``.

#: Whether the updates of one step are written in the order of the tile's points that
#: keeps fewest loaded operands live at once (see :func:`.c_straight.update_order`).
ORDER_UPDATES = True

#: Whether a tile loop whose points lie side by side along the vector loop is merged into
#: it (see :func:`merge_contiguous`). The analytic prior reads the tiles from the plan
#: (:func:`.plan.plan_body`), merged ones included.
MERGE_CONTIGUOUS = True

#: Whether a tile of dot-product calls (:func:`.c_intrin.accumulating_call`) is kept in
#: vector variables, each call written as its register form (off: the calls load and
#: store their accumulators through a pointer).
TENSORIZED_TILES = True

#: Whether an init nest is folded into the accumulators it starts (see plan_init_fusion).
FUSE_INIT = True
#: Most elements of an init nest compared element by element with a tile.
MAX_INIT_ELEMENTS = 4096


__all__ = [
    "AccumulatorPlan",
    "PlanTarget",
    "TileLimits",
    "body_accesses",
    "const_extent",
    "first_lane",
    "loop_chain",
    "loop_points",
    "merge_contiguous",
    "plan_accumulators",
    "point_width",
    "simd_reduction_loop",
    "store_of",
]

#: the shared keys live in :mod:`.c_ir`; re-exported for importers of the old names
__all__ += ["access_key", "affine_key", "value_key"]


@dataclass(frozen=True)
class AccumulatorPlan:
    """The loops a tile stays in variables across, and the tile's points.

    Attributes:
        region: the reduction loops (outermost first); ``region[0]`` is the planned loop.
        points: the innermost nest written out, one statement per accumulator: a store
            with the tile loops replaced by constants (wrapped in a vectorized loop of
            ``lanes`` iterations when ``lanes > 1``).
        buffer: the accumulated buffer.
        lanes: lanes per accumulator (1: scalars; a dot product's outputs for a tile of
            its calls).
        outer: tile loops moved outside the region (a tile too large for the register
            budget, see :data:`SPLIT_LARGE_TILES`), outermost first.
    """

    region: tuple[For, ...]
    points: Sequence[Stmt]
    buffer: Buffer
    lanes: int
    outer: tuple[For, ...] = ()

    @property
    def widths(self) -> tuple[int, ...]:
        """Lanes of each accumulator (1: a scalar), in the order of ``points``."""
        return tuple(point_width(p) for p in self.points)

    def describe(self) -> str:
        """The tile in words (the comment the emitter writes before it): ``C kept in 12
        accumulators of 16/8/4 lanes across loops k``."""
        n = len(self.points)
        widths = "/".join(str(w) for w in sorted(set(self.widths), reverse=True))
        what = f"{n} accumulator{'s' if n > 1 else ''}"
        what += f" of {widths} lanes" if self.lanes > 1 else ""
        loops = ", ".join(lp.loop_var.name for lp in self.region)
        return f"{self.buffer.name} kept in {what} across loops {loops}"


def body_accesses(body: Stmt) -> tuple[list[BufferStore], list[E.BufferLoad]] | None:
    """The stores and loads of a loop-free body (stores, ifs, sequences), or None when
    it holds anything else. A body that is one dot product's call
    (:func:`.c_intrin.accumulating_call`) stores the call at its accumulators' first
    element and loads its operands."""
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
        call = accumulating_call(s)
        if call is not None and isinstance(s, Evaluate) and s is body:  # the whole body
            stores.append(BufferStore(call[1].buffer, s.value, call[1].indices))
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


def const_extent(loop: For) -> int | None:
    if isinstance(loop.extent, E.IntImm) and isinstance(loop.min, E.IntImm):
        return loop.extent.value
    return None


def loop_chain(loop: For) -> tuple[list[For], Stmt]:
    """The perfectly nested loops from ``loop`` down and their innermost body; a fused
    vectorized loop is split back (see :func:`.c_ir.unfuse`)."""
    chain: list[For] = []
    cur: Stmt = loop
    while isinstance(cur, For):
        chain.append(cur)
        cur = cur.body
    if chain[-1].kind is ForKind.VECTORIZED:
        split = unfuse(chain[-1], c_ir.UNFUSE_UNROLL)
        if split is not None and isinstance(split.body, For):
            chain[-1:] = [split, split.body]
            cur = split.body.body
    return chain, cur


def _lanes(fw: PlanTarget, vec: For, dtype: str) -> int | None:
    """Lanes of the widest accumulator of a vectorized tile loop: the native width when
    the extent reaches it, else the widest power of two within the extent (a remainder
    becomes narrower accumulators, see :func:`.c_ir.chunks`: 28 floats are 16 + 8 + 4, as
    LLVM legalizes such a vector; 12 are 8 + 4); None for a loop of one lane."""
    native = fw.isa.vector_bytes // max(1, nbytes(dtype))
    ext = int_value(vec.extent)
    if native < 2 or ext < 2:
        return None
    return native if ext >= native else 1 << (ext.bit_length() - 1)


def point_width(point: Stmt) -> int:
    """Lanes of a planned point: its vector loop's extent, a dot product's outputs, 1 for
    a scalar point."""
    if isinstance(point, For):
        return int_value(point.extent)
    call = accumulating_call(point)
    return call[0].lanes if call is not None else 1


def loop_points(loops: list[For], base: dict[E.Var, E.PrimExpr]) -> list[dict]:
    """Every assignment of constant-extent ``loops``' variables to their values (the first
    loop outermost), each on top of ``base``."""
    combos: list[dict[E.Var, E.PrimExpr]] = [base]
    for lp in loops:
        lo, ext, dt = int_value(lp.min), int_value(lp.extent), lp.loop_var.dtype
        combos = [{**c, lp.loop_var: E.const(lo + k, dt)} for c in combos for k in range(ext)]
    return combos


def plan_accumulators(fw: PlanTarget, loop: For, split: bool = True) -> AccumulatorPlan | None:
    """The plan for keeping a tile in variables from ``loop`` on, or None (see the module
    docstring for when it applies). ``split``: a tile too large may be split (see
    :data:`SPLIT_LARGE_TILES`), and the tile loops above a small one jammed into it
    (:data:`JAM_SMALL_TILES`; ``loop`` is then the outermost of them)."""
    if loop.kind not in (ForKind.SERIAL, ForKind.UNROLLED) or not const_extent(loop):
        return None
    chain, body = loop_chain(loop)
    found = body_accesses(body)
    if found is None or not found[0]:
        return None
    stores, loads = found
    buf = stores[0].buffer
    form = affine(linear_index(buf, stores[0].indices))
    key = form_key(buf, form)
    if any(s.buffer is not buf or access_key(buf, s.indices) != key for s in stores):
        return None  # two buffers, or two elements, stored
    if any(ld.buffer is buf and access_key(buf, ld.indices) != key for ld in loads):
        return None  # another element of the accumulated buffer is read

    # region: the leading loops the offset does not use; tile: the rest
    def in_offset(lp: For) -> bool:
        return form.uses(lp.loop_var) and const_extent(lp) != 1

    if const_extent(loop) == 1:
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
        lp.loop_var: lp.min for lp in region if const_extent(lp) == 1
    }
    region = [lp for lp in region if const_extent(lp) != 1]
    # the tile: constant extents, each loop in the offset; a vectorized loop innermost.
    # A reduction loop among the tile loops (the offset does not use it, e.g. ``k_1`` of
    # ``k_0, j_2, k_1, i_3, j_3``) joins the region: iterations of distinct tile points
    # touch distinct elements, so running it outside them keeps each element's order of
    # updates and lets the whole tile stay in variables across both reduction loops.
    vec = None
    for i, lp in enumerate(tile):
        ext = const_extent(lp)
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
        form = affine(linear_index(buf, store_of(body).indices))
    lanes = point_width(body)  # 1, or a dot product's outputs
    if lanes != 1 and (vec is not None or not TENSORIZED_TILES):
        return None  # a vectorized loop around a dot product's call, or the switch off
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
        n_points *= int_value(lp.extent)
    pieces = chunks(int_value(vec.extent), lanes) if vec is not None else [(0, 1)]
    n_chunks = len(pieces)
    outer: list[For] = []
    if jam and (lanes == 1 or not _worth_jamming(fw, chain, n_points * n_chunks)):
        return None
    limits = fw.limits
    # a tile of dot-product calls: at most as many accumulators as registers
    # (TileLimits.max_call_accumulators), split into fewer rows when larger
    calls = vec is None and lanes > 1
    most = limits.max_call_accumulators if calls else limits.max_accumulators
    if n_points * n_chunks > most:
        if not (split and SPLIT_LARGE_TILES) or _planned_deeper(fw, chain):
            return None
        while scalar_loops and n_points * n_chunks > most:
            outer.append(scalar_loops.pop(0))
            n_points //= int_value(outer[-1].extent)
        fewest = limits.min_split_accumulators
        if not fewest <= n_points * n_chunks <= most:
            return None
    # points: every combination of the tile's scalar loops and vector chunks
    combos = loop_points(scalar_loops, consts)
    offsets: list[tuple[int, int]] = []
    for combo in combos:
        base = sum(form.coef(v) * int(x.value) for v, x in combo.items() if v not in consts)
        if vec is None:
            offsets.append((base, lanes))
            continue
        for first, width in pieces:
            offsets.append((base + int_value(vec.min) + first, width))
    # distinct elements: the lane ranges [offset, offset + width) must not overlap
    ordered = sorted(offsets)
    if any(b[0] - a[0] < a[1] for a, b in zip(ordered, ordered[1:])):
        return None
    points = LazyPoints(len(offsets), lambda: _points(body, combos, vec, pieces))
    return AccumulatorPlan(tuple(region), points, buf, lanes, tuple(outer))


def _points(body: Stmt, combos: list[dict], vec: For | None, pieces: list) -> list[Stmt]:
    """The tile's points (see :func:`plan_accumulators`): ``body`` at every combination of
    the scalar tile loops, for each chunk of the vector loop ``vec``."""
    if vec is None:
        return [substitute(body, combo) for combo in combos]
    points: list[Stmt] = []
    lane = E.Var(vec.loop_var.name, vec.loop_var.dtype)
    w, dt = vec.loop_var, vec.loop_var.dtype
    for combo in combos:
        for first, width in pieces:
            start = int_value(vec.min) + first
            if width == 1:  # the last element of a remainder: a scalar accumulator
                points.append(substitute(body, {**combo, w: E.const(start, dt)}))
            else:
                point = substitute(body, {**combo, w: lane + E.const(start, dt)})
                points.append(For(lane, E.const(0, dt), E.const(width, dt), vec.kind, point))
    return points


def merge_contiguous(tile: list[For], vec: For, body: Stmt) -> tuple[list[For], For, Stmt] | None:
    """A tile loop ``L`` merged into the vector loop ``V`` when every access uses them
    only as ``ext(V) * L + V`` (the points of ``L`` lie side by side in memory), e.g.
    ``j_2`` (5) around ``j_3`` (51): one 255-lane loop, kept in 15 vectors of 16 lanes
    and a tail of 8, 4, 2, 1 instead of 5 x (16, 16, 16, 2, 1). Returns the tile without
    ``L``, the merged loop and the body indexed by it; None if no tile loop merges."""
    ext_v, mv = int_value(vec.extent), int_value(vec.min)
    for lp in tile:
        ext_l = const_extent(lp)
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


def _worth_jamming(fw: PlanTarget, chain: list[For], accumulators: int) -> bool:
    """Whether the tile loops heading ``chain`` join the tile of the region below them
    (:data:`JAM_SMALL_TILES`): that tile has fewer than ``min_split_accumulators``
    accumulators, the jammed one at most ``jam_accumulators`` (:class:`TileLimits`)."""
    if accumulators > fw.limits.jam_accumulators:
        return False
    deeper = _deeper_plan(fw, chain)
    return deeper is not None and len(deeper.points) < fw.limits.min_split_accumulators


def _deeper_plan(fw: PlanTarget, chain: list[For]) -> AccumulatorPlan | None:
    """The plan of the first loop below ``chain[0]`` that starts a tile fitting as it is
    (``split=False``: neither split nor jammed), or None."""
    for lp in chain[1:]:
        plan = plan_accumulators(fw, lp, split=False)
        if plan is not None:
            return plan
    return None


def _planned_deeper(fw: PlanTarget, chain: list[For]) -> bool:
    """Whether a loop below ``chain[0]`` starts a tile that fits as it is."""
    return _deeper_plan(fw, chain) is not None


def simd_reduction_loop(plan: AccumulatorPlan) -> For | None:
    """The innermost reduction loop of ``plan`` if its scalar accumulators may be summed
    in SIMD lanes: every point adds to its accumulator (``acc = acc + value``) and every
    other load walks memory with stride 0 or 1 along the loop; else None."""
    if plan.lanes != 1 or not plan.region:
        return None
    inner = plan.region[-1]
    extent = const_extent(inner)
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
        found = body_accesses(point)
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


def store_of(point: Stmt) -> BufferStore:
    found = body_accesses(point.body if isinstance(point, For) else point)
    assert found is not None and found[0]
    return found[0][0]


def first_lane(point: Stmt) -> tuple[E.PrimExpr, ...]:
    """The indices of a point's store at its first lane."""
    store = store_of(point)
    if isinstance(point, For):
        return tuple(substitute(i, {point.loop_var: point.min}) for i in store.indices)
    return store.indices


# ----------------------------------------------------------------------------- fused init
