"""Primitives: compute_at, reverse_compute_at, sample_compute_location.

``compute_at`` moves a producer under a loop of its consumers and shrinks its
iteration domain to the region the consumers read in one iteration of that loop;
``reverse_compute_at`` moves a consumer under a loop of its producers, restricted to
the region they write in one iteration. Both rebuild the moved block's loops (named
``ax0, ax1, ...``) and bind its variables to ``region start + loop``; where the region
may leave the block's domain a predicate keeps it inside.

``sample_compute_location`` draws where a block goes: a loop above its consumers, the
root (leave it), or inline. The checks and the new loop nest are in
:mod:`.compute_at_plan`, the enumeration of legal locations (shared with
``MutateComputeLocation``) in :mod:`.compute_location_candidates`.
"""

from __future__ import annotations

from ..base import ScheduleBase, atomic
from ..error import LoopPositionError, ScheduleError
from ..instruction import InstructionKind, register_inst_kind
from ..rv import BlockRV, LoopRV
from .compute_at_plan import plan_compute_at
from .compute_location_candidates import (
    closest_compute_location,
    compute_location_candidates,
)

__all__ = ["ComputeLocationMixin", "compute_location_candidates"]

# ----------------------------------------------------------------------------- the mixin


class ComputeLocationMixin(ScheduleBase):
    def _marker(self, loop: LoopRV) -> str | None:
        h = self._handle(loop)
        return h[0] if h[0] in ("root", "inline") else None

    def _move(
        self, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool, index: int, reverse: bool
    ) -> None:
        """compute_at (or reverse_compute_at) to a loop or to a sampled marker."""
        marker = self._marker(loop)
        if marker == "inline":
            if reverse:
                self._do_reverse_compute_inline(block)  # type: ignore[attr-defined]
            else:
                self._do_compute_inline(block)  # type: ignore[attr-defined]
        if marker is not None:
            return  # "root": leave the block where it is
        fname, realize = self._block(block)
        lfname, node = self._loop(loop)
        if lfname != fname:
            raise LoopPositionError(
                f"block {realize.block.name_hint!r} is in function {fname!r}"
                f" but loop {node.loop_var.name} is in {lfname!r}"
            )
        mapping = plan_compute_at(
            self.state, fname, realize, node, bool(preserve_unit_loops), int(index), reverse
        )
        self.state.replace(fname, mapping)

    @atomic
    def compute_at(
        self, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False, index: int = -1
    ) -> None:
        """Move a producer under ``loop`` of its consumers, computing only what they read.

        Before::

            for i, j in grid(16, 16):
                with block("B"):  B[vi, vj] = A[vi, vj] * 2.0
            for i, j in grid(16, 16):
                with block("C"):  C[vi, vj] = B[vi, vj] + 1.0

        After ``compute_at(B, <C's loop i>)``::

            for i in range(16):
                for ax0 in range(16):
                    with block("B"):  vi, vj = i, ax0 ...
                for j in range(16):
                    with block("C"):  ...

        Args:
            preserve_unit_loops: keep loops of extent 1 for the new nest.
            index: -1 (default) inserts right before the first consumer, -2 right after
                the last producer, k inserts at position k of the loop's body.
            loop: a LoopRV, or the "root" / "inline" LoopRV of sample_compute_location
                (do nothing / compute_inline).

        Raises:
            LoopPositionError, NotCompleteOrReductionBlockError, NotAffineError,
            NotAllBlocksUnderLoopError, InsertionIndexError: see error.py.
        """
        self._move(block, loop, preserve_unit_loops, index, reverse=False)
        self._record("ComputeAt", [block, loop], [bool(preserve_unit_loops), int(index)], [])

    @atomic
    def reverse_compute_at(
        self, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False, index: int = -1
    ) -> None:
        """Move a consumer under ``loop`` of its producers, computing what they just wrote.

        Before::

            for i, j in grid(16, 16):
                with block("B"):  B[vi, vj] = A[vi, vj] * 2.0
            for i, j in grid(16, 16):
                with block("C"):  C[vi, vj] = B[vi, vj] + 1.0

        After ``reverse_compute_at(C, <B's loop i>)``::

            for i in range(16):
                for j in range(16):
                    with block("B"):  ...
                for ax0 in range(16):
                    with block("C"):  vi, vj = i, ax0 ...

        Args:
            preserve_unit_loops, index: as in :meth:`compute_at` (-1 is the last legal
                position, right after the producers unless a reader of the block's output
                follows them in the loop).

        Raises:
            as :meth:`compute_at`, and ``ScheduleError`` when the block's reads of the
            producers' buffers are not plain iteration variables or the loop would split
            one of its reduction variables.
        """
        self._move(block, loop, preserve_unit_loops, index, reverse=True)
        self._record("ReverseComputeAt", [block, loop], [bool(preserve_unit_loops), int(index)], [])

    @atomic
    def sample_compute_location(self, block: BlockRV, decision: int | None = None) -> LoopRV:
        """Sample where to compute ``block``: a LoopRV for compute_at, or a marker.

        The decision is -2 (inline: the returned LoopRV is the "inline" marker), -1 (root:
        the "root" marker, compute_at leaves the block where it is), or i >= 0: the loop
        at depth i (outermost 0) above the block's first consumer, among those where
        compute_at is legal (TVM's convention). A given decision that is not legal falls
        back to the closest legal smaller one, as in TVM.
        """
        fname, realize = self._block(block)
        if decision is None:
            cands = compute_location_candidates(self.state, fname, realize)
            chosen, node = cands[self._rand_int(len(cands))]
        else:
            want = int(decision)
            found = closest_compute_location(self.state, fname, realize, want)
            if found is None:
                legal = [c[0] for c in compute_location_candidates(self.state, fname, realize)]
                raise ScheduleError(
                    f"sample_compute_location: decision {want} is not a legal location of "
                    f"block {realize.block.name_hint!r}; legal: {legal}"
                )
            chosen, node = found
        if chosen == -2:
            out = self._new_marker_loop_rv("inline")
        elif chosen == -1:
            out = self._new_marker_loop_rv("root")
        else:
            out = self._new_loop_rv(fname, node)
        self._record("SampleComputeLocation", [block], [], [out], chosen)
        return out


register_inst_kind(
    InstructionKind(
        "ComputeAt", "compute_at", inputs=("block", "loop"), attrs=("preserve_unit_loops", "index")
    )
)
register_inst_kind(
    InstructionKind(
        "ReverseComputeAt",
        "reverse_compute_at",
        inputs=("block", "loop"),
        attrs=("preserve_unit_loops", "index"),
    )
)
register_inst_kind(
    InstructionKind(
        "SampleComputeLocation",
        "sample_compute_location",
        inputs=("block",),
        is_pure=True,
        has_decision=True,
    )
)
