"""Primitives: compute_inline, reverse_compute_inline.

``compute_inline`` removes an element-wise producer and substitutes its expression at
every place its buffer is loaded; ``reverse_compute_inline`` removes an element-wise
consumer and makes its producer store the consumer's expression instead.
"""

from __future__ import annotations

import dataclasses

from ...tir import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    IterType,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
)
from ...tir.arith import Analyzer
from ...tir.functor import Mutator, collect_vars, substitute
from ..analysis import (
    allocation_site,
    buffer_loads,
    buffers_of,
    is_leaf_block,
    load_regions,
    relax_region,
    scope_blocks,
    union_regions,
    writers_in_scope,
)
from ..base import ScheduleBase, atomic
from ..edit import removal_target, remove_stmt
from ..error import NotInlinableError, ScheduleError
from ..instruction import InstructionKind, register_inst_kind
from ..rv import BlockRV
from ..state import ScheduleState

# ----------------------------------------------------------------------------- checks


def _spatial_store(realize: BlockRealize, primitive: str, role: str) -> BufferStore:
    """The block's single BufferStore, after checking the block is a spatial leaf."""
    b = realize.block
    name = b.name_hint
    if not is_leaf_block(b):
        raise NotInlinableError(
            f"{primitive}: block {name!r} has nested blocks; only leaf blocks can be inlined"
        )
    if b.init is not None or any(iv.iter_type != IterType.DATA_PAR for iv in b.iter_vars):
        raise NotInlinableError(
            f"{primitive}: block {name!r} is a reduction; only spatial "
            f"blocks can be inlined ({role})"
        )
    if not isinstance(b.body, BufferStore):
        raise NotInlinableError(
            f"{primitive}: the body of block {name!r} must be a single BufferStore "
            f"`buf[v...] = expr`, got a {type(b.body).__name__}"
        )
    store = b.body
    if len(b.writes) != 1 or b.writes[0].buffer is not store.buffer:
        raise NotInlinableError(
            f"{primitive}: block {name!r} must write exactly the buffer it stores to "
            f"({store.buffer.name!r}); its writes are {[w.buffer.name for w in b.writes]}"
        )
    return store


def _index_vars(realize: BlockRealize, indices, what: str, primitive: str) -> list[Var]:
    """``indices`` as distinct iteration variables of the block, or an error."""
    b = realize.block
    ivars = {iv.var for iv in b.iter_vars}
    out: list[Var] = []
    for idx in indices:
        if not isinstance(idx, Var) or idx not in ivars or idx in out:
            shown = ", ".join(str(i) for i in indices)
            raise NotInlinableError(
                f"{primitive}: block {b.name_hint!r} {what} [{shown}]; each index must be a "
                "distinct iteration variable of the block"
            )
        out.append(idx)
    return out


def _check_value_vars(realize: BlockRealize, value, allowed: list[Var], primitive: str) -> None:
    ivars = {iv.var for iv in realize.block.iter_vars}
    extra = (collect_vars(value) & ivars) - set(allowed)
    if extra:
        raise NotInlinableError(
            f"{primitive}: the value stored by block {realize.block.name_hint!r} depends on "
            f"iteration variables {sorted(v.name for v in extra)} that do not index its output"
        )


def _check_intermediate(func: PrimFunc, buffer: Buffer, writer: str, primitive: str) -> None:
    if any(p is buffer for p in func.params):
        raise NotInlinableError(
            f"{primitive}: block {writer!r} writes the function output {buffer.name!r}; only "
            "intermediate buffers (allocated inside the function) can be inlined away"
        )
    if allocation_site(func, buffer) is None:
        raise NotInlinableError(
            f"{primitive}: buffer {buffer.name!r} written by block "
            f"{writer!r} is not allocated by any block"
        )


def _all_blocks(state: ScheduleState, fname: str) -> list[Block]:
    """Every block of the function, in program order."""
    return [r.block for r in state.index(fname).blocks.values()]


class _Rewriter(Mutator):
    """Replaces statements by identity, drops ``buffer`` from alloc_buffers, and lets
    subclasses rewrite loads."""

    def __init__(self, buffer: Buffer, replace: dict[int, Stmt] | None = None):
        self.buffer = buffer
        self.replace = replace or {}

    def visit(self, node):
        if isinstance(node, Stmt) and id(node) in self.replace:
            return self.replace[id(node)]
        return super().visit(node)

    def visit_Block(self, block: Block):
        new = self.generic_visit(block)
        if any(a is self.buffer for a in new.alloc_buffers):
            new = dataclasses.replace(
                new, alloc_buffers=tuple(a for a in new.alloc_buffers if a is not self.buffer)
            )
        return new


# ----------------------------------------------------------------------------- compute_inline


class _Inliner(_Rewriter):
    def __init__(self, buffer: Buffer, lhs: list[Var], value, value_regions):
        super().__init__(buffer)
        self.lhs = lhs
        self.value = value
        self.value_regions = value_regions

    def visit_BufferLoad(self, load: BufferLoad):
        indices = self.visit(load.indices)
        if load.buffer is self.buffer:
            return substitute(self.value, dict(zip(self.lhs, indices)))
        return load if indices is load.indices else BufferLoad(load.buffer, indices)

    def visit_Block(self, block: Block):
        new = super().visit_Block(block)
        if not any(r.buffer is self.buffer for r in new.reads):
            return new
        ana = Analyzer()
        reads: list[BufferRegion] = []
        for r in new.reads:
            if r.buffer is not self.buffer:
                reads.append(r)
                continue
            dom = dict(zip(self.lhs, r.region))
            reads.extend(relax_region(self.value_regions, None, dom, ana))
        return dataclasses.replace(new, reads=tuple(union_regions(reads, ana)))


def check_compute_inline(
    state: ScheduleState, fname: str, realize: BlockRealize, primitive: str = "compute_inline"
) -> tuple[BufferStore, list[Var]]:
    """Check that ``realize``'s block can be inlined; its store and index variables."""
    func = state.func(fname)
    name = realize.block.name_hint
    scope_blocks(state, fname, realize)  # raises for the root block
    store = _spatial_store(realize, primitive, "the producer")
    buf = store.buffer
    lhs = _index_vars(realize, store.indices, f"stores {buf.name} at", primitive)
    _check_value_vars(realize, store.value, lhs, primitive)
    if buffer_loads(store.value, buf):
        raise NotInlinableError(
            f"{primitive}: block {name!r} reads the buffer {buf.name!r} it writes"
        )
    _check_intermediate(func, buf, name, primitive)
    others = [
        b.name_hint
        for b in _all_blocks(state, fname)
        if b is not realize.block and any(w.buffer is buf for w in b.writes)
    ]
    if others:
        raise NotInlinableError(
            f"{primitive}: buffer {buf.name!r} is also written by blocks "
            f"{others}; only a block that is its only writer can be inlined"
        )
    return store, lhs


def can_compute_inline(state: ScheduleState, fname: str, realize: BlockRealize) -> bool:
    """Whether compute_inline of the block would succeed (without building the result)."""
    try:
        check_compute_inline(state, fname, realize)
    except ScheduleError:
        return False
    # the block (or its loops) must leave a sequence that keeps other statements
    parent = state.parent(fname, removal_target(state, fname, realize))
    return isinstance(parent, SeqStmt) and len(parent.seq) > 1


def plan_compute_inline(
    state: ScheduleState, fname: str, realize: BlockRealize, primitive: str = "compute_inline"
) -> PrimFunc:
    """The function with ``realize``'s block inlined into its consumers (checks first)."""
    store, lhs = check_compute_inline(state, fname, realize, primitive)
    func = state.func(fname)
    body = remove_stmt(func.body, removal_target(state, fname, realize))
    regions = load_regions(store.value)
    new_body = _Inliner(store.buffer, lhs, store.value, regions).visit(body)
    return func.with_body(new_body)


# ----------------------------------------------------------------------------- reverse


def _single_producer(blocks, realize, primitive) -> tuple[BlockRealize, Buffer]:
    """The one block of the scope producing what ``realize`` reads, and that buffer."""
    cname = realize.block.name_hint
    prod_bufs = [
        b
        for b in buffers_of(realize.block.reads)
        if any(w is not realize for w in writers_in_scope(blocks, b))
    ]
    prods = {id(w): w for b in prod_bufs for w in writers_in_scope(blocks, b) if w is not realize}
    if len(prods) != 1 or len(prod_bufs) != 1:
        raise NotInlinableError(
            f"{primitive}: block {cname!r} must read exactly one buffer produced in its scope, "
            f"by a single block; it reads {[b.name for b in prod_bufs]} produced by "
            f"{[p.block.name_hint for p in prods.values()]}"
        )
    producer = next(iter(prods.values()))
    if blocks.index(producer) > blocks.index(realize):
        raise NotInlinableError(
            f"{primitive}: producer {producer.block.name_hint!r} comes after block {cname!r}"
        )
    return producer, prod_bufs[0]


def _bijective_load(realize, producer, c_store, buf, p_idx, primitive) -> list[Var]:
    """The consumer's iteration variables in the order they index ``buf``; each load of
    ``buf`` uses them, and they cover exactly the producer's domain."""
    cname, pname = realize.block.name_hint, producer.block.name_hint
    loads = buffer_loads(c_store, buf)
    if not loads:
        raise NotInlinableError(
            f"{primitive}: block {cname!r} declares a read of {buf.name!r} but never loads it"
        )
    c_idx = _index_vars(realize, loads[0].indices, f"loads {buf.name} at", primitive)
    for ld in loads[1:]:
        if any(a is not b for a, b in zip(ld.indices, c_idx)):
            raise NotInlinableError(
                f"{primitive}: block {cname!r} loads {buf.name!r} at "
                "different indices; it must load one element per iteration"
            )
    if len(c_idx) != len(realize.block.iter_vars):
        raise NotInlinableError(
            f"{primitive}: block {cname!r} has {len(realize.block.iter_vars)} iteration variables"
            f" but indexes {buf.name!r} with {len(c_idx)}; the index must be a bijection"
        )
    ana = Analyzer()
    c_dom = {iv.var: iv.dom for iv in realize.block.iter_vars}
    p_dom = {iv.var: iv.dom for iv in producer.block.iter_vars}
    for d, (cv, pv) in enumerate(zip(c_idx, p_idx)):
        cd, pd = c_dom[cv], p_dom[pv]
        if not (ana.can_prove_equal(cd.min, pd.min) and ana.can_prove_equal(cd.extent, pd.extent)):
            raise NotInlinableError(
                f"{primitive}: dimension {d} of {buf.name!r}: block {cname!r} iterates "
                f"{cv.name} over [{cd.min}, {cd.min} + {cd.extent}) but producer {pname!r} writes"
                f" [{pd.min}, {pd.min} + {pd.extent}); the domains must match"
            )
    return c_idx


def _check_output_untouched(blocks, producer, realize, out_buf, primitive) -> None:
    """The consumer's store moves up to the producer: nothing in between (nor the producer)
    may use its output. Its other inputs are not written in the scope (single producer)."""
    between = blocks[blocks.index(producer) + 1 : blocks.index(realize)]
    touch = [
        r.block.name_hint
        for r in between
        if any(x.buffer is out_buf for x in (*r.block.reads, *r.block.writes))
    ]
    if any(r.buffer is out_buf for r in producer.block.reads):
        touch.append(producer.block.name_hint)
    if touch:
        raise NotInlinableError(
            f"{primitive}: blocks {touch} access {out_buf.name!r}, the output of "
            f"{realize.block.name_hint!r}, between the producer and the consumer"
        )


def plan_reverse_compute_inline(
    state: ScheduleState,
    fname: str,
    realize: BlockRealize,
    primitive: str = "reverse_compute_inline",
) -> PrimFunc:
    """The function with ``realize``'s block merged into its producer (checks first)."""
    func = state.func(fname)
    cname = realize.block.name_hint
    blocks = scope_blocks(state, fname, realize)
    c_store = _spatial_store(realize, primitive, "the consumer")
    out_buf = c_store.buffer
    producer, buf = _single_producer(blocks, realize, primitive)
    pname = producer.block.name_hint
    p_store = _spatial_store(producer, primitive, "the producer")
    p_idx = _index_vars(producer, p_store.indices, f"stores {buf.name} at", primitive)
    _check_value_vars(producer, p_store.value, p_idx, primitive)
    _check_intermediate(func, buf, pname, primitive)
    readers = [
        b.name_hint
        for b in _all_blocks(state, fname)
        if b is not realize.block and any(r.buffer is buf for r in b.reads)
    ]
    if readers:
        raise NotInlinableError(
            f"{primitive}: buffer {buf.name!r} is also read by blocks "
            f"{readers}; block {cname!r} must be its only consumer"
        )
    c_idx = _bijective_load(realize, producer, c_store, buf, p_idx, primitive)
    _check_output_untouched(blocks, producer, realize, out_buf, primitive)
    # the producer now stores the consumer's value, in its own variables
    vmap = dict(zip(c_idx, p_idx))

    class _Fold(Mutator):
        def visit_BufferLoad(self, load: BufferLoad):
            if load.buffer is buf:
                return p_store.value  # already in the producer's variables
            return self.generic_visit(load)

        def visit_Var(self, v: Var):
            return vmap.get(v, v)

    other_reads = [substitute(r, vmap) for r in realize.block.reads if r.buffer is not buf]
    new_block = dataclasses.replace(
        producer.block,
        body=BufferStore(
            out_buf,
            _Fold().visit(c_store.value),
            tuple(substitute(i, vmap) for i in c_store.indices),
        ),
        reads=tuple(union_regions(list(producer.block.reads) + other_reads, Analyzer())),
        writes=tuple(substitute(w, vmap) for w in realize.block.writes),
    )
    body = remove_stmt(func.body, removal_target(state, fname, realize))
    new_producer = dataclasses.replace(producer, block=new_block)
    return func.with_body(_Rewriter(buf, {id(producer): new_producer}).visit(body))


# ----------------------------------------------------------------------------- the mixin


class ComputeInlineMixin(ScheduleBase):
    def _do_compute_inline(self, block: BlockRV) -> None:
        fname, realize = self._block(block)
        self.state.set_func(fname, plan_compute_inline(self.state, fname, realize))

    def _do_reverse_compute_inline(self, block: BlockRV) -> None:
        fname, realize = self._block(block)
        self.state.set_func(fname, plan_reverse_compute_inline(self.state, fname, realize))

    @atomic
    def compute_inline(self, block: BlockRV) -> None:
        """Inline an element-wise producer into every load of its buffer.

        Before::

            for i in range(8):
                with block("B"):  B[vi] = A[vi] * 2.0
            for i in range(8):
                with block("C"):  C[vi] = B[vi] + 1.0

        After ``compute_inline(B)``::

            for i in range(8):
                with block("C"):  C[vi] = A[vi] * 2.0 + 1.0

        Raises:
            NotInlinableError: the block is a reduction, is not one store
                ``B[v...] = f(...)`` with distinct iteration variables as indices, writes
                a function output, or is not the only writer of its buffer.
        """
        self._do_compute_inline(block)
        self._record("ComputeInline", [block], [], [])

    @atomic
    def reverse_compute_inline(self, block: BlockRV) -> None:
        """Inline an element-wise consumer into its single producer.

        Before::

            for i in range(8):
                with block("B"):  B[vi] = A[vi] * 2.0
            for i in range(8):
                with block("C"):  C[vi] = B[vi] + 1.0

        After ``reverse_compute_inline(C)``::

            for i in range(8):
                with block("B"):  C[vi] = A[vi] * 2.0 + 1.0

        Raises:
            NotInlinableError: the consumer is not a spatial single store, does not read
                its producer's buffer at one bijective index, the producer is not an
                element-wise block, or other blocks use the buffers in between.
        """
        self._do_reverse_compute_inline(block)
        self._record("ReverseComputeInline", [block], [], [])


register_inst_kind(InstructionKind("ComputeInline", "compute_inline", inputs=("block",)))
register_inst_kind(
    InstructionKind("ReverseComputeInline", "reverse_compute_inline", inputs=("block",))
)
