"""``RewriteCooperativeFetch``: let the threads of a GPU block load a shared tile together.

MultiLevelTiling (GPU) caches each input of a tiled block in ``shared`` memory under the
tile's ``threadIdx`` loop, fuses the cache's loops into one and annotates the cache block
with ``meta_schedule.cooperative_fetch = v`` (a sampled vector length). Every thread
would then load the whole tile. This postprocessor splits the fused loop so that each
thread loads its share, ``v`` consecutive elements at a time::

    for tx in T.thread_binding(64, "threadIdx.x"):          # the tile's threads
        for ax0_ax1_fused in range(512):   # annotated v = 4
            A_shared[...] = A[...]
  ->
    for tx in T.thread_binding(64, "threadIdx.x"):
        for ax_0 in range(2):
            for ax_1 in T.thread_binding(64, "threadIdx.x"):
                for ax_2 in T.vectorized(4):
                    A_shared[...] = A[...]

The thread extents are those of the ``threadIdx.x`` (and ``threadIdx.y``) loops above the
block (TVM reads them from the trace; they are the same loops). The inner loop of the same
axis is the same hardware index: on a GPU (and in the emulator) each thread runs its own
iteration of it. A fused extent that the threads and lanes do not divide gets a predicate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..schedule import ScheduleError
from ..schedule.state import child_stmts
from ..tir import Block, For, ForKind, IntImm, Stmt
from .base import Postproc

if TYPE_CHECKING:
    from ..schedule import Schedule

__all__ = ["COOPERATIVE_FETCH_KEY", "RewriteCooperativeFetch"]

#: the annotation MultiLevelTiling puts on a shared read cache: its vector length
COOPERATIVE_FETCH_KEY = "meta_schedule.cooperative_fetch"


class RewriteCooperativeFetch(Postproc):
    """Split, bind and vectorize the fused loop of every cooperative-fetch block (see the
    module docstring) and drop the annotation. Returns False when a block has no
    ``threadIdx`` loop above it, a non-constant thread extent, or cannot be split."""

    def apply(self, sch: Schedule) -> bool:
        for fname in list(sch.mod.functions):
            for name in annotated_blocks(sch.mod[fname].body, COOPERATIVE_FETCH_KEY):
                if not _rewrite(sch, fname, name):
                    return False
        return True


def annotated_blocks(body: Stmt, key: str) -> list[str]:
    """Names of the blocks carrying annotation ``key``, in program order."""
    names: list[str] = []
    stack: list[Stmt] = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, Block) and key in node.annotations:
            names.append(node.name_hint)
        stack.extend(reversed(child_stmts(node)))
    return names


def thread_extents_above(loops: list[For]) -> dict[str, int] | None:
    """The extents of the ``threadIdx`` loops among ``loops`` (None: one is symbolic)."""
    out: dict[str, int] = {}
    for lp in loops:
        if lp.kind is ForKind.THREAD_BINDING and lp.thread_binding.startswith("threadIdx"):
            if not isinstance(lp.extent, IntImm):
                return None
            out[lp.thread_binding] = lp.extent.value
    return out


def _rewrite(sch: Schedule, fname: str, name: str) -> bool:
    block = sch.get_block(name, fname)
    vec = int(sch.get(block).annotations[COOPERATIVE_FETCH_KEY])
    loops = sch.get_loops(block)
    nodes = [sch.get(lp) for lp in loops]
    extents = thread_extents_above(nodes)
    if not extents or "threadIdx.x" not in extents:
        return False
    fused = loops[-1]
    if nodes[-1].kind is not ForKind.SERIAL:
        return False
    ty, tx = extents.get("threadIdx.y"), extents["threadIdx.x"]
    inner = [f for f in (ty, tx, vec if vec > 1 else None) if f is not None]
    try:
        parts = sch.split(fused, [None, *inner])
        if vec > 1:
            sch.vectorize(parts[-1])
            parts = parts[:-1]
        sch.bind(parts[-1], "threadIdx.x")
        if ty is not None:
            sch.bind(parts[-2], "threadIdx.y")
    except ScheduleError:
        return False
    sch.unannotate(block, COOPERATIVE_FETCH_KEY)
    return True
