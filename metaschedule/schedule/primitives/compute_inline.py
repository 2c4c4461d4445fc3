"""Primitives: compute_inline, reverse_compute_inline (to be written)."""

from __future__ import annotations

from ..base import ScheduleBase


class ComputeInlineMixin(ScheduleBase):
    pass
