"""Weight layouts for the default schedule: give a constant parameter of a PrimFunc a new
layout (:func:`metaschedule.schedule.prepacked.rewrite_param_layout`, recorded in
``attrs["prepacked_args"]``) so that :func:`metaschedule.graph.build.prepack_weights`
re-lays the weight out once, at compile time (what the RewriteLayout postprocessor does
for tuned schedules).

A convolution vectorized over its output channels wants its OIHW kernel as
``[F // v, C, KH, KW, v]`` (OIHW{v}o): the ``v`` channels one vector step reads are
contiguous, and the loop over ``C, KH, KW`` walks the weight in order. In NHWC the
HWIO kernel becomes ``[F // v, KH, KW, C, v]`` for the loop over ``KH, KW, C``.
"""

from __future__ import annotations

from ..schedule.index_map import IndexMap
from ..schedule.prepacked import rewrite_param_layout

__all__ = ["hwio_to_blocked", "oihw_to_blocked", "rewrite_param_layout"]


def oihw_to_blocked(v: int) -> IndexMap:
    """``[F, C, KH, KW] -> [F // v, C, KH, KW, v]``."""
    return IndexMap.from_func(lambda f, c, y, x: (f // v, c, y, x, f % v), 4)


def hwio_to_blocked(v: int) -> IndexMap:
    """``[KH, KW, C, F] -> [F // v, KH, KW, C, v]``."""
    return IndexMap.from_func(lambda y, x, c, f: (f // v, y, x, c, f % v), 4)
