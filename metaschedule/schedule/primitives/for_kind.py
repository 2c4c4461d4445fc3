"""Loop kinds: parallel, vectorize, unroll, bind (to GPU threads).

Only a serial loop can change its kind. ``parallel``, ``vectorize`` and ``bind``
run the iterations of a loop at once, so they check that doing so keeps the
program's meaning: the loop reaches every block below only through its data-parallel
block iterators (a reduction bound to ``threadIdx`` is allowed too: it lowers to a
cross-thread reduction), and no block below reads and writes one buffer at places
that other iterations could touch. As in TVM, the bindings need not be affine: a
padding block moved under a tile loop by ``compute_at`` (bindings like ``h0 * 4 + ax0``
under an imperfect tile) can be parallelized; iterations that write the same element
of an intermediate buffer write the same value. ``unroll`` changes nothing about the order of
iterations and has no such checks.
"""

from __future__ import annotations

import dataclasses

from ...tir import BlockRealize, For, ForKind
from ...tir.expr import is_const_int
from ...tir.functor import collect_vars
from ...tir.stmt import BufferRegion, IterType
from ...tir.structural import structural_equal
from ..analysis import expr_vars
from ..base import ScheduleBase, atomic
from ..error import ScheduleError
from ..instruction import InstructionKind, register_inst_kind
from ..rv import LoopRV

#: The thread axes a loop can be bound to.
THREAD_AXES = (
    "blockIdx.x",
    "blockIdx.y",
    "blockIdx.z",
    "threadIdx.x",
    "threadIdx.y",
    "threadIdx.z",
    "vthread.x",
    "vthread.y",
    "vthread.z",
)

_WHAT = {
    ForKind.PARALLEL: "parallelized",
    ForKind.VECTORIZED: "vectorized",
    ForKind.UNROLLED: "unrolled",
    ForKind.THREAD_BINDING: "bound to a thread axis",
}


class ForKindMixin(ScheduleBase):
    @atomic
    def parallel(self, loop: LoopRV) -> None:
        """Run the loop's iterations in parallel (``for i in T.parallel(n)``).

        Raises:
            ScheduleError: the loop is not serial, is bound to a block iterator below
                that is not data-parallel, or a block below has a dependence between
                iterations.
        """
        self._set_kind(loop, ForKind.PARALLEL, None)
        self._record("Parallel", [loop], [], [])

    @atomic
    def vectorize(self, loop: LoopRV) -> None:
        """Run the loop's iterations as vector lanes (``for i in T.vectorized(n)``).

        Raises:
            ScheduleError: as for :meth:`parallel`.
        """
        self._set_kind(loop, ForKind.VECTORIZED, None)
        self._record("Vectorize", [loop], [], [])

    @atomic
    def unroll(self, loop: LoopRV) -> None:
        """Unroll the loop (``for i in T.unroll(n)``); only a serial loop can be unrolled."""
        self._set_kind(loop, ForKind.UNROLLED, None)
        self._record("Unroll", [loop], [], [])

    @atomic
    def bind(self, loop: LoopRV, thread_axis: str) -> None:
        """Bind the loop to a GPU thread axis (``for i in T.thread_binding(n, "threadIdx.x")``).

        Raises:
            ScheduleError: an unknown thread axis, a loop that is not serial, a reduction
                loop bound to anything but ``threadIdx``, or the checks of :meth:`parallel`.
        """
        if thread_axis not in THREAD_AXES:
            raise ScheduleError(
                f"bind: unknown thread axis {thread_axis!r}; expected one of "
                f"{', '.join(THREAD_AXES)}"
            )
        self._set_kind(loop, ForKind.THREAD_BINDING, thread_axis)
        self._record("Bind", [loop], [thread_axis], [])

    # implementation -----------------------------------------------------------------
    def _set_kind(self, loop: LoopRV, kind: ForKind, thread: str | None) -> None:
        fname, node = self._loop(loop)
        name = node.loop_var.name
        if node.kind is not ForKind.SERIAL:
            now = node.kind.value + (f" ({node.thread_binding})" if node.thread_binding else "")
            raise ScheduleError(f"loop {name} is {now}; only a serial loop can be {_WHAT[kind]}")
        if kind is not ForKind.UNROLLED:
            self._check_parallelizable(fname, node, kind, thread)
        new = dataclasses.replace(node, kind=kind, thread_binding=thread)
        self.state.replace(fname, {node: new})

    def _check_parallelizable(
        self, fname: str, node: For, kind: ForKind, thread: str | None
    ) -> None:
        name = node.loop_var.name
        what = _WHAT[kind] + (f" {thread!r}" if thread else "")
        for realize in self.state.child_block_realizes(node):
            block = realize.block
            for iv, value in zip(block.iter_vars, realize.iter_values):
                if iv.iter_type is IterType.DATA_PAR or node.loop_var not in expr_vars((value,)):
                    continue
                if (
                    iv.iter_type is IterType.COMM_REDUCE
                    and thread is not None
                    and thread.startswith("threadIdx.")
                ):
                    continue  # lowers to a cross-thread reduction
                kind_name = (
                    "reduction"
                    if iv.iter_type is IterType.COMM_REDUCE
                    else iv.iter_type.name.lower()
                )
                raise ScheduleError(
                    f"loop {name} cannot be {what}: it carries the {kind_name} of block "
                    f"{block.name_hint!r} (iter var {iv.var.name} = {value}); only loops bound "
                    "to data-parallel iter vars can"
                    + (", or a reduction bound to threadIdx" if thread else "")
                )
            _check_no_carried_dependence(realize, name, what)


def _check_no_carried_dependence(realize: BlockRealize, loop_name: str, what: str) -> None:
    """Reject a block that reads and writes one buffer at places that differ between iterations.

    The regions of such a buffer must be the same and use data-parallel iter vars only,
    so each iteration reads back exactly what it writes itself.
    """
    block = realize.block
    written = {r.buffer for r in block.writes}
    data_par = {iv.var for iv in block.iter_vars if iv.iter_type is IterType.DATA_PAR}
    for buf in written & {r.buffer for r in block.reads}:
        regions = [r for r in (*block.reads, *block.writes) if r.buffer is buf]
        first = regions[0]
        ok = all(_same_region(first, r) for r in regions[1:]) and all(
            collect_vars(r.region) <= data_par for r in regions
        )
        if not ok:
            raise ScheduleError(
                f"loop {loop_name} cannot be {what}: block {block.name_hint!r} reads and writes "
                f"buffer {buf.name} at {', '.join(_region_str(r) for r in regions)}, which is "
                "not one place fixed by its data-parallel iter vars (a dependence between "
                "iterations)"
            )


def _same_region(a: BufferRegion, b: BufferRegion) -> bool:
    return all(
        structural_equal(x.min, y.min) and structural_equal(x.extent, y.extent)
        for x, y in zip(a.region, b.region)
    )


def _region_str(r: BufferRegion) -> str:
    parts = []
    for rg in r.region:
        one = is_const_int(rg.extent, 1)
        parts.append(str(rg.min) if one else f"{rg.min}:{rg.min} + {rg.extent}")
    return f"{r.buffer.name}[{', '.join(parts)}]"


register_inst_kind(InstructionKind("Parallel", "parallel", inputs=("loop",)))
register_inst_kind(InstructionKind("Vectorize", "vectorize", inputs=("loop",)))
register_inst_kind(InstructionKind("Unroll", "unroll", inputs=("loop",)))
register_inst_kind(InstructionKind("Bind", "bind", inputs=("loop",), attrs=("thread_axis",)))
