"""Reduction primitives: ``rfactor`` and ``decompose_reduction``.

Both work on reduction blocks: an ``init`` that stores the reducer's identity and a
body ``C[idx] = op(C[idx], x)`` with ``op`` one of ``+``, ``*``, ``max``, ``min``
(recognised from the update and checked against the init value).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from ...tir import (
    Add,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    IterType,
    IterVar,
    Max,
    Min,
    Mul,
    PrimExpr,
    Range,
    Stmt,
    Var,
    max_value,
    min_value,
)
from ...tir.expr import FloatImm, IntImm, const, is_const_int
from ...tir.functor import collect_vars, substitute
from ...tir.structural import structural_equal
from ..affine import check_affine_binding
from ..analysis import (
    and_all,
    buffer_loads,
    conjuncts,
    iter_kinds_by_var,
    not_reduction_reason,
    scope_blocks,
    subtree_blocks,
)
from ..base import ScheduleBase, atomic
from ..edit import (
    StmtEditor,
    add_alloc,
    child_index,
    enclosing_loop_or_block,
    insert_child,
    unique_block_name,
)
from ..error import FactorAxisError, LoopPositionError, LoopPropertyError, NotReductionError
from ..instruction import InstructionKind, register_inst_kind
from ..rv import BlockRV, LoopRV

# ----------------------------------------------------------------------------- reducers

_REDUCERS: dict[type, tuple[str, Callable[[str], PrimExpr]]] = {
    Add: ("sum", lambda dt: const(0, dt)),
    Mul: ("product", lambda dt: const(1, dt)),
    Max: ("max", min_value),
    Min: ("min", max_value),
}


@dataclass(frozen=True)
class Reduction:
    """``buffer[indices] = op(buffer[indices], source)`` with ``identity`` as the init."""

    op: type
    buffer: Buffer
    indices: tuple[PrimExpr, ...]
    source: PrimExpr
    identity: PrimExpr

    def update(self, buffer: Buffer, indices, source: PrimExpr) -> BufferStore:
        return BufferStore(buffer, self.op(buffer.load(indices), source), indices)

    def init(self, buffer: Buffer, indices) -> BufferStore:
        return BufferStore(buffer, self.identity, indices)


def _same(a, b) -> bool:
    return len(a) == len(b) and all(structural_equal(x, y) for x, y in zip(a, b))


def _const_value(e: PrimExpr):
    return e.value if isinstance(e, (IntImm, FloatImm)) else None


def match_reduction(block: Block, primitive: str) -> Reduction:
    """The reducer of ``block``, or a :class:`NotReductionError` saying what does not match."""
    name = block.name_hint
    expect = (
        "expected an init C[idx] = identity and a body C[idx] = op(C[idx], x) with op "
        "one of +, *, max, min"
    )
    body, init = block.body, block.init
    if not isinstance(body, BufferStore) or not isinstance(init, BufferStore):
        raise NotReductionError(
            f"{primitive}: block {name!r} is not a recognised reduction: {expect}"
        )
    op = type(body.value)
    op = next((k for k in _REDUCERS if issubclass(op, k)), None)
    if op is None:
        raise NotReductionError(
            f"{primitive}: block {name!r} updates {body.buffer.name} with "
            f"{body.value}, not a commutative reducer: {expect}"
        )
    buf, idx = body.buffer, body.indices
    a, b = body.value.a, body.value.b
    if isinstance(a, BufferLoad) and a.buffer is buf and _same(a.indices, idx):
        source = b
    elif isinstance(b, BufferLoad) and b.buffer is buf and _same(b.indices, idx):
        source = a
    else:
        raise NotReductionError(
            f"{primitive}: block {name!r} does not combine "
            f"{buf.name}[{', '.join(map(str, idx))}] with a value: {expect}"
        )
    if buffer_loads(source, buf):
        raise NotReductionError(
            f"{primitive}: the reduced value of block {name!r} reads {buf.name} again: {expect}"
        )
    if init.buffer is not buf or not _same(init.indices, idx):
        raise NotReductionError(
            f"{primitive}: the init of block {name!r} does not store to "
            f"{buf.name}[{', '.join(map(str, idx))}]: {expect}"
        )
    kind, identity = _REDUCERS[op]
    ident = identity(buf.dtype)
    if _const_value(init.value) is None or _const_value(init.value) != _const_value(ident):
        raise NotReductionError(
            f"{primitive}: block {name!r} is a {kind} but its init stores "
            f"{init.value}, not the identity {ident}"
        )
    return Reduction(op, buf, tuple(idx), source, ident)


# ----------------------------------------------------------------------------- helpers


def _keep_conjuncts(pred: PrimExpr, dropped: set[Var], vmap: dict) -> PrimExpr:
    """The conjuncts of ``pred`` free of ``dropped`` variables, with ``vmap`` applied."""
    return and_all(substitute(c, vmap) for c in conjuncts(pred) if not collect_vars(c) & dropped)


def _loop_uses(realize: BlockRealize, loops: list[For]) -> dict[Var, set[IterType]]:
    """For each loop, the kinds of the iteration variables whose bindings use it."""
    kinds = iter_kinds_by_var(realize)
    return {lp.loop_var: kinds.get(lp.loop_var, set()) for lp in loops}


def _fresh(iv: IterVar, suffix: str = "") -> IterVar:
    return IterVar(Var(iv.var.name + suffix, iv.var.dtype), iv.dom, iv.iter_type, iv.thread_tag)


def _point(buffer: Buffer, indices) -> BufferRegion:
    return BufferRegion(buffer, tuple(Range(i, const(1, i.dtype)) for i in indices))


# ----------------------------------------------------------------------------- the mixin


class ReductionMixin(ScheduleBase):
    def _check_reduction_block(self, fname: str, realize: BlockRealize, primitive: str) -> None:
        if self.state.scope_realize(fname, realize) is None:
            raise NotReductionError(f"{primitive}: the root block is not a reduction")
        why = not_reduction_reason(scope_blocks(self.state, fname, realize), realize)
        if why is not None:
            raise NotReductionError(
                f"{primitive}: block {realize.block.name_hint!r} is not a reduction block: {why}"
            )

    @atomic
    def rfactor(self, loop: LoopRV, factor_axis: int) -> BlockRV:
        """Factor a reduction over ``loop`` out into a buffer with one more dimension::

            for i, k0, k1 in T.grid(8, 4, 4):          for i, k0, k1 in T.grid(8, 4, 4):
                with block("C"):       # vk = k0*4+k1      with block("C_rf"):  # vk1 spatial
                    C[vi] += A[vi, vk]         ->              C_rf[vi, vk1] += A[vi, vk0*4+vk1]
                                                       for i, k1 in T.grid(8, 4):
                                                           with block("C"):     # vk1 reduction
                                                               C[vi] += C_rf[vi, vk1]

        ``factor_axis`` places the new dimension (negative counts from the end). Returns the
        rfactor block ``<name>_rf``; the original name now denotes the write-back block.

        Raises:
            ScheduleError: not exactly one block under the loop, a block that is not a
                sum/product/max/min reduction, a loop bound to data-parallel variables or to
                none, a reduction loop shared with other blocks, or a bad factor_axis.
        """
        fname, rf_loop = self._loop(loop)
        lname = rf_loop.loop_var.name
        blocks = subtree_blocks(rf_loop)
        if len(blocks) != 1:
            raise LoopPropertyError(
                f"rfactor: loop {lname} must hold exactly one block, the reduction block; it "
                f"holds {[b.block.name_hint for b in blocks]}"
            )
        realize = blocks[0]
        block = realize.block
        self._check_reduction_block(fname, realize, "rfactor")
        red = match_reduction(block, "rfactor")
        check_affine_binding(self.state, fname, realize, "rfactor")
        loops = self.state.loops_above(fname, realize)
        uses = _loop_uses(realize, loops)
        if IterType.DATA_PAR in uses[rf_loop.loop_var]:
            raise LoopPropertyError(
                f"rfactor: loop {lname} is bound to a data-parallel iter var "
                f"of block {block.name_hint!r}; rfactor needs a reduction loop"
            )
        if IterType.COMM_REDUCE not in uses[rf_loop.loop_var]:
            raise LoopPropertyError(
                f"rfactor: loop {lname} is not bound to any reduction iter "
                f"var of block {block.name_hint!r}"
            )
        red_loops = [lp for lp in loops if IterType.COMM_REDUCE in uses[lp.loop_var]]
        for lp in red_loops:
            if IterType.DATA_PAR in uses[lp.loop_var]:
                raise LoopPropertyError(
                    f"rfactor: loop {lp.loop_var.name} is bound to both data-parallel and "
                    f"reduction iter vars of block {block.name_hint!r}"
                )
        top = self._exclusive_top(fname, realize, loops)
        nest = loops[next(i for i, lp in enumerate(loops) if lp is top) :]
        for lp in red_loops:
            if not any(lp is x for x in nest):
                raise LoopPropertyError(
                    f"rfactor: reduction loop {lp.loop_var.name} of block {block.name_hint!r} "
                    "also holds other blocks; rfactor needs the reduction loops to hold only it"
                )
        ndim = len(red.indices)
        axis = given_axis = self._int(factor_axis)
        if not -(ndim + 1) <= axis <= ndim:
            raise FactorAxisError(
                f"rfactor: factor_axis {axis} is out of range [{-(ndim + 1)}, "
                f"{ndim}] for buffer {red.buffer.name!r} of {ndim} dimensions"
            )
        axis = axis + ndim + 1 if axis < 0 else axis

        # the rfactor block: one iter var per reduction loop, the rf loop's spatial
        new_of_loop = {
            lp.loop_var: IterVar(
                Var("v" + lp.loop_var.name, lp.loop_var.dtype),
                Range(lp.min, lp.extent),
                IterType.DATA_PAR if lp is rf_loop else IterType.COMM_REDUCE,
            )
            for lp in red_loops
        }
        lvmap = {lv: iv.var for lv, iv in new_of_loop.items()}
        vmap = {
            iv.var: substitute(v, lvmap)
            for iv, v in zip(block.iter_vars, realize.iter_values)
            if iv.iter_type == IterType.COMM_REDUCE
        }
        spatial = [
            (iv, v)
            for iv, v in zip(block.iter_vars, realize.iter_values)
            if iv.iter_type == IterType.DATA_PAR
        ]
        rf_iv = new_of_loop[rf_loop.loop_var]
        rf_index = rf_iv.var - rf_loop.min if not is_const_int(rf_loop.min, 0) else rf_iv.var
        rf_shape = list(red.buffer.shape)
        rf_shape.insert(axis, rf_loop.extent)
        rf_name = unique_block_name(self.state, fname, f"{block.name_hint}_rf")
        rf_buf = Buffer(
            f"{red.buffer.name}_rf", tuple(rf_shape), red.buffer.dtype, red.buffer.scope
        )
        idx = list(red.indices)
        rf_idx = tuple(idx[:axis] + [rf_index] + idx[axis:])
        reads_self = wb_reads_self = any(r.buffer is red.buffer for r in block.reads)
        other_reads = [substitute(r, vmap) for r in block.reads if r.buffer is not red.buffer]
        rf_source = substitute(red.source, vmap)
        if len(red_loops) > 1:
            rf_body, rf_init = red.update(rf_buf, rf_idx, rf_source), red.init(rf_buf, rf_idx)
        else:  # nothing left to reduce in the rfactor block: a plain store
            rf_body, rf_init, reads_self = BufferStore(rf_buf, rf_source, rf_idx), None, False
        rf_block = Block(
            iter_vars=(
                rf_iv,
                *(iv for iv, _ in spatial),
                *(new_of_loop[lp.loop_var] for lp in red_loops if lp is not rf_loop),
            ),
            reads=tuple(([_point(rf_buf, rf_idx)] if reads_self else []) + other_reads),
            writes=(_point(rf_buf, rf_idx),),
            name_hint=rf_name,
            body=rf_body,
            init=rf_init,
            annotations=block.annotations,
        )
        rf_values = (
            rf_loop.loop_var,
            *(v for _, v in spatial),
            *(lp.loop_var for lp in red_loops if lp is not rf_loop),
        )
        rf_realize = BlockRealize(rf_values, realize.predicate, rf_block)

        # the write-back block, in its own nest of the spatial loops and the rf loop
        wb_loops = [lp for lp in nest if lp is rf_loop or IterType.DATA_PAR in uses[lp.loop_var]]
        new_loop_var = {lp.loop_var: Var(lp.loop_var.name, lp.loop_var.dtype) for lp in wb_loops}
        dropped = {lp.loop_var for lp in nest} - set(new_loop_var)
        wb_spatial = [_fresh(iv) for iv, _ in spatial]
        wb_rf = IterVar(
            Var("v" + lname, rf_loop.loop_var.dtype),
            Range(rf_loop.min, rf_loop.extent),
            IterType.COMM_REDUCE,
        )
        svmap = {iv.var: new.var for (iv, _), new in zip(spatial, wb_spatial)}
        wb_idx = tuple(substitute(i, svmap) for i in red.indices)
        wb_rf_index = wb_rf.var - rf_loop.min if not is_const_int(rf_loop.min, 0) else wb_rf.var
        wb_rf_idx = tuple(list(wb_idx[:axis]) + [wb_rf_index] + list(wb_idx[axis:]))
        wb_writes = tuple(substitute(w, svmap) for w in block.writes)
        wb_block = Block(
            iter_vars=(wb_rf, *wb_spatial),
            reads=tuple(
                ([_point(red.buffer, wb_idx)] if wb_reads_self else [])
                + [_point(rf_buf, wb_rf_idx)]
            ),
            writes=wb_writes,
            name_hint=block.name_hint,
            body=red.update(red.buffer, wb_idx, rf_buf.load(wb_rf_idx)),
            init=red.init(red.buffer, wb_idx),
            annotations=block.annotations,
        )
        wb_values = (
            new_loop_var[rf_loop.loop_var],
            *(substitute(v, new_loop_var) for _, v in spatial),
        )
        wb_pred = _keep_conjuncts(realize.predicate, dropped, new_loop_var)
        wb: Stmt = BlockRealize(wb_values, wb_pred, wb_block)
        for lp in reversed(wb_loops):
            wb = dataclasses.replace(lp, loop_var=new_loop_var[lp.loop_var], body=wb)

        scope = self.state.scope_realize(fname, realize)
        parent = enclosing_loop_or_block(self.state, fname, self.state.parent(fname, top))
        pos = child_index(self.state, fname, parent, top) + 1
        edit = StmtEditor().add(realize, lambda _: rf_realize)
        edit.add(parent, insert_child(pos, wb)).add(scope.block, add_alloc(rf_buf))
        self.state.replace(fname, {scope.block: edit.run(scope.block)})
        out = self._new_block_rv(fname, rf_name)
        self._record("RFactor", [loop], [given_axis], [out])
        return out

    def _exclusive_top(self, fname: str, realize: BlockRealize, loops: list[For]) -> For:
        """The outermost loop above ``realize`` whose subtree holds no other block."""
        top = None
        for lp in reversed(loops):
            blocks = subtree_blocks(lp)
            if len(blocks) != 1:
                break
            top = lp
        assert top is not None  # the rf loop itself qualifies
        return top

    @atomic
    def decompose_reduction(self, block: BlockRV, loop: LoopRV) -> BlockRV:
        """Move a reduction block's init into its own block ``<name>_init`` before ``loop``::

            for i, k in T.grid(8, 4):              for i in range(8):
                with block("C"):                       with block("C_init"):
                    with init(): C[vi] = 0     ->          C[vi] = 0
                    C[vi] += A[vi, vk]                 for k in range(4):
                                                           with block("C"):  # no init
                                                               C[vi] += A[vi, vk]

        The init block's loops are copies (suffix ``_init``) of the loops from ``loop`` down
        to the block that feed its data-parallel iter vars; the block loses its init.

        Raises:
            ScheduleError: ``loop`` is not above the block, the block is not a reduction,
                a loop above ``loop`` feeds a reduction iter var, or a loop under it feeds
                both kinds.
        """
        fname, realize = self._block(block)
        lfname, loop_node = self._loop(loop)
        b = realize.block
        loops = self.state.loops_above(fname, realize)
        pos = next((i for i, lp in enumerate(loops) if lp is loop_node), None)
        if lfname != fname or pos is None:
            raise LoopPositionError(
                f"decompose_reduction: loop {loop_node.loop_var.name} is not an ancestor of "
                f"block {b.name_hint!r} (within its scope)"
            )
        self._check_reduction_block(fname, realize, "decompose_reduction")
        scope = self.state.scope_realize(fname, realize)
        uses = _loop_uses(realize, loops)
        for lp in loops[:pos]:
            if IterType.COMM_REDUCE in uses[lp.loop_var]:
                raise LoopPropertyError(
                    f"decompose_reduction: loop {lp.loop_var.name}, above loop "
                    f"{loop_node.loop_var.name}, feeds a reduction iter var of block "
                    f"{b.name_hint!r}; the init must go above every reduction loop, so pass "
                    f"loop {lp.loop_var.name} or a loop above it"
                )
        chosen = []
        for lp in loops[pos:]:
            kinds = uses[lp.loop_var]
            if IterType.DATA_PAR in kinds and IterType.COMM_REDUCE in kinds:
                raise LoopPropertyError(
                    f"decompose_reduction: loop {lp.loop_var.name} feeds both data-parallel and "
                    f"reduction iter vars of block {b.name_hint!r}"
                )
            if IterType.DATA_PAR in kinds:
                chosen.append(lp)
        new_lv = {lp.loop_var: Var(lp.loop_var.name + "_init", lp.loop_var.dtype) for lp in chosen}
        dropped = {lp.loop_var for lp in loops[pos:]} - set(new_lv)
        spatial = [
            (iv, v)
            for iv, v in zip(b.iter_vars, realize.iter_values)
            if iv.iter_type == IterType.DATA_PAR
        ]
        fresh = [_fresh(iv) for iv, _ in spatial]
        vmap = {iv.var: f.var for (iv, _), f in zip(spatial, fresh)}
        init_name = unique_block_name(self.state, fname, f"{b.name_hint}_init")
        init_block = Block(
            iter_vars=tuple(fresh),
            reads=(),
            writes=tuple(substitute(w, vmap) for w in b.writes),
            name_hint=init_name,
            body=substitute(b.init, vmap),
        )
        stmt: Stmt = BlockRealize(
            tuple(substitute(v, new_lv) for _, v in spatial),
            _keep_conjuncts(realize.predicate, dropped, new_lv),
            init_block,
        )
        for lp in reversed(chosen):
            stmt = dataclasses.replace(lp, loop_var=new_lv[lp.loop_var], body=stmt)
        parent = enclosing_loop_or_block(self.state, fname, self.state.parent(fname, loop_node))
        at = child_index(self.state, fname, parent, loop_node)
        edit = StmtEditor().add(b, lambda nb: dataclasses.replace(nb, init=None))
        edit.add(parent, insert_child(at, stmt))
        self.state.replace(fname, {scope.block: edit.run(scope.block)})
        out = self._new_block_rv(fname, init_name)
        self._record("DecomposeReduction", [block, loop], [], [out])
        return out


register_inst_kind(InstructionKind("RFactor", "rfactor", inputs=("loop",), attrs=("factor_axis",)))
register_inst_kind(
    InstructionKind("DecomposeReduction", "decompose_reduction", inputs=("block", "loop"))
)

__all__ = ["Reduction", "ReductionMixin", "match_reduction"]
