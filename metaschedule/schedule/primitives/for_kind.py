"""Primitives: parallel, vectorize, unroll, bind (to be written)."""

from __future__ import annotations

from ..base import ScheduleBase


class ForKindMixin(ScheduleBase):
    pass
