"""Running GPU-scheduled programs on the CPU: every thread a coroutine, barriers real.

A kernel is a loop nest bound to ``blockIdx``/``threadIdx`` axes. On a GPU each thread
runs the kernel body with its own indices; the threads of a block meet at
``__syncthreads()`` and share ``shared`` memory. :func:`emulate` reproduces that: the
function is lowered for the GPU (which inserts the barriers, see
:mod:`metaschedule.tir.transform.storage_sync`), and each block's threads run as Python
generators that yield at every barrier; a round resumes every thread up to its next
barrier. So a cooperative fetch, where each thread loads a part of a tile that all of
them then read, computes what the GPU computes.

Warp shuffles (``__shfl_down_sync``, the ``tvm_warp_shuffle_down`` intrinsic that
cross-thread reductions lower to) are a rendezvous of one warp (32 consecutive linear
thread indices): a thread yields its value at the shuffle, and once every running thread
of the block is at a barrier, a shuffle or done, the lanes of each warp at a shuffle
exchange values and go on. Every lane named in the mask must be at the same shuffle
(same offset and width), or :class:`GpuRaceError` says which lanes are not. A shuffle
is not a memory barrier: the race tracking goes on across it.

Races are errors. Within a block, between two barriers, a thread that reads or writes
an element another thread wrote, or writes one another thread read, raises
:class:`GpuRaceError` (a barrier is missing); so does a write to an element that another
block reads or writes in the same kernel. A barrier that some threads of a block
never reach (they finished, or took another branch) raises too.

Expressions and plain statements are the reference interpreter's
(:mod:`metaschedule.tir.interpreter`); only the control flow around barriers and the
thread indices are new here.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import expr as E
from .function import IRModule, PrimFunc
from .functor import Visitor, collect_vars
from .interpreter import Env, _Compiler, _pick
from .stmt import (
    Allocate,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    IterType,
    SeqStmt,
    Stmt,
)
from .transform import GPU_LOWER_PASSES, is_storage_sync, lower
from .transform.warp_reduction import WARP_SIZE, is_warp_shuffle

__all__ = ["GpuRaceError", "emulate", "has_cross_thread_reduction", "has_gpu_kernels"]

Gen = Generator[Any, Any, None]
GenFn = Callable[[Env], Gen]


class GpuRaceError(RuntimeError):
    """Two GPU threads touched one element without a barrier between them."""


def has_gpu_kernels(func_or_mod: PrimFunc | IRModule) -> bool:
    """Whether the function binds loops to ``blockIdx``/``threadIdx`` axes."""
    func, _ = _pick(func_or_mod)
    finder = _Bindings()
    finder.visit(func.body)
    return bool(finder.extents)


def has_cross_thread_reduction(func_or_mod: PrimFunc | IRModule) -> bool:
    """Whether a reduction iterator of some block is bound through a ``threadIdx`` loop.

    Such a reduction needs a cross-thread all-reduce; the GPU lowering passes build it
    (:mod:`metaschedule.tir.transform.cross_thread_reduction`).
    """
    func, _ = _pick(func_or_mod)
    finder = _CrossThreadReduction()
    finder.visit(func.body)
    return finder.found


class _CrossThreadReduction(Visitor):
    def __init__(self) -> None:
        self.thread_vars: list[E.Var] = []
        self.found = False

    def visit_For(self, loop: For) -> None:
        bound = loop.kind is ForKind.THREAD_BINDING and loop.thread_binding.startswith("threadIdx")
        if bound:
            self.thread_vars.append(loop.loop_var)
        self.generic_visit(loop)
        if bound:
            self.thread_vars.pop()

    def visit_BlockRealize(self, realize: BlockRealize) -> None:
        threads = set(self.thread_vars)
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if iv.iter_type is IterType.COMM_REDUCE and collect_vars(value) & threads:
                self.found = True
        self.generic_visit(realize)


def emulate(func_or_mod: PrimFunc | IRModule, *arrays: np.ndarray) -> None:
    """Run a GPU-scheduled function on numpy arrays, in place (see the module docstring).

    Raises:
        GpuRaceError: a data race between threads, or a barrier some threads skip.
        ValueError: IR the emulator cannot run (e.g. a symbolic launch extent).
        IndexError, TypeError: as :func:`metaschedule.tir.interpreter.interpret`.
    """
    func, name = _pick(func_or_mod)
    if not func.attrs.get("lowered"):
        func = lower(func, GPU_LOWER_PASSES)
    _GpuCompiler(func, name).compile()(*arrays)


# ------------------------------------------------------------------------------- launch
class _Bindings(Visitor):
    """The launch extents of the thread axes bound in a statement."""

    def __init__(self) -> None:
        self.extents: dict[str, int] = {}

    def visit_For(self, loop: For) -> None:
        tag = loop.thread_binding
        if loop.kind is ForKind.THREAD_BINDING and not tag.startswith("vthread"):
            if not isinstance(loop.extent, E.IntImm):
                raise ValueError(
                    f"the launch extent of {tag} ({loop.loop_var.name}) must be a "
                    f"constant, got {loop.extent}"
                )
            self.extents[tag] = max(self.extents.get(tag, 0), loop.extent.value)
        self.generic_visit(loop)


def _has_sync(stmt: Stmt) -> bool:
    """Whether ``stmt`` holds a barrier or a warp shuffle (a point where threads meet)."""
    found = []

    class _V(Visitor):
        def visit_Evaluate(self, s: Evaluate) -> None:
            if is_storage_sync(s):
                found.append(s)

        def visit_BufferStore(self, s: BufferStore) -> None:
            if is_warp_shuffle(s.value):
                found.append(s)

    _V().visit(stmt)
    return bool(found)


@dataclass
class _Tracker:
    """Who touched which element since the last barrier (one block) and in the kernel."""

    block: tuple[int, ...]
    # (buffer name, index) -> (writer thread, reader threads) since the last barrier
    interval: dict[tuple[str, tuple], tuple[Any, set]] = field(default_factory=dict)
    # (buffer name, index) -> (writer block, reader blocks), global memory, whole kernel
    kernel: dict[tuple[str, tuple], tuple[Any, set]] | None = None

    def read(self, buf: str, idx: tuple, thread: tuple, scope: str) -> None:
        key = (buf, idx)
        writer, readers = self.interval.get(key, (None, set()))
        if writer is not None and writer != thread:
            raise GpuRaceError(
                f"thread {thread} of block {self.block} reads {buf}{list(idx)}, which thread "
                f"{writer} wrote since the last barrier: a __syncthreads() is missing"
            )
        readers.add(thread)
        self.interval[key] = (writer, readers)
        if scope == "global" and self.kernel is not None:
            wblock, rblocks = self.kernel.get(key, (None, set()))
            if wblock is not None and wblock != self.block:
                raise GpuRaceError(
                    f"block {self.block} reads {buf}{list(idx)}, which block "
                    f"{wblock} writes in the same kernel"
                )
            rblocks.add(self.block)
            self.kernel[key] = (wblock, rblocks)

    def write(self, buf: str, idx: tuple, thread: tuple, scope: str) -> None:
        key = (buf, idx)
        writer, readers = self.interval.get(key, (None, set()))
        if writer is not None and writer != thread:
            raise GpuRaceError(
                f"threads {writer} and {thread} of block {self.block} both write "
                f"{buf}{list(idx)} between two barriers"
            )
        others = readers - {thread}
        if others:
            raise GpuRaceError(
                f"thread {thread} of block {self.block} writes {buf}{list(idx)}, which thread "
                f"{sorted(others)[0]} read since the last barrier: a __syncthreads() is missing"
            )
        self.interval[key] = (thread, readers)
        if scope == "global" and self.kernel is not None:
            wblock, rblocks = self.kernel.get(key, (None, set()))
            if (wblock is not None and wblock != self.block) or (rblocks - {self.block}):
                other = (
                    wblock
                    if wblock not in (None, self.block)
                    else sorted(rblocks - {self.block})[0]
                )
                raise GpuRaceError(
                    f"block {self.block} writes {buf}{list(idx)}, which block "
                    f"{other} also touches in the same kernel"
                )
            self.kernel[key] = (self.block, rblocks)

    def barrier(self) -> None:
        self.interval.clear()


@dataclass
class _Thread:
    """What a running thread knows: its indices, its block's shared memory and tracker."""

    index: dict[str, int]
    ident: tuple[int, ...]
    shared: dict[Any, np.ndarray]
    tracker: _Tracker
    linear: int = 0  # the linear thread index (x fastest): lane = linear % 32


@dataclass(frozen=True)
class _Shuffle:
    """What a thread brings to a warp shuffle."""

    value: Any
    mask: int
    offset: int
    width: int
    site: int  # which shuffle of the program


# ------------------------------------------------------------------------------ compiler
class _GpuCompiler(_Compiler):
    """The interpreter's compiler, with kernels launched over emulated threads."""

    def __init__(self, func: PrimFunc, name: str):
        super().__init__(func, name)
        self.in_kernel = False
        self.thread_slot = self.slot("__gpu_thread__")

    # kernels ------------------------------------------------------------------------
    def stmt_For(self, s: For) -> Callable[[Env], None]:
        if s.kind is not ForKind.THREAD_BINDING or s.thread_binding.startswith("vthread"):
            return super().stmt_For(s)
        if self.in_kernel:
            self.scope.add(s.loop_var)
            body = self.stmt(s.body)
            self.scope.discard(s.loop_var)
            return self._bound(s, body)
        return self._kernel(s)

    def _kernel(self, s: For) -> Callable[[Env], None]:
        finder = _Bindings()
        finder.visit(s)
        extents = finder.extents
        self.in_kernel = True
        try:
            body = self.gen(s)
        finally:
            self.in_kernel = False
        block_tags = sorted(t for t in extents if t.startswith("blockIdx"))
        thread_tags = sorted(t for t in extents if t.startswith("threadIdx"))
        slot = self.thread_slot

        def launch(env: Env) -> None:
            kernel_map: dict = {}
            for bidx in itertools.product(*(range(extents[t]) for t in block_tags)):
                tracker = _Tracker(bidx, kernel=kernel_map)
                shared: dict[Any, np.ndarray] = {}
                threads = []
                linear: dict[tuple, int] = {}
                for tidx in itertools.product(*(range(extents[t]) for t in thread_tags)):
                    index = dict(zip(block_tags, bidx)) | dict(zip(thread_tags, tidx))
                    tenv = list(env)
                    linear[tidx] = _linear(index, extents)
                    tenv[slot] = _Thread(index, tidx, shared, tracker, linear[tidx])
                    threads.append((tidx, body(tenv)))
                _run_block(bidx, threads, tracker, linear)

        return launch

    def _bound(self, s: For, body: Callable[[Env], None]) -> Callable[[Env], None]:
        k, tag, fext = self.slot(s.loop_var), s.thread_binding, self.expr(s.extent)
        tslot = self.thread_slot

        def run(env: Env) -> None:
            v = env[tslot].index[tag]
            if v < fext(env):
                env[k] = v
                body(env)

        return run

    # memory accesses, tracked inside kernels -------------------------------------------------
    def expr_BufferLoad(self, e: E.BufferLoad):
        f = super().expr_BufferLoad(e)
        if not self.in_kernel or e.buffer.scope == "local":
            return f
        fidx, name, scope, tslot = (
            [self.expr(i) for i in e.indices],
            e.buffer.name,
            e.buffer.scope,
            self.thread_slot,
        )

        def load(env: Env):
            th = env[tslot]
            th.tracker.read(name, tuple(fi(env) for fi in fidx), th.ident, scope)
            return f(env)

        return load

    def stmt_BufferStore(self, s):
        f = super().stmt_BufferStore(s)
        if not self.in_kernel or s.buffer.scope == "local":
            return f
        fidx, name, scope, tslot = (
            [self.expr(i) for i in s.indices],
            s.buffer.name,
            s.buffer.scope,
            self.thread_slot,
        )

        def store(env: Env) -> None:
            th = env[tslot]
            th.tracker.write(name, tuple(fi(env) for fi in fidx), th.ident, scope)
            f(env)

        return store

    def stmt_Allocate(self, s: Allocate):
        if not self.in_kernel or s.buffer.scope != "shared":
            return super().stmt_Allocate(s)
        k, make = self.slot(s.buffer), self.alloc(s.buffer)
        body = self.stmt(s.body)
        self.buffers.discard(s.buffer)
        buf, tslot = s.buffer, self.thread_slot

        def run(env: Env) -> None:
            shared = env[tslot].shared
            if buf not in shared:  # one array per block, as __shared__ memory
                shared[buf] = make(env)
            env[k] = shared[buf]
            body(env)

        return run

    def stmt_Evaluate(self, s: Evaluate):
        if is_storage_sync(s):
            raise self.error(
                "a barrier outside a kernel, or in a branch the emulator runs without coroutines"
            )
        return super().stmt_Evaluate(s)

    # statements that may reach a barrier run as generators ---------------------------------
    def gen(self, s: Stmt) -> GenFn:
        """A generator function running ``s`` that yields at each barrier."""
        if not _has_sync(s):
            f = self.stmt(s)

            def plain(env: Env) -> Gen:
                f(env)
                return
                yield  # pragma: no cover - makes this a generator

            return plain
        if is_storage_sync(s):

            def barrier(env: Env) -> Gen:
                yield

            return barrier
        if isinstance(s, BufferStore) and is_warp_shuffle(s.value):
            return self._gen_shuffle(s)
        if isinstance(s, SeqStmt):
            parts = [self.gen(x) for x in s.seq]

            def sequence(env: Env) -> Gen:
                for p in parts:
                    yield from p(env)

            return sequence
        if isinstance(s, For):
            return self._gen_for(s)
        if isinstance(s, IfThenElse):
            fc, ft = self.expr(s.condition), self.gen(s.then_case)
            fe = self.gen(s.else_case) if s.else_case is not None else None

            def branch(env: Env) -> Gen:
                if fc(env):
                    yield from ft(env)
                elif fe is not None:
                    yield from fe(env)

            return branch
        if isinstance(s, Allocate):
            return self._gen_allocate(s)
        raise self.error(f"a barrier inside a {type(s).__name__}")

    def _gen_for(self, s: For) -> GenFn:
        k = self.slot(s.loop_var)
        fmin, fext = self.expr(s.min), self.expr(s.extent)
        self.scope.add(s.loop_var)
        body = self.gen(s.body)
        self.scope.discard(s.loop_var)
        if s.kind is ForKind.THREAD_BINDING and not s.thread_binding.startswith("vthread"):
            tag, tslot = s.thread_binding, self.thread_slot

            def bound(env: Env) -> Gen:
                v = env[tslot].index[tag]
                if v < fext(env):
                    env[k] = v
                    yield from body(env)

            return bound

        def loop(env: Env) -> Gen:
            lo = fmin(env)
            for v in range(lo, lo + fext(env)):
                env[k] = v
                yield from body(env)

        return loop

    def _gen_shuffle(self, s: BufferStore) -> GenFn:
        """``buf[i] = shuffle_down(mask, value, offset, width)``: yield the value, store
        what the warp hands back."""
        call = s.value
        assert isinstance(call, E.Call)
        mask_e, value_e, offset_e, width_e = call.args
        consts = []
        for arg in (mask_e, offset_e, width_e):
            if not isinstance(arg, E.IntImm):
                raise self.error(f"a warp shuffle with a non-constant mask/offset/width {arg}")
            consts.append(arg.value)
        mask, offset, width = consts
        fvalue = self.expr(value_e)
        site = id(s)
        got = E.Var("__shuffled__", call.dtype)
        k = self.slot(got)
        self.scope.add(got)
        store = self.stmt(BufferStore(s.buffer, got, s.indices))
        self.scope.discard(got)

        def shuffle(env: Env) -> Gen:
            env[k] = yield _Shuffle(fvalue(env), mask, offset, width, site)
            store(env)

        return shuffle

    def _gen_allocate(self, s: Allocate) -> GenFn:
        k, make = self.slot(s.buffer), self.alloc(s.buffer)
        body = self.gen(s.body)
        self.buffers.discard(s.buffer)
        buf, tslot, shared_scope = s.buffer, self.thread_slot, s.buffer.scope == "shared"

        def allocate(env: Env) -> Gen:
            if shared_scope:
                shared = env[tslot].shared
                if buf not in shared:
                    shared[buf] = make(env)
                env[k] = shared[buf]
            else:
                env[k] = make(env)
            yield from body(env)

        return allocate


def _linear(index: dict[str, int], extents: dict[str, int]) -> int:
    x, y, z = (index.get(f"threadIdx.{a}", 0) for a in "xyz")
    ex, ey = extents.get("threadIdx.x", 1), extents.get("threadIdx.y", 1)
    return x + ex * (y + ey * z)


def _run_block(
    block: tuple[int, ...],
    threads: list[tuple[tuple, Iterator[Any]]],
    tracker: _Tracker,
    lanes: dict[tuple, int],
) -> None:
    """Run the threads to their next meeting point (a barrier or a warp shuffle), resolve
    the shuffles warp by warp, and release a barrier once every live thread waits at it;
    until all finish."""
    gens = dict(threads)
    running: dict[tuple, Any] = {ident: None for ident, _ in threads}  # ident -> sent value
    at_barrier: list[tuple] = []
    at_shuffle: dict[tuple, _Shuffle] = {}
    finished: list[tuple] = []  # since the last barrier
    done: set[tuple] = set()
    while running or at_shuffle or at_barrier:
        for ident, sent in running.items():
            try:
                got = gens[ident].send(sent)
            except StopIteration:
                finished.append(ident)
                done.add(ident)
                continue
            if isinstance(got, _Shuffle):
                at_shuffle[ident] = got
            else:
                at_barrier.append(ident)
        running = {}
        if at_shuffle:
            running = _resolve_shuffles(block, at_shuffle, lanes, set(at_barrier), done)
            at_shuffle = {}
            continue
        if at_barrier and finished:
            raise GpuRaceError(
                f"block {block}: threads {at_barrier[:3]} wait at a barrier that "
                f"threads {finished[:3]} never reach (a __syncthreads() in divergent code)"
            )
        tracker.barrier()
        running = dict.fromkeys(at_barrier)
        at_barrier, finished = [], []


def _resolve_shuffles(
    block: tuple[int, ...],
    waiting: dict[tuple, _Shuffle],
    lanes: dict[tuple, int],
    at_barrier: set[tuple],
    done: set[tuple],
) -> dict[tuple, Any]:
    """Exchange the values of the lanes waiting at a shuffle, warp by warp; what each
    thread receives."""
    by_linear = {lanes[ident]: ident for ident in lanes}
    for ident, sh in waiting.items():
        warp, lane = divmod(lanes[ident], WARP_SIZE)
        if not sh.mask >> lane & 1:
            raise GpuRaceError(
                f"block {block}: thread {ident} (lane {lane} of warp {warp}) runs "
                f"__shfl_down_sync with mask {sh.mask:#x}, which does not name its lane"
            )
    out: dict[tuple, Any] = {}
    for ident, sh in waiting.items():
        linear = lanes[ident]
        warp, lane = divmod(linear, WARP_SIZE)
        named = [
            by_linear[warp * WARP_SIZE + i]
            for i in range(WARP_SIZE)
            if sh.mask >> i & 1 and warp * WARP_SIZE + i in by_linear
        ]
        for other in named:
            peer = waiting.get(other)
            if peer is None:
                where = (
                    "waits at a __syncthreads()"
                    if other in at_barrier
                    else "has finished"
                    if other in done
                    else "is elsewhere"
                )
                raise GpuRaceError(
                    f"block {block}: thread {ident} (lane {lane} of warp {warp}) is at "
                    f"__shfl_down_sync with mask {sh.mask:#x} but thread {other} named in "
                    f"the mask {where}: a warp shuffle in divergent code"
                )
            if (peer.mask, peer.offset, peer.width, peer.site) != (
                sh.mask,
                sh.offset,
                sh.width,
                sh.site,
            ):
                raise GpuRaceError(
                    f"block {block}: threads {ident} and {other} of warp {warp} are at different "
                    f"__shfl_down_sync calls (offset {sh.offset}, width {sh.width} and offset "
                    f"{peer.offset}, width {peer.width}): a warp shuffle in divergent code"
                )
        src = lane + sh.offset
        if lane % sh.width + sh.offset >= sh.width:
            out[ident] = sh.value  # outside the segment: the lane's own value
            continue
        source = by_linear.get(warp * WARP_SIZE + src)
        if source is None or not sh.mask >> src & 1:
            raise GpuRaceError(
                f"block {block}: thread {ident} (lane {lane} of warp {warp}) reads lane {src} "
                f"in __shfl_down_sync, which {'is not in the mask' if source else 'does not exist'}"
                f" {sh.mask:#x}: the value is undefined"
            )
        out[ident] = waiting[source].value
    return out
