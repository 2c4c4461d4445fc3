"""Primitives: rfactor, decompose_reduction (to be written)."""

from __future__ import annotations

from ..base import ScheduleBase


class ReductionMixin(ScheduleBase):
    pass
