"""Pass: lower reductions whose loops are bound to ``threadIdx`` into a shared-memory tree.

A *cross-thread reduction* is a reduction block one of whose reduction iteration
variables is fed by a loop bound to ``threadIdx`` (what the CrossThreadReduction schedule
rule makes): the threads of a GPU block share one output element. On a GPU they cannot
all update it; instead each thread folds its own iterations into a register, the
partial results meet in shared memory, and a tree of halving steps combines them.

Before::

    for tx in T.thread_binding(8, "threadIdx.x"):
        for k0 in range(4):
            with T.block("red"):
                vi = T.axis.spatial(...)
                vk = T.axis.reduce(32, k0 * 8 + tx)
                with T.init(): red[vi] = -inf
                red[vi] = max(red[vi], X[vi, vk])

After::

    for tx in T.thread_binding(8, "threadIdx.x"):
        acc[0] = -inf
        for k0 in range(4):
            acc[0] = max(acc[0], X[vi, k0 * 8 + tx])
        part[tx] = acc[0]
        if tx < 4: part[tx] = max(part[tx], part[tx + 4])
        if tx < 2: part[tx] = max(part[tx], part[tx + 2])
        if tx < 1: part[tx] = max(part[tx], part[tx + 1])
        if tx == 0: red[vi] = part[0]

The barriers between the steps are inserted by ``insert_storage_sync`` (``part`` is a
``shared`` buffer, one slot per thread; ``acc`` is ``local``). The halving works for any
thread count: a step with ``n`` live slots folds the upper ``n // 2`` into the lower.

Supported: a block whose body is ``red[idx] = f(red[idx], value)`` for ``f`` one of
``+``, ``*``, ``max``, ``min``, with an ``init``, in a perfect nest of reduction (or unit)
loops holding exactly one ``threadIdx`` loop (which moves to the top of the nest: on a
GPU it is the thread's index), and no reduction loop outside that nest. Anything else
raises ``ValueError`` saying what.

Warp shuffles: when the reduction runs over ``threadIdx.x`` with a power-of-two extent
that is the whole launch extent of ``threadIdx.x``, at most a warp or a multiple of it,
and no thread of the block can skip the reduction (no enclosing branch, no enclosing
thread loop narrower than its launch), the halving steps are ``__shfl_down_sync``
exchanges between the lanes of a warp instead (:mod:`.warp_reduction`); shared memory
then only carries one partial per warp. Otherwise the shared-memory tree above is used.
"""

from __future__ import annotations

from ..buffer import Buffer
from ..expr import (
    EQ,
    LT,
    Add,
    And,
    BufferLoad,
    IntImm,
    Max,
    Min,
    Mul,
    PrimExpr,
    Var,
    const,
    logical_and,
)
from ..function import PrimFunc
from ..functor import collect_vars, post_order_visit, replace_fields, substitute
from ..stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferRegion,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    IterType,
    Range,
    SeqStmt,
    Stmt,
    seq,
)
from ..structural import structural_equal
from .warp_reduction import WARP_SIZE, warp_tree

__all__ = ["has_cross_thread_reduction", "lower_cross_thread_reduction"]

_COMBINERS = (Add, Mul, Max, Min)


def _is_thread(loop: For) -> bool:
    return loop.kind is ForKind.THREAD_BINDING and (loop.thread_binding or "").startswith(
        "threadIdx"
    )


def _is_bound(loop: For) -> bool:
    return loop.kind is ForKind.THREAD_BINDING and not (loop.thread_binding or "").startswith(
        "vthread"
    )


def _reduction_thread_loops(loops: list[For], realize: BlockRealize) -> list[For]:
    """The ``threadIdx`` loops among ``loops`` that feed a reduction iter var of the block."""
    red_vars: set[Var] = set()
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if iv.iter_type is IterType.COMM_REDUCE:
            red_vars |= collect_vars(value)
    return [lp for lp in loops if _is_thread(lp) and lp.loop_var in red_vars]


def has_cross_thread_reduction(func: PrimFunc) -> bool:
    """Whether a reduction iter var of some block that writes a non-``local`` buffer is
    fed by a ``threadIdx`` loop."""
    found = False

    def walk(s: Stmt, loops: list[For]) -> None:
        nonlocal found
        if found:
            return
        if isinstance(s, For):
            walk(s.body, [*loops, s])
        elif isinstance(s, BlockRealize):
            # a fold into a thread's own (local) accumulator is what this pass leaves
            shared = any(w.buffer.scope != "local" for w in s.block.writes)
            if shared and _reduction_thread_loops(loops, s):
                found = True
                return
            walk(s.block, loops)
        elif isinstance(s, Block):
            if s.init is not None:
                walk(s.init, loops)
            walk(s.body, loops)
        elif isinstance(s, SeqStmt):
            for x in s.seq:
                walk(x, loops)
        elif isinstance(s, (IfThenElse, Allocate)):
            for x in (getattr(s, "then_case", None), getattr(s, "else_case", None)):
                if x is not None:
                    walk(x, loops)
            if isinstance(s, Allocate):
                walk(s.body, loops)

    walk(func.body, [])
    return found


def lower_cross_thread_reduction(func: PrimFunc) -> PrimFunc:
    """Rewrite every cross-thread reduction of ``func`` (see the module docstring)."""
    if not has_cross_thread_reduction(func):
        return func
    out = func.with_body(_Rewriter(func).stmt(func.body, []))
    if has_cross_thread_reduction(out):
        raise ValueError(
            f"{func.attrs.get('global_symbol', 'main')}: a reduction bound to threadIdx is not "
            "a perfect nest of reduction loops down to its block; it cannot be lowered to a "
            "cross-thread reduction (keep only reduction loops between the thread loop and "
            "the block)"
        )
    return out


class _Rewriter:
    def __init__(self, func: PrimFunc) -> None:
        self.name = func.attrs.get("global_symbol", "main")
        self.count = 0
        self.launch: dict[str, int] = {}  # the thread extents of the current kernel
        self.divergent = 0  # enclosing branches (some threads may skip what is inside)

    def stmt(self, s: Stmt, loops: list[For]) -> Stmt:
        if isinstance(s, For):
            if _is_bound(s) and not any(_is_bound(lp) for lp in loops):
                self.launch = _launch_extents(s)  # a kernel starts here
            target = self._reduction_chain(s)
            if target is not None:
                return self._rewrite(*target, loops)
            return replace_fields(s, body=self.stmt(s.body, [*loops, s]))
        if isinstance(s, BlockRealize):
            guarded = not (isinstance(s.predicate, IntImm) and s.predicate.value)
            self.divergent += guarded
            try:
                return replace_fields(s, block=self.stmt(s.block, loops))
            finally:
                self.divergent -= guarded
        if isinstance(s, Block):
            return replace_fields(s, body=self.stmt(s.body, loops))
        if isinstance(s, SeqStmt):
            return SeqStmt(tuple(self.stmt(x, loops) for x in s.seq))
        if isinstance(s, IfThenElse):
            self.divergent += 1
            try:
                return replace_fields(
                    s,
                    then_case=self.stmt(s.then_case, loops),
                    else_case=None if s.else_case is None else self.stmt(s.else_case, loops),
                )
            finally:
                self.divergent -= 1
        if isinstance(s, Allocate):
            return replace_fields(s, body=self.stmt(s.body, loops))
        return s

    # ------------------------------------------------------------------------ matching
    def _reduction_chain(self, top: For) -> tuple[For, list[For], BlockRealize] | None:
        """When ``top`` heads a perfect nest down to a cross-thread reduction block in
        which every loop feeds only reduction variables (or is a unit loop): the thread
        loop, the other loops of the nest (outermost first) and the block."""
        chain: list[For] = []
        s: Stmt = top
        while isinstance(s, For):
            chain.append(s)
            s = s.body
        if not isinstance(s, BlockRealize):
            return None
        feeding = _reduction_thread_loops(chain, s)
        if not feeding:
            return None
        spatial: set[Var] = set()
        for iv, value in zip(s.block.iter_vars, s.iter_values):
            if iv.iter_type is not IterType.COMM_REDUCE:
                spatial |= collect_vars(value)
        for lp in chain:
            unit = isinstance(lp.extent, IntImm) and lp.extent.value == 1
            if lp.loop_var in spatial and not unit:
                return None  # the nest starts further down
        where = f"block {s.block.name_hint!r} of {self.name}"
        if len(feeding) > 1:
            raise ValueError(f"{where}: several threadIdx loops feed its reduction")
        others = [lp for lp in chain if lp is not feeding[0]]
        if any(lp.kind is ForKind.THREAD_BINDING for lp in others):
            raise ValueError(f"{where}: a thread-bound loop inside its cross-thread reduction")
        return feeding[0], others, s

    # ------------------------------------------------------------------------ rewriting
    def _rewrite(
        self, loop: For, inner: list[For], realize: BlockRealize, outer: list[For]
    ) -> Stmt:
        """The nest ``inner`` + ``loop`` around ``realize`` as a tree reduction, with the
        thread loop hoisted to the top of the nest: on a GPU it is the thread's index, not
        an iteration, and the reduction does not depend on the order of its loops."""
        block = realize.block
        where = f"block {block.name_hint!r} of {self.name}"
        reduce_vars: set[Var] = set()
        for iv, value in zip(block.iter_vars, realize.iter_values):
            if iv.iter_type is IterType.COMM_REDUCE:
                reduce_vars |= collect_vars(value)
        outer_vars = {lp.loop_var for lp in outer}
        if reduce_vars & outer_vars:
            raise ValueError(
                f"{where}: a reduction loop outside thread loop {loop.loop_var.name}; the "
                "whole reduction must run inside it"
            )
        store, combine = _update_of(block, where)
        if block.init is None or not isinstance(block.init, BufferStore):
            raise ValueError(f"{where}: a cross-thread reduction needs its init statement")
        out = store.buffer
        dtype = out.dtype
        self.count += 1
        tag = f"{out.name}_{self.count}" if self.count > 1 else out.name
        acc = Buffer(f"{tag}_acc", (const(1, "int32"),), dtype, "local")
        threads = [lp for lp in outer if _is_thread(lp)]
        part_shape = tuple(lp.extent for lp in threads) + (loop.extent,)
        part = Buffer(f"{tag}_partial", part_shape, dtype, "shared")
        zero = const(0, "int32")
        slot = tuple(lp.loop_var for lp in threads)

        # the block now folds into the thread's register
        acc_at = BufferLoad(acc, (zero,))
        new_value = _replace_load(store.value, store.buffer, store.indices, acc_at)
        new_block = replace_fields(
            block,
            body=BufferStore(acc, new_value, (zero,)),
            init=None,
            reads=tuple(r for r in block.reads if r.buffer is not out)
            + (BufferRegion(acc, (Range(zero, const(1, "int32")),)),),
            writes=(BufferRegion(acc, (Range(zero, const(1, "int32")),)),),
        )
        body: Stmt = replace_fields(realize, block=new_block)
        for lp in reversed(inner):
            body = replace_fields(lp, body=body)

        tx = loop.loop_var
        n = _const(loop.extent, where)
        mask = self._warp_mask(loop, threads, n)
        if mask is not None:
            shfl = Buffer(f"{tag}_shfl", (const(1, "int32"),), dtype, "local")
            warp_part = None
            if n > WARP_SIZE:
                shape = tuple(lp.extent for lp in threads) + (const(n // WARP_SIZE, "int32"),)
                warp_part = Buffer(f"{tag}_partial", shape, dtype, "shared")
            steps = [
                BufferStore(acc, block.init.value, (zero,)),
                body,
                *warp_tree(tx, n, acc, shfl, warp_part, slot, combine, mask),
                self._write_result(realize, store, inner, loop, acc_at),
            ]
            new_loop = replace_fields(loop, body=Allocate(acc, Allocate(shfl, seq(*steps))))
            return new_loop if warp_part is None else Allocate(warp_part, new_loop)
        steps: list[Stmt] = [
            BufferStore(acc, block.init.value, (zero,)),
            body,
            BufferStore(part, acc_at, (*slot, tx)),
        ]
        while n > 1:
            half = n // 2
            keep = n - half
            mine = BufferLoad(part, (*slot, tx))
            theirs = BufferLoad(part, (*slot, tx + const(keep, tx.dtype)))
            steps.append(
                IfThenElse(
                    LT(tx, const(half, tx.dtype)),
                    BufferStore(part, combine(mine, theirs), (*slot, tx)),
                )
            )
            n = keep
        steps.append(
            self._write_result(realize, store, inner, loop, BufferLoad(part, (*slot, zero)))
        )
        new_loop = replace_fields(loop, body=Allocate(acc, seq(*steps)))
        return Allocate(part, new_loop)

    def _write_result(
        self, realize: BlockRealize, store: BufferStore, inner: list[For], loop: For, result
    ) -> Stmt:
        """Thread 0 stores ``result`` to the block's output, at the spatial bindings."""
        block = realize.block
        tx = loop.loop_var
        vmap: dict[Var, PrimExpr] = {
            iv.var: v for iv, v in zip(block.iter_vars, realize.iter_values)
        }
        for lp in inner:
            vmap[lp.loop_var] = lp.min
        indices = tuple(substitute(substitute(i, vmap), vmap) for i in store.indices)
        # the conditions of the predicate on the output's position guard the write too
        private = {tx, *(lp.loop_var for lp in inner)}
        guard = [c for c in _conjuncts(realize.predicate) if not collect_vars(c) & private]
        guard = [c for c in guard if not (isinstance(c, IntImm) and c.value)]
        write: Stmt = BufferStore(store.buffer, result, indices)
        if guard:
            write = IfThenElse(logical_and(*guard), write)
        return IfThenElse(EQ(tx, const(0, tx.dtype)), write)

    def _warp_mask(self, loop: For, threads: list[For], n: int) -> int | None:
        """The shuffle mask when the reduction can use warp shuffles (see the module
        docstring), else None."""
        launch = self.launch
        if loop.thread_binding != "threadIdx.x" or n < 2 or n & (n - 1) or self.divergent:
            return None
        if n > WARP_SIZE and n % WARP_SIZE:
            return None
        if launch.get("threadIdx.x") != n:
            return None
        for lp in threads:
            tag = lp.thread_binding
            if tag == "threadIdx.x" or not isinstance(lp.extent, IntImm):
                return None
            if lp.extent.value != launch.get(tag):
                return None  # some threads skip the reduction
        covered = {lp.thread_binding for lp in threads} | {"threadIdx.x"}
        if n > WARP_SIZE and set(launch) - covered:
            return None  # several groups would share one slot of the warps' partials
        total = 1
        for extent in launch.values():
            total *= extent
        return 0xFFFFFFFF if total >= WARP_SIZE else (1 << total) - 1


def _launch_extents(kernel: For) -> dict[str, int]:
    """The launch extent of every ``threadIdx`` axis bound in ``kernel``."""
    out: dict[str, int] = {}

    def visit(x) -> None:
        if isinstance(x, For) and _is_thread(x) and isinstance(x.extent, IntImm):
            tag = x.thread_binding
            out[tag] = max(out.get(tag, 1), x.extent.value)

    post_order_visit(kernel, visit)
    return out


def _update_of(block: Block, where: str):
    """The block's store and its combiner ``f(a, b)``."""
    store = block.body
    if not isinstance(store, BufferStore):
        raise ValueError(f"{where}: the body is not a single store")
    value = store.value
    if isinstance(value, _COMBINERS):
        for mine, other in ((value.a, value.b), (value.b, value.a)):
            if (
                isinstance(mine, BufferLoad)
                and mine.buffer is store.buffer
                and len(mine.indices) == len(store.indices)
                and all(_same(x, y) for x, y in zip(mine.indices, store.indices))
                and not _loads(other, store.buffer)
            ):
                cls = type(value)
                return store, (lambda a, b, cls=cls: cls(a, b))
    raise ValueError(
        f"{where}: the update is not out = f(out, value) for f in +, *, max, min; the "
        "cross-thread reduction cannot be lowered"
    )


def _same(a: PrimExpr, b: PrimExpr) -> bool:
    return structural_equal(a, b)


def _loads(e: PrimExpr, buf: Buffer) -> bool:
    found: list[bool] = []

    def visit(x) -> None:
        if isinstance(x, BufferLoad) and x.buffer is buf:
            found.append(True)

    post_order_visit(e, visit)
    return bool(found)


def _conjuncts(e: PrimExpr) -> list[PrimExpr]:
    if isinstance(e, And):
        return [*_conjuncts(e.a), *_conjuncts(e.b)]
    return [e]


def _replace_load(value: PrimExpr, buf: Buffer, indices, new: PrimExpr) -> PrimExpr:
    """``value`` with its load of ``buf[indices]`` (the accumulator) replaced by ``new``."""
    assert isinstance(value, _COMBINERS)
    a, b = value.a, value.b
    if isinstance(a, BufferLoad) and a.buffer is buf:
        return type(value)(new, b)
    return type(value)(a, new)


def _const(e: PrimExpr, where: str) -> int:
    if not isinstance(e, IntImm):
        raise ValueError(f"{where}: the thread extent {e} is not a constant")
    return e.value
