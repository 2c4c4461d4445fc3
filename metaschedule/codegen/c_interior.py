"""The share of a loop nest's iterations where a test holds (loop versioning's gain).

:mod:`.c_versioning` adds an unguarded copy of a loop body only when enough of the
iterations take it: :func:`interior_share` evaluates the copy's test with numpy over
every point of the nest, or over a sample of :data:`SHARE_POINTS` of a larger one.
"""

from __future__ import annotations

import numpy as np

from ..tir import expr as E
from ..tir.stmt import For
from .c_ir import int_value

__all__ = ["SHARE_POINTS", "interior_share"]

#: Iteration points :func:`interior_share` evaluates the test at (all, or a sample).
SHARE_POINTS = 1 << 16


def interior_share(test: E.PrimExpr, loops: list[For]) -> float | None:
    """The share of the iterations of ``loops`` (outermost first) where ``test`` holds:
    exact over up to :data:`SHARE_POINTS` points, else estimated from as many random
    ones; None when a loop's range is not constant."""
    sizes = []
    for f in loops:
        if not (isinstance(f.min, E.IntImm) and isinstance(f.extent, E.IntImm)):
            return None
        sizes.append(f.extent.value)
    total = int(np.prod(sizes, dtype=np.int64)) if sizes else 1
    if total <= SHARE_POINTS:
        grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in sizes], indexing="ij")
        points = [g.ravel() for g in grids]
    else:
        rng = np.random.default_rng(0)
        points = [rng.integers(0, n, SHARE_POINTS, dtype=np.int64) for n in sizes]
    env = {f.loop_var: p + int_value(f.min) for f, p in zip(loops, points)}
    try:
        held = _evaluate(test, env)
    except _Opaque:
        return None
    return float(np.mean(np.broadcast_to(held, points[0].shape if points else ())))


class _Opaque(Exception):
    """An expression :func:`_evaluate` does not know."""


def _evaluate(e: E.PrimExpr, env: dict) -> np.ndarray:
    """``e`` at every point of ``env`` (variable -> values), with numpy."""
    if isinstance(e, E.Var):
        if e not in env:
            raise _Opaque(e.name)
        return env[e]
    if isinstance(e, E.IntImm):
        return np.int64(e.value)
    if isinstance(e, E.Cast):
        return _evaluate(e.value, env)
    ops = {
        E.Add: np.add,
        E.Sub: np.subtract,
        E.Mul: np.multiply,
        E.FloorDiv: np.floor_divide,
        E.FloorMod: np.mod,
        E.Min: np.minimum,
        E.Max: np.maximum,
        E.LT: np.less,
        E.LE: np.less_equal,
        E.GT: np.greater,
        E.GE: np.greater_equal,
        E.And: np.logical_and,
    }
    if not isinstance(e, E.BinaryOp) or (fn := ops.get(type(e))) is None:
        raise _Opaque(type(e).__name__)
    return fn(_evaluate(e.a, env), _evaluate(e.b, env))
