"""Errors raised by schedule primitives.

Every primitive checks its preconditions before changing anything and raises a
:class:`ScheduleError` subclass whose message names the block or loop and the rule;
the schedule is then left unchanged. The subclasses let callers (and tests) tell the
broken rules apart; they are grouped by the primitives that raise them.
"""

from __future__ import annotations


class ScheduleError(ValueError):
    """An illegal schedule primitive call; the schedule is left unchanged.

    The message names the block or loop and the rule the call breaks.
    """


# ----------------------------------------------------------------------------- lookups


class LoopNotFoundError(ScheduleError):
    """A LoopRV refers to a loop that a previous primitive removed."""


class BlockNotFoundError(ScheduleError):
    """No block of that name, or a BlockRV whose block was removed (e.g. inlined)."""


# ----------------------------------------------------------------------------- block kinds


class NotAffineError(ScheduleError):
    """A block's bindings are not affine in the surrounding loops."""


class NotCompleteOrReductionBlockError(ScheduleError):
    """The block is neither complete (spatial, only writer) nor a well-formed reduction."""


class NotOnlyWriterError(ScheduleError):
    """Another block of the scope writes the same buffer (the dataflow is not compact)."""


# ----------------------------------------------------------------------------- compute location


class LoopPositionError(ScheduleError):
    """The loop is in another scope than the block, or inside the block itself."""


class NotAllBlocksUnderLoopError(ScheduleError):
    """Some consumers (compute_at) or producers (reverse_compute_at) are not under the loop."""


class InsertionIndexError(ScheduleError):
    """No legal insertion point, or the requested ``index`` is outside the legal range."""


class NotInlinableError(ScheduleError):
    """compute_inline / reverse_compute_inline preconditions do not hold."""


# ----------------------------------------------------------------------------- buffers


class BufferIndexError(ScheduleError):
    """A buffer index is outside a block's reads or writes."""


class StorageScopeError(ScheduleError):
    """An unknown storage scope."""


class CacheStageError(ScheduleError):
    """The dataflow around the cached buffer does not admit a cache stage."""


class NonAllocatedBufferError(ScheduleError):
    """The buffer is a function parameter, not allocated by a block of the function."""


class StorageAlignError(ScheduleError):
    """An invalid axis, factor or offset for ``storage_align``."""


class IndexMapError(ScheduleError):
    """An index map that does not fit the buffer or is not a bijective affine map."""


# ----------------------------------------------------------------------------- reductions


class NotReductionError(ScheduleError):
    """The block is not a reduction with a recognised commutative reducer."""


class LoopPropertyError(ScheduleError):
    """A loop is bound to the wrong kind of iteration variables for the primitive."""


class FactorAxisError(ScheduleError):
    """``rfactor``'s ``factor_axis`` is outside the new buffer's dimensions."""


# ----------------------------------------------------------------------------- blockize


class SubspaceNotDivisibleError(ScheduleError):
    """A block's bindings cannot be split into parts of the outer and of the inner loops."""


class BlockizeError(ScheduleError):
    """The loop or blocks given to ``blockize`` do not form one subtree."""


class TensorizeError(ScheduleError):
    """The subtree given to ``tensorize`` does not compute what the intrinsic describes."""


__all__ = [
    "BlockNotFoundError",
    "BlockizeError",
    "BufferIndexError",
    "CacheStageError",
    "FactorAxisError",
    "IndexMapError",
    "InsertionIndexError",
    "LoopNotFoundError",
    "LoopPositionError",
    "LoopPropertyError",
    "NonAllocatedBufferError",
    "NotAffineError",
    "NotAllBlocksUnderLoopError",
    "NotCompleteOrReductionBlockError",
    "NotInlinableError",
    "NotOnlyWriterError",
    "NotReductionError",
    "ScheduleError",
    "StorageAlignError",
    "StorageScopeError",
    "SubspaceNotDivisibleError",
    "TensorizeError",
]
