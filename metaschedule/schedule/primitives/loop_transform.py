"""Loop transformations: split, fuse, reorder, add_unit_loop.

``split`` and ``fuse`` rewrite one loop nest and then re-simplify the bindings of the
blocks below it (see ``bindings.py``), so ``i_0 * 8 + i_1`` stays a plain affine
binding and the ``f // 8``, ``f % 8`` forms of a fusion fold away when they cancel.
New loop variables are named as in TVM: splitting ``i`` gives ``i_0``, ``i_1``, ...;
fusing ``i`` and ``j`` gives ``i_j_fused``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence

from ...tir import BlockRealize, For, ForKind, IntImm, PrimExpr, Range, Var
from ...tir.expr import const
from ...tir.stmt import IterType, SeqStmt, Stmt
from ..affine import affine_memo, check_affine_binding
from ..analysis import (
    expr_vars,
    iter_kinds_by_var,
    loop_doms,
)
from ..base import ScheduleBase, atomic
from ..bindings import LoopVarRewriter, bindings_memo, tiled_value
from ..error import ScheduleError
from ..instruction import InstructionKind, register_inst_kind
from ..rv import BlockRV, ExprRV, LoopRV
from ..state import ScheduleState

# ----------------------------------------------------------------------------- checks


def _const_extent(node: For, prim: str) -> int:
    if not isinstance(node.extent, IntImm) or not isinstance(node.min, IntImm):
        raise ScheduleError(
            f"{prim} needs a loop with constant bounds, but loop {node.loop_var.name} has "
            f"min {node.min} and extent {node.extent}"
        )
    return node.extent.value


def _check_no_mixed_loop_moves(realize: BlockRealize, moved: list[For]) -> None:
    """A reduction block's ``init`` runs at the first reduction step of each output; a moved
    loop that feeds both data-parallel and reduction iter vars (e.g. a split of a fused
    ``j, k`` loop) could run a later step first, so such a loop must keep its place."""
    block = realize.block
    if all(iv.iter_type is not IterType.COMM_REDUCE for iv in block.iter_vars):
        return
    kinds = iter_kinds_by_var(realize)
    for lp in moved:
        if {IterType.DATA_PAR, IterType.COMM_REDUCE} <= kinds.get(lp.loop_var, set()):
            raise ScheduleError(
                f"reorder cannot move loop {lp.loop_var.name}: it is bound to both data-parallel "
                f"and reduction iter vars of block {block.name_hint!r} "
                f"({', '.join(str(v) for v in realize.iter_values)}), so moving it could run a "
                "reduction step before the block's init"
            )


# ----------------------------------------------------------------------------- the mixin


class LoopTransformMixin(ScheduleBase):
    state: ScheduleState

    def _outer_doms(self, fname: str, node: Stmt) -> dict[Var, Range]:
        return loop_doms(self.state.loops_above(fname, node))

    def _distinct_loops(self, rvs: Sequence[LoopRV], primitive: str) -> tuple[str, list[For]]:
        """The loops behind ``rvs``: at least one, all different, all in one function."""
        if not rvs:
            raise ScheduleError(f"{primitive} needs at least one loop, got none")
        fname = None
        nodes: list[For] = []
        for rv in rvs:
            f, node = self._loop(rv)
            if fname is not None and f != fname:
                raise ScheduleError(
                    f"{primitive}: loops come from different functions {fname}, {f}"
                )
            fname = f
            if any(node is other for other in nodes):
                raise ScheduleError(f"{primitive}: loop {node.loop_var.name} is given twice")
            nodes.append(node)
        assert fname is not None
        return fname, nodes

    @atomic
    def split(
        self,
        loop: LoopRV,
        factors: Sequence[int | ExprRV | None],
        preserve_unit_iters: bool = True,
    ) -> list[LoopRV]:
        """Split a loop into ``len(factors)`` nested loops, outermost first.

        One factor may be ``None``: it is inferred as ``ceil(extent / product of the
        others)``. If the product exceeds the extent, the blocks below get the
        predicate ``fused_value < extent``::

            for i in range(10):                 for i_0, i_1 in T.grid(3, 4):
                B[i] = A[i]            ->           if i_0 * 4 + i_1 < 10:  # predicate
                                                        B[i_0 * 4 + i_1] = A[i_0 * 4 + i_1]

        As in TVM, the new loops are serial and unannotated, and ``preserve_unit_iters=False``
        drops unit-extent loop variables from the bindings below (the loops themselves stay).

        Raises:
            ScheduleError: a non-constant extent, no factors, more than one ``None``,
                a factor < 1, or factors whose product is smaller than the extent.
        """
        fname, node = self._loop(loop)
        name = node.loop_var.name
        extent = _const_extent(node, "split")
        factors = list(factors)
        if not factors:
            raise ScheduleError(f"split of loop {name} needs at least one factor, got none")
        values: list[int | None] = [None if f is None else self._int(f) for f in factors]
        n_none = values.count(None)
        if n_none > 1:
            raise ScheduleError(
                f"split of loop {name}: at most one factor may be None (inferred), got {factors}"
            )
        known = [v for v in values if v is not None]
        bad = [v for v in known if v < 1]
        if bad:
            raise ScheduleError(
                f"split of loop {name}: factors must be positive, got {values} (extent {extent})"
            )
        prod = math.prod(known)
        if n_none:
            values[values.index(None)] = -(-extent // prod)
        elif prod < extent:
            raise ScheduleError(
                f"split of loop {name}: the product of the factors {values} is {prod}, smaller "
                f"than the loop extent {extent}; use a None factor to infer one"
            )
        ints = [int(v) for v in values]  # type: ignore[arg-type]
        dtype = node.loop_var.dtype
        new_vars = [Var(f"{name}_{k}", dtype) for k in range(len(ints))]
        fused: PrimExpr = new_vars[0]
        for var, f in zip(new_vars[1:], ints[1:]):
            fused = fused * f + var
        value = fused if node.min.value == 0 else fused + node.min
        predicate = fused < const(extent, dtype) if math.prod(ints) != extent else None
        fast = None
        if predicate is None and node.min.value == 0:
            tiled = tiled_value(new_vars, ints, bool(preserve_unit_iters))
            fast = {id(value): (value, tiled)} if tiled is not None else None
        new_loops_dom = {v: Range(const(0, dtype), const(f, dtype)) for v, f in zip(new_vars, ints)}
        outer = {**self._outer_doms(fname, node), **new_loops_dom}
        body = LoopVarRewriter(
            {node.loop_var: value},
            {node.loop_var: Range(node.min, node.extent)},
            outer,
            predicate,
            bool(preserve_unit_iters),
            affine_memo(self.state),
            fast,
            simplified=bindings_memo(self.state),
        ).visit(node.body)
        for var, f in zip(reversed(new_vars), reversed(ints)):
            body = For(var, const(0, dtype), const(f, dtype), ForKind.SERIAL, body)
        self.state.replace(fname, {node: body})
        outs = [self._new_loop_rv(fname, v) for v in new_vars]
        self._record("Split", [loop, *factors], [bool(preserve_unit_iters)], outs)
        return outs

    @atomic
    def fuse(self, *loops: LoopRV, preserve_unit_iters: bool = True) -> LoopRV:
        """Fuse a chain of directly nested loops (outermost first) into one loop::

            for i, j in T.grid(4, 8):            for i_j_fused in range(32):
                B[i, j] = A[i, j]        ->          B[i_j_fused // 8, i_j_fused % 8] = ...

        The fused loop is serial and unannotated; ``preserve_unit_iters`` is as in :meth:`split`.

        Raises:
            ScheduleError: no loops, a repeated loop, a loop that is not the only child
                of the previous one, non-constant bounds, or a non-zero minimum.
        """
        fname, nodes = self._distinct_loops(loops, "fuse")
        names = [n.loop_var.name for n in nodes]
        for outer, inner in itertools.pairwise(nodes):
            if outer.body is inner:
                continue
            where = self._where_is(fname, inner, outer)
            raise ScheduleError(
                f"fuse needs each loop to be the only child of the previous one (a chain "
                f"{' > '.join(names)}); but loop {inner.loop_var.name} {where}"
            )
        extents = []
        for node in nodes:
            extents.append(_const_extent(node, "fuse"))
            if node.min.value != 0:
                raise ScheduleError(
                    f"fuse needs loops starting at 0, loop {node.loop_var.name} starts at "
                    f"{node.min}"
                )
        dtype = nodes[0].loop_var.dtype
        fused = Var("_".join(names) + "_fused", dtype)
        vmap: dict[Var, PrimExpr] = {}
        total = math.prod(extents)
        stride = 1
        for node, e in zip(reversed(nodes), reversed(extents)):
            if e == 1:
                vmap[node.loop_var] = const(0, dtype)
            else:  # the outermost digit (outside it only unit loops) needs no modulo
                q = fused if stride == 1 else fused // stride
                vmap[node.loop_var] = q if stride * e == total else q % e
            stride *= e
        outer = {
            **self._outer_doms(fname, nodes[0]),
            fused: Range(const(0, dtype), const(total, dtype)),
        }
        old_ranges = {n.loop_var: Range(n.min, n.extent) for n in nodes}
        body = LoopVarRewriter(
            vmap,
            old_ranges,
            outer,
            None,
            bool(preserve_unit_iters),
            affine_memo(self.state),
            digit_values=True,
            simplified=bindings_memo(self.state),
        ).visit(nodes[-1].body)
        new = For(fused, const(0, dtype), const(total, dtype), ForKind.SERIAL, body)
        self.state.replace(fname, {nodes[0]: new})
        out = self._new_loop_rv(fname, fused)
        self._record("Fuse", list(loops), [bool(preserve_unit_iters)], [out])
        return out

    def _where_is(self, fname: str, inner: For, outer: For) -> str:
        """Describe why ``inner`` is not the direct only child of ``outer``."""
        ancestors = list(self.state.ancestors(fname, inner))
        if not any(a is outer for a in ancestors):
            return f"is not inside loop {outer.loop_var.name}"
        if isinstance(ancestors[0], SeqStmt) and self.state.parent(fname, ancestors[0]) is outer:
            return f"has siblings under loop {outer.loop_var.name}"
        return f"is not directly nested in loop {outer.loop_var.name}"

    @atomic
    def reorder(self, *ordered_loops: LoopRV) -> None:
        """Reorder loops of one perfectly nested chain into the given order.

        Loops of the chain that are not given keep their positions::

            for i, j, k in T.grid(...):    reorder(k, i)    for k, j, i in T.grid(...):

        Raises:
            ScheduleError: a loop given twice, loops not on one chain (in different
                subtrees), a nest between them that is not perfectly nested, bounds that
                depend on another loop of the chain, or blocks below with non-affine
                bindings or iteration kinds other than data-parallel and reduction.
        """
        fname, nodes = self._distinct_loops(ordered_loops, "reorder")
        above = {id(n): self.state.loops_above(fname, n) for n in nodes}
        by_depth = sorted(nodes, key=lambda n: len(above[id(n)]))
        for a, b in itertools.pairwise(by_depth):
            if not any(x is a for x in above[id(b)]):
                raise ScheduleError(
                    f"reorder needs loops on one chain, but loops {a.loop_var.name} and "
                    f"{b.loop_var.name} are in different subtrees (neither contains the other)"
                )
        top, bottom = by_depth[0], by_depth[-1]
        chain_above_bottom = above[id(bottom)]
        start = next(i for i, x in enumerate(chain_above_bottom) if x is top)
        path = chain_above_bottom[start:] + [bottom]
        for outer, inner in itertools.pairwise(path):
            if outer.body is not inner:
                raise ScheduleError(
                    f"reorder needs the loops from {top.loop_var.name} to {bottom.loop_var.name} "
                    f"to be perfectly nested, but loop {outer.loop_var.name} has other "
                    "statements besides loop " + inner.loop_var.name
                )
        path_vars = {lp.loop_var for lp in path}
        for lp in path:
            if expr_vars((lp.min, lp.extent)) & path_vars:
                raise ScheduleError(
                    f"reorder: the bounds of loop {lp.loop_var.name} ({lp.min}, {lp.extent}) "
                    "depend on another loop of the reordered nest"
                )
        given = {id(n) for n in nodes}
        queue = iter(nodes)
        new_path = [next(queue) if id(lp) in given else lp for lp in path]
        moved = [old for old, new in zip(path, new_path) if old is not new]
        self._check_reorderable_blocks(fname, top, moved)
        stmt: Stmt = bottom.body
        for lp in reversed(new_path):
            stmt = dataclasses.replace(lp, body=stmt)
        self.state.replace(fname, {top: stmt})
        self._record("Reorder", list(ordered_loops), [], [])

    def _check_reorderable_blocks(self, fname: str, top: For, moved: list[For]) -> None:
        for realize in self.state.child_block_realizes(top):
            block = realize.block
            _check_no_mixed_loop_moves(realize, moved)
            for iv in block.iter_vars:
                if iv.iter_type not in (IterType.DATA_PAR, IterType.COMM_REDUCE):
                    raise ScheduleError(
                        f"reorder: block {block.name_hint!r} has iter var {iv.var.name} of kind "
                        f"{iv.iter_type.name}; only data-parallel and reduction blocks can have "
                        "their loops reordered"
                    )
            check_affine_binding(self.state, fname, realize, "reorder")

    @atomic
    def add_unit_loop(self, block_or_loop: BlockRV | LoopRV) -> LoopRV:
        """Wrap a block or loop in a new loop ``for u in range(1)`` and return that loop."""
        if isinstance(block_or_loop, LoopRV):
            fname, node = self._loop(block_or_loop)
        else:
            fname, node = self._block(block_or_loop)
            if self.state.parent(fname, node) is None:
                raise ScheduleError(
                    f"add_unit_loop: block {node.block.name_hint!r} is the root block of "
                    f"function {fname!r}; a loop cannot wrap it"
                )
        u = Var("u", "int32")
        new = For(u, const(0, "int32"), const(1, "int32"), ForKind.SERIAL, node)
        self.state.replace(fname, {node: new})
        out = self._new_loop_rv(fname, u)
        self._record("AddUnitLoop", [block_or_loop], [], [out])
        return out


register_inst_kind(
    InstructionKind(
        "Split",
        "split",
        inputs=("loop", "factors[]"),
        attrs=("preserve_unit_iters",),
        returns_list=True,
    )
)
register_inst_kind(
    InstructionKind("Fuse", "fuse", inputs=("*loops",), attrs=("preserve_unit_iters",))
)
register_inst_kind(InstructionKind("Reorder", "reorder", inputs=("*ordered_loops",)))
register_inst_kind(InstructionKind("AddUnitLoop", "add_unit_loop", inputs=("block_or_loop",)))
