"""``VerifyGPUCode``: reject GPU schedules that cannot launch on the target.

A *kernel* is the subtree of an outermost thread-bound loop. For each kernel the
schedule's functions are lowered and checked against the target's limits (TVM's
checks, with TVM's fixed limits for virtual threads and vector accesses):

* threads per block (the product of the ``threadIdx.x/y/z`` extents) at most
  ``max_threads_per_block``, ``threadIdx.z`` at most 64, ``blockIdx.y/z`` at most
  65535, and one extent per thread axis within a kernel;
* shared memory per block at most ``max_shared_memory_per_block``: the footprint of
  each ``shared`` buffer the kernel touches, with the ``blockIdx`` loops fixed and
  every other loop of the kernel swept (the tile one block uses);
* the product of the ``vthread`` extents at most 8;
* a vectorized access at most 16 bytes (``float4``);
* a block that MultiLevelTiling annotated with ``meta_schedule.thread_extent_low_inclusive``
  / ``_high_inclusive`` runs on a number of threads per block in that range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..schedule.state import child_stmts
from ..target import Target
from ..tir import Buffer, For, ForKind, IntImm, PrimFunc
from ..tir.dtype import nbytes
from ..tir.expr import BufferLoad, PrimExpr, Var
from ..tir.functor import Visitor, collect_vars
from ..tir.stmt import Block, BufferStore, Stmt
from ..tir.transform import GPU_LOWER_PASSES, lower
from ..tir.transform.affine import Interval, bounds
from ..tir.transform.region import extent_of, interval_hull
from .base import Postproc

if TYPE_CHECKING:
    from ..schedule import Schedule

__all__ = ["GPULimits", "VerifyGPUCode", "gpu_code_errors"]


@dataclass(frozen=True)
class GPULimits:
    """What one kernel may use (TVM's ``max_vthread`` and ``max_vector_bytes`` defaults)."""

    max_threads_per_block: int
    max_shared_memory_per_block: int
    max_vthread: int = 8
    max_vector_bytes: int = 16
    max_thread_z: int = 64
    max_grid_yz: int = 65535

    @staticmethod
    def from_target(target: Target) -> GPULimits:
        if target.kind != "cuda":
            raise ValueError(f"VerifyGPUCode checks GPU code: expected a cuda target, got {target}")
        return GPULimits(
            max_threads_per_block=int(target.attrs["max_threads_per_block"]),
            max_shared_memory_per_block=int(target.attrs["max_shared_memory_per_block"]),
        )


class VerifyGPUCode(Postproc):
    """Returns False when a kernel of the schedule exceeds the target's limits (see the
    module docstring); the schedule is not modified.

    The limits come from the TuneContext's target; until it is initialised with one,
    those of ``Target("cuda")``.
    """

    def __init__(self) -> None:
        self.limits = GPULimits.from_target(Target("cuda"))

    def _initialize_with_tune_context(self, context: Any) -> None:
        target = getattr(context, "target", None)
        if target is not None:
            self.limits = GPULimits.from_target(Target(target))

    def apply(self, sch: Schedule) -> bool:
        for func in sch.mod.functions.values():
            if not _thread_extents_in_bounds(func.body):
                return False
            try:
                lowered = lower(func, GPU_LOWER_PASSES)
            except ValueError:
                return False
            if gpu_code_errors(lowered, self.limits):
                return False
        return True


def gpu_code_errors(func: PrimFunc, limits: GPULimits) -> list[str]:
    """Why the kernels of a lowered function cannot launch (empty: they can)."""
    checker = _Checker(limits)
    checker.visit(func.body)
    return checker.errors


@dataclass
class _Kernel:
    root: str
    threads: dict[str, int] = field(default_factory=dict)
    blocks: dict[str, int] = field(default_factory=dict)
    vthreads: int = 1
    #: loop variables swept inside the kernel (blockIdx ones are held fixed)
    ranges: dict[Var, tuple[PrimExpr, PrimExpr]] = field(default_factory=dict)
    shared: dict[Buffer, list[Interval | None]] = field(default_factory=dict)


class _Checker(Visitor):
    def __init__(self, limits: GPULimits):
        self.limits = limits
        self.kernel: _Kernel | None = None
        self.errors: list[str] = []

    def error(self, msg: str) -> None:
        assert self.kernel is not None
        self.errors.append(f"kernel at loop {self.kernel.root}: {msg}")

    # loops ----------------------------------------------------------------------------
    def visit_For(self, loop: For) -> None:
        if self.kernel is None:
            if loop.kind is not ForKind.THREAD_BINDING:
                self.visit(loop.body)
                return
            self.kernel = _Kernel(loop.loop_var.name)
            try:
                self._kernel_loop(loop)
                self._finish()
            finally:
                self.kernel = None
            return
        self._kernel_loop(loop)

    def _kernel_loop(self, loop: For) -> None:
        k = self.kernel
        assert k is not None
        extent = loop.extent.value if isinstance(loop.extent, IntImm) else None
        axis = loop.thread_binding or ""
        if loop.kind is ForKind.THREAD_BINDING:
            if extent is None:
                self.error(
                    f"loop {loop.loop_var.name} bound to {axis} has the non-constant "
                    f"extent {loop.extent}"
                )
                return
            if axis.startswith("threadIdx"):
                if k.threads.setdefault(axis, extent) != extent:
                    self.error(
                        f"{axis} is bound to loops of extents {k.threads[axis]} and "
                        f"{extent}; a kernel has one extent per thread axis"
                    )
            elif axis.startswith("blockIdx"):
                k.blocks[axis] = max(k.blocks.get(axis, 1), extent)
            elif axis.startswith("vthread"):
                k.vthreads *= extent
        if loop.kind is ForKind.VECTORIZED:
            self._check_vector(loop, extent)
        if not axis.startswith("blockIdx"):
            k.ranges[loop.loop_var] = (loop.min, loop.extent)
        try:
            self.visit(loop.body)
        finally:
            k.ranges.pop(loop.loop_var, None)

    def _check_vector(self, loop: For, lanes: int | None) -> None:
        if lanes is None:
            self.error(
                f"vectorized loop {loop.loop_var.name} has the non-constant extent {loop.extent}"
            )
            return
        for buf in _vector_accesses(loop):
            size = lanes * nbytes(buf.dtype)
            if size > self.limits.max_vector_bytes:
                self.error(
                    f"vectorized loop {loop.loop_var.name} accesses {lanes} x "
                    f"{buf.dtype} of {buf.name} = {size} bytes at once; at most "
                    f"{self.limits.max_vector_bytes} bytes"
                )
                return

    # shared memory --------------------------------------------------------------------
    def visit_BufferLoad(self, load: BufferLoad) -> None:
        self._access(load.buffer, load.indices)
        self.generic_visit(load)

    def visit_BufferStore(self, store: BufferStore) -> None:
        self._access(store.buffer, store.indices)
        self.generic_visit(store)

    def _access(self, buf: Buffer, indices: tuple[PrimExpr, ...]) -> None:
        k = self.kernel
        if k is None or not buf.scope.startswith("shared"):
            return
        dims = [bounds(i, k.ranges) for i in indices]
        old = k.shared.get(buf)
        k.shared[buf] = dims if old is None else [interval_hull(a, b) for a, b in zip(old, dims)]

    # the verdict ----------------------------------------------------------------------
    def _finish(self) -> None:
        k, lim = self.kernel, self.limits
        assert k is not None
        threads = math.prod(k.threads.values())
        if threads > lim.max_threads_per_block:
            axes = ", ".join(f"{a}={e}" for a, e in sorted(k.threads.items()))
            self.error(f"{threads} threads per block ({axes}); at most {lim.max_threads_per_block}")
        if k.threads.get("threadIdx.z", 1) > lim.max_thread_z:
            self.error(f"threadIdx.z extent {k.threads['threadIdx.z']}; at most {lim.max_thread_z}")
        for axis in ("blockIdx.y", "blockIdx.z"):
            if k.blocks.get(axis, 1) > lim.max_grid_yz:
                self.error(f"{axis} extent {k.blocks[axis]}; at most {lim.max_grid_yz}")
        if k.vthreads > lim.max_vthread:
            self.error(f"{k.vthreads} virtual threads; at most {lim.max_vthread}")
        shared = 0
        for buf, dims in k.shared.items():
            size = _footprint(buf, dims)
            if size is None:
                self.error(f"shared buffer {buf.name} has a symbolic size")
                return
            shared += size
        if shared > lim.max_shared_memory_per_block:
            names = ", ".join(b.name for b in k.shared)
            self.error(
                f"{shared} bytes of shared memory ({names}); at most "
                f"{lim.max_shared_memory_per_block}"
            )


def _footprint(buf: Buffer, dims: list[Interval | None]) -> int | None:
    """Bytes of the touched box, each dimension at most the buffer's; None if unknown."""
    elems = 1
    for dim, iv in zip(buf.shape, dims):
        width = extent_of(iv)
        full = dim.value if isinstance(dim, IntImm) else None
        if width is None or (full is not None and width > full):
            width = full
        if width is None:
            return None
        elems *= width
    return elems * nbytes(buf.dtype)


def _vector_accesses(loop: For) -> list[Buffer]:
    """Buffers loaded or stored in the loop's body at indices that use its variable."""
    out: list[Buffer] = []

    class _V(Visitor):
        def visit_BufferLoad(self, node: BufferLoad) -> None:
            if loop.loop_var in collect_vars(node.indices):
                out.append(node.buffer)
            self.generic_visit(node)

        def visit_BufferStore(self, node: BufferStore) -> None:
            if loop.loop_var in collect_vars(node.indices):
                out.append(node.buffer)
            self.generic_visit(node)

    _V().visit(loop.body)
    return out


_LOW = "meta_schedule.thread_extent_low_inclusive"
_HIGH = "meta_schedule.thread_extent_high_inclusive"


def _thread_extents_in_bounds(body: Stmt) -> bool:
    """Whether every block with thread-extent bounds runs on a thread count within them."""
    ok = True

    def walk(node: Stmt, threads: int) -> None:
        nonlocal ok
        if isinstance(node, For) and node.kind is ForKind.THREAD_BINDING:
            tag = node.thread_binding or ""
            if tag.startswith("threadIdx") and isinstance(node.extent, IntImm):
                threads *= node.extent.value
        if isinstance(node, Block):
            low, high = node.annotations.get(_LOW), node.annotations.get(_HIGH)
            if (low is not None and threads < int(low)) or (
                high is not None and threads > int(high)
            ):
                ok = False
                return
        for child in child_stmts(node):
            walk(child, threads)

    walk(body, 1)
    return ok
