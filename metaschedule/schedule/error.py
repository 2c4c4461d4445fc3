"""Errors raised by schedule primitives."""

from __future__ import annotations


class ScheduleError(ValueError):
    """An illegal schedule primitive call; the schedule is left unchanged.

    The message names the block or loop and the rule the call breaks.
    """


class NotAffineError(ScheduleError):
    """A block's bindings are not affine in the surrounding loops."""


class LoopNotFoundError(ScheduleError):
    """A LoopRV refers to a loop that a previous primitive removed."""


class BlockNotFoundError(ScheduleError):
    """No block of that name, or a BlockRV whose block was removed (e.g. inlined)."""
