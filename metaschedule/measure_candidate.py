"""``MeasureCandidate``: a schedule chosen for measurement, with its argument information."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .arg_info import ArgInfo
    from .schedule import Schedule

__all__ = ["MeasureCandidate"]


@dataclass(frozen=True, eq=False)
class MeasureCandidate:
    """A schedule to build and measure, and what a runner must allocate to call it.

    Args:
        sch: the schedule; its ``mod`` is what gets built.
        args_info: one :class:`~metaschedule.arg_info.ArgInfo` per parameter of the
            entry function. Stored as a tuple (the candidate is an immutable value).

    Candidates compare by identity, like the schedules they hold.
    """

    sch: Schedule
    args_info: Sequence[ArgInfo]

    def __post_init__(self):
        object.__setattr__(self, "args_info", tuple(self.args_info))
