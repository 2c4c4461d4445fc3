"""Primitives: blockize (to be written)."""

from __future__ import annotations

from ..base import ScheduleBase


class BlockizeMixin(ScheduleBase):
    pass
