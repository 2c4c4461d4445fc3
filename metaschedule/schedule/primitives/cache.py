"""Primitives: cache_read, cache_write (to be written)."""

from __future__ import annotations

from ..base import ScheduleBase


class CacheMixin(ScheduleBase):
    pass
