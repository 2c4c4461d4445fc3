"""Primitives: compute_at, reverse_compute_at, sample_compute_location (to be written)."""

from __future__ import annotations

from ..base import ScheduleBase


class ComputeLocationMixin(ScheduleBase):
    pass
