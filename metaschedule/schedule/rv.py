"""Random variables: handles to blocks, loops and sampled integers of a Schedule.

An RV is only a name tag; the Schedule maps it to the current block (by its unique
name), loop (by its loop variable, which survives rewrites of the loop's body) or
integer value. RVs compare by identity and stay valid in copies of the schedule.
"""

from __future__ import annotations


class RV:
    prefix = "rv"
    __slots__ = ("__weakref__",)

    def __repr__(self) -> str:
        return f"{type(self).__name__}@{id(self):x}"


class BlockRV(RV):
    """A handle to a block."""

    prefix = "b"
    __slots__ = ()


class LoopRV(RV):
    """A handle to a loop."""

    prefix = "l"
    __slots__ = ()


class ExprRV(RV):
    """A handle to a sampled integer (e.g. a tile size)."""

    prefix = "v"
    __slots__ = ()
