"""Primitives: set_scope, storage_align, transform_layout (to be written)."""

from __future__ import annotations

from ..base import ScheduleBase


class LayoutMixin(ScheduleBase):
    pass
