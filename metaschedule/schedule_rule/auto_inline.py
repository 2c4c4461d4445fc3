"""``AutoInline``: inline cheap element-wise blocks into their consumers (or producer)."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from ..schedule import ScheduleError
from ..schedule.analysis import not_complete_reason
from .analysis import (
    block_consumers,
    block_producers,
    has_if_then_else,
    has_op,
    is_spatial_prim_func,
    read_write_pattern,
    realize_of,
)
from .base import ScheduleRule

if TYPE_CHECKING:
    from ..schedule import BlockRV, Schedule

__all__ = ["AutoInline"]

#: producers annotated for auto-tensorization are never reverse-inlined into (as TVM)
AUTO_TENSORIZE_KEY = "meta_schedule.auto_tensorize"


class _Inline(enum.Enum):
    INTO_CONSUMER = 1
    INTO_PRODUCER = 2


class AutoInline(ScheduleRule):
    """Inline a block into its consumers (``compute_inline``) or into its single producer
    (``reverse_compute_inline``), as TVM's AutoInline.

    A block qualifies when it writes one buffer and, unless every block of the function is
    spatial (then only the last condition counts): it calls none of ``disallow_op``, it
    does not branch (with ``disallow_if_then_else``), and each read maps its indices onto
    the write's injectively (``require_injective``) and in order (``require_ordered``).
    Finally the primitive must be legal. A block that reads nothing (a constant tensor) is
    inlined into its consumers whatever else holds, with ``inline_const_tensor``.

    Args:
        into_producer: try ``reverse_compute_inline`` (the single producer must be a
            complete block).
        into_consumer: try ``compute_inline`` (the block must have consumers).
        inline_const_tensor: always inline blocks that read no buffer.
        disallow_if_then_else: keep blocks with a predicate, an IfThenElse or a Select.
        require_injective: keep blocks that read one element at several write positions.
        require_ordered: keep blocks whose reads permute the write's dimensions.
        disallow_op: intrinsics that keep a block (``"exp"`` or TVM's ``"tir.exp"``).
    """

    def __init__(
        self,
        into_producer: bool,
        into_consumer: bool,
        inline_const_tensor: bool,
        disallow_if_then_else: bool,
        require_injective: bool,
        require_ordered: bool,
        disallow_op: list[str] | None = None,
    ) -> None:
        self.into_producer = bool(into_producer)
        self.into_consumer = bool(into_consumer)
        self.inline_const_tensor = bool(inline_const_tensor)
        self.disallow_if_then_else = bool(disallow_if_then_else)
        self.require_injective = bool(require_injective)
        self.require_ordered = bool(require_ordered)
        if disallow_op is not None and not all(isinstance(op, str) for op in disallow_op):
            raise TypeError(f"disallow_op must be a list of intrinsic names, got {disallow_op!r}")
        self.disallow_op = list(disallow_op or [])

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        # The legality of each inlining is the primitive's own check: a primitive that
        # raises leaves the schedule (and its trace) as it was, and the next one is tried.
        for kind in self._candidates(sch, block):
            try:
                if kind == _Inline.INTO_CONSUMER:
                    sch.compute_inline(block)
                else:
                    sch.reverse_compute_inline(block)
                break
            except ScheduleError:
                continue
        return [sch]

    def _candidates(self, sch: Schedule, block_rv: BlockRV) -> list[_Inline]:
        """The inlinings worth trying, in TVM's order (into consumers first)."""
        fname, realize = realize_of(sch, block_rv)
        block = realize.block
        scope = sch.state.scope_realize(fname, realize)
        if scope is None or len(block.writes) != 1:
            return []
        consumers = block_consumers(sch, fname, realize)
        if self.inline_const_tensor and not block.reads and consumers:
            return [_Inline.INTO_CONSUMER]
        if not is_spatial_prim_func(sch, fname) and not self._simple(realize):
            return []
        out = []
        if self.into_consumer and consumers:
            out.append(_Inline.INTO_CONSUMER)
        if self.into_producer:
            found = block_producers(sch, fname, realize)
            siblings = sch.state.child_block_realizes(scope)
            if (
                len(found) == 1
                and not_complete_reason(siblings, found[0]) is None
                and AUTO_TENSORIZE_KEY not in found[0].block.annotations
            ):
                out.append(_Inline.INTO_PRODUCER)
        return out

    def _simple(self, realize) -> bool:
        """No disallowed intrinsic, no branch, reads that map onto the write as required."""
        block = realize.block
        if self.disallow_op and has_op(realize, self.disallow_op):
            return False
        if self.disallow_if_then_else and has_if_then_else(realize):
            return False
        for read in block.reads:
            pat = read_write_pattern(read, block.writes[0])
            if self.require_injective and not pat.injective:
                return False
            if self.require_ordered and not pat.ordered:
                return False
        return True

    def __repr__(self) -> str:
        return (
            f"AutoInline(into_producer={self.into_producer}, into_consumer={self.into_consumer}, "
            f"inline_const_tensor={self.inline_const_tensor}, "
            f"disallow_if_then_else={self.disallow_if_then_else}, "
            f"require_injective={self.require_injective}, "
            f"require_ordered={self.require_ordered}, disallow_op={self.disallow_op})"
        )
