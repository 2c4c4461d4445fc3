"""Counting the arithmetic of a store: the ``ops`` slots (see ``layout.OP_NAMES``)."""

from __future__ import annotations

from ...tir import expr as E
from ...tir.dtype import is_float
from ...tir.op import BINARY_INTRINSICS, UNARY_INTRINSICS
from ...tir.stmt import BufferStore
from .layout import OP_NAMES

__all__ = ["count_ops", "count_store"]

_MATH_OPS = frozenset(UNARY_INTRINSICS) | frozenset(BINARY_INTRINSICS)
_INT = len(OP_NAMES) // 2 - 1  # the int kinds start after the seven float kinds
_BOOL, _SELECT = len(OP_NAMES) - 2, len(OP_NAMES) - 1


def count_ops(e: E.PrimExpr, counts: list[float], loads: list[E.BufferLoad]) -> None:
    """Add ``e``'s operations to ``counts`` (indexed as OP_NAMES); collect its loads.

    ``x*y + z`` counts one mad; min/max count as cmp; index arithmetic counts as int ops.
    """
    t = type(e)
    if t is E.Var or t is E.IntImm or t is E.FloatImm or t is E.StringImm:
        return
    if t is E.BufferLoad:
        loads.append(e)
        for i in e.indices:
            count_ops(i, counts, loads)
        return
    base = 0 if is_float(e.dtype) else _INT
    if t is E.Add or t is E.Sub:
        for mul, other in ((e.a, e.b), (e.b, e.a)):
            if type(mul) is E.Mul:
                counts[base] += 1  # mad
                count_ops(mul.a, counts, loads)
                count_ops(mul.b, counts, loads)
                count_ops(other, counts, loads)
                return
        counts[base + 1] += 1
    elif t is E.Mul:
        counts[base + 2] += 1
    elif t is E.Div or t is E.FloorDiv or t is E.FloorMod:
        counts[base + 3] += 1
    elif isinstance(e, E.CmpOp) or t is E.Min or t is E.Max:
        counts[(0 if is_float(e.a.dtype) else _INT) + 4] += 1
    elif t is E.And or t is E.Or or t is E.Not:
        counts[_BOOL] += 1
    elif t is E.Select:
        counts[_SELECT] += 1
        for x in (e.condition, e.true_value, e.false_value):
            count_ops(x, counts, loads)
        return
    elif t is E.Call:
        counts[base + (5 if e.op in _MATH_OPS else 6)] += 1
        for x in e.args:
            count_ops(x, counts, loads)
        return
    if t is E.Cast:
        count_ops(e.value, counts, loads)
    elif t is E.Not:
        count_ops(e.a, counts, loads)
    elif isinstance(e, E.BinaryOp):
        count_ops(e.a, counts, loads)
        count_ops(e.b, counts, loads)


def count_store(store: BufferStore) -> tuple[list[float], list[E.BufferLoad]]:
    """The op counts of one execution of ``store`` (value and indices), and its loads."""
    ops = [0.0] * len(OP_NAMES)
    loads: list[E.BufferLoad] = []
    count_ops(store.value, ops, loads)
    for idx in store.indices:
        count_ops(idx, ops, loads)
    return ops, loads
