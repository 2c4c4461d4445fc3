"""``Schedule``: the scheduling language's entry point (TVM's ``tir.Schedule``)."""

from __future__ import annotations

from .base import ScheduleBase
from .primitives.annotate import AnnotateMixin
from .primitives.blockize import BlockizeMixin
from .primitives.cache import CacheMixin
from .primitives.compute_inline import ComputeInlineMixin
from .primitives.compute_location import ComputeLocationMixin
from .primitives.for_kind import ForKindMixin
from .primitives.get_block import GetBlockMixin
from .primitives.layout import LayoutMixin
from .primitives.loop_transform import LoopTransformMixin
from .primitives.reduction import ReductionMixin
from .primitives.sampling import SamplingMixin
from .primitives.tensorize import TensorizeMixin


class Schedule(
    GetBlockMixin,
    SamplingMixin,
    LoopTransformMixin,
    ForKindMixin,
    ComputeLocationMixin,
    ComputeInlineMixin,
    CacheMixin,
    LayoutMixin,
    ReductionMixin,
    BlockizeMixin,
    TensorizeMixin,
    AnnotateMixin,
    ScheduleBase,
):
    """A module under transformation, with the trace of primitives applied to it.

    Args:
        mod: a PrimFunc or an IRModule (a PrimFunc becomes the module's ``main``).
        seed: seed of the random state used by sampling primitives (None: from the OS).
        debug_mask: kept for compatibility with TVM; checks always run.
        error_render_level: "detail", "fast" or "none"; checked and kept for compatibility
            with TVM, but it changes nothing here: every ScheduleError names the block or
            loop it concerns and why, whatever the level.
    """
