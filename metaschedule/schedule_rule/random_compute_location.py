"""``RandomComputeLocation``: compute an untiled block at a sampled loop of its consumer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .analysis import AUTO_TENSORIZE_KEY, TILING_STRUCTURE_KEY, block_consumers, realize_of
from .base import ScheduleRule

if TYPE_CHECKING:
    from ..schedule import BlockRV, Schedule

__all__ = ["RANDOM_COMPUTE_PRODUCER_KEY", "RandomComputeLocation"]

#: set by AddRFactor on a write-back block: its rfactor producer also gets a location
RANDOM_COMPUTE_PRODUCER_KEY = "meta_schedule.random_compute_producer"


class RandomComputeLocation(ScheduleRule):
    """``compute_at(block, sample_compute_location(block))`` (as TVM's rule).

    Applies to a block directly under the root block, inside at least one loop whose
    outermost loop holds no other block, not tiled by MultiLevelTiling, and with at least
    one consumer. The sampled location (mutated by MutateComputeLocation) is a loop above
    the consumer, the root (the block stays) or inline. A producer of a block that
    ``MultiLevelTilingWithIntrin`` annotated for tensorization stays where it is (the
    intrinsic reads its buffer, not an expression of it).

    A block annotated ``meta_schedule.random_compute_producer`` (by AddRFactor) loses the
    annotation, and its single producer (the rfactor block) gets a sampled location too,
    after the block itself.
    """

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if not self._applies(sch, block):
            return [sch]
        producer = None
        if RANDOM_COMPUTE_PRODUCER_KEY in sch.get(block).annotations:
            found = sch.get_producers(block)
            sch.unannotate(block, RANDOM_COMPUTE_PRODUCER_KEY)
            if len(found) != 1:
                raise ValueError(
                    f"RandomComputeLocation: block {sch.get(block).name_hint!r} is annotated "
                    f"{RANDOM_COMPUTE_PRODUCER_KEY!r} but has {len(found)} producers; expected "
                    "exactly one (the rfactor block)"
                )
            producer = found[0]
        sch.compute_at(block, sch.sample_compute_location(block), True)
        if producer is not None:
            sch.compute_at(producer, sch.sample_compute_location(producer), True)
        return [sch]

    @staticmethod
    def _applies(sch: Schedule, block: BlockRV) -> bool:
        fname, realize = realize_of(sch, block)
        state = sch.state
        scope = state.scope_realize(fname, realize)
        if scope is None or state.scope_realize(fname, scope) is not None:
            return False  # the root, or not a direct child of the root
        loops = state.loops_above(fname, realize)
        if not loops or len(state.child_block_realizes(loops[0])) > 1:
            return False
        if TILING_STRUCTURE_KEY in realize.block.annotations:
            return False
        consumers = block_consumers(sch, fname, realize)
        # a block whose consumer will be tensorized stays a stage of its own: inlined or
        # computed inside the consumer's tile (a padding Select in place of the load the
        # intrinsic reads), it would leave the consumer untensorizable
        if any(AUTO_TENSORIZE_KEY in c.block.annotations for c in consumers):
            return False
        return bool(consumers)

    def __repr__(self) -> str:
        return "RandomComputeLocation()"
