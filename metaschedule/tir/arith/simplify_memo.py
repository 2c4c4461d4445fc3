"""Simplified expressions remembered by their structure, up to the identity of their
variables and buffers.

The tuner simplifies the same index arithmetic over and over: every schedule it replays
has fresh loop variables, but the same bindings, regions and layouts (on cbr's search,
42709 simplifications of 1878 distinct structures). The simplifier's answer is a function
of the expression's structure and of the bounds of its variables (it keys atoms
structurally, variables and buffers by identity, and orders terms by first appearance),
so an answer found for one expression is another's after renaming: :class:`SimplifyMemo`
keys an expression by its structure with its variables (and their bounds) and buffers
numbered by first appearance, and instantiates a remembered answer with the caller's
variables and buffers. An answer that was its input unchanged is the caller's input.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .. import expr as E
from ..buffer import Buffer
from ..functor import collect_vars, substitute

__all__ = ["SimplifyMemo"]

Bound = tuple[int, int]


class _Opaque(Exception):
    """A node the structural key does not describe: the expression is not remembered."""


class SimplifyMemo:
    """At most ``max_size`` simplified expressions (then it starts afresh), by structure.

    Args:
        max_size: the most entries kept.
    """

    def __init__(self, max_size: int = 4096) -> None:
        self.max_size = max_size
        # structure -> (the first caller's variables and buffers in order of appearance,
        # its answer, whether the answer was its input)
        self._items: dict[tuple, tuple[tuple[Any, ...], E.PrimExpr, bool]] = {}

    def simplify(
        self,
        expr: E.PrimExpr,
        bounds: Mapping[E.Var, Bound],
        compute: Callable[[E.PrimExpr], E.PrimExpr],
    ) -> E.PrimExpr:
        """``compute(expr)``, the simplification of ``expr`` under the variable ``bounds``
        (and nothing else known of its variables), or its remembered answer."""
        structure = _Structure(bounds)
        try:
            key = structure.key(expr)
        except _Opaque:
            return compute(expr)
        names = structure.names
        hit = self._items.get(key)
        if hit is not None:
            order, out, unchanged = hit
            if unchanged:
                return expr
            vmap: dict[E.Var, E.PrimExpr] = {}
            bmap: dict[Buffer, Buffer] = {}
            for old, new in zip(order, names):
                if isinstance(old, Buffer):
                    bmap[old] = new
                else:
                    vmap[old] = new
            return substitute(out, vmap, bmap)
        out = compute(expr)
        if out is expr or collect_vars(out) <= names.keys():
            if len(self._items) >= self.max_size:
                self._items.clear()
            self._items[key] = (tuple(names), out, out is expr)
        return out


#: most nodes of an expression remembered (a tree walk keys it: index arithmetic is small,
#: and a DAG of shared subexpressions must not be walked path by path)
MAX_NODES = 256


class _Structure:
    """The structure of one expression; variables as their order of appearance, dtype and
    bound, buffers as their order and dtype (both recorded in ``names``)."""

    def __init__(self, bounds: Mapping[E.Var, Bound]) -> None:
        self.bounds = bounds
        self.names: dict[Any, tuple] = {}
        self.budget = MAX_NODES

    def key(self, e: Any) -> tuple:
        t = type(e)
        if t is E.Var:
            k = self.names.get(e)
            if k is None:
                k = self.names[e] = (len(self.names), e.dtype, self.bounds.get(e))
            return k
        if t is E.IntImm:
            return (e.dtype, e.value)
        self.budget -= 1
        if self.budget < 0:
            raise _Opaque
        if isinstance(e, E.BinaryOp):
            return (t, self.key(e.a), self.key(e.b))
        if t is E.FloatImm:
            return (t, e.dtype, repr(e.value))
        if t is E.Cast:
            return (t, e.dtype, self.key(e.value))
        if t is E.Select:
            return (t, self.key(e.condition), self.key(e.true_value), self.key(e.false_value))
        if t is E.Not:
            return (t, self.key(e.a))
        if t is E.BufferLoad:
            buf = e.buffer
            k = self.names.get(buf)
            if k is None:
                k = self.names[buf] = (len(self.names), "buffer", buf.dtype)
            return (t, k, *[self.key(i) for i in e.indices])
        if t is E.Call:
            return (t, e.dtype, e.op, *[self.key(a) for a in e.args])
        if t is E.StringImm:
            return (t, e.value)
        raise _Opaque
