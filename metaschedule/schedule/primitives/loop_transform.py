"""Primitives: split, fuse, reorder, add_unit_loop (to be written)."""

from __future__ import annotations

from ..base import ScheduleBase


class LoopTransformMixin(ScheduleBase):
    pass
