"""Simplified expressions remembered by their structure, up to the identity of their
variables and buffers.

The tuner simplifies the same index arithmetic over and over: every schedule it replays
has fresh loop variables, but the same bindings, regions and layouts (on cbr's search,
42709 simplifications of 1878 distinct structures). The simplifier's answer is a function
of the expression's structure and of the bounds of its variables (it keys atoms
structurally, variables and buffers by identity, and orders terms by first appearance),
so an answer found for one expression is another's after renaming: :class:`SimplifyMemo`
keys an expression by its :class:`~..structural_key.StructuralKey` (variables with their
bounds), and instantiates a remembered answer with the caller's variables and buffers.
An answer that was its input unchanged is the caller's input.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .. import expr as E
from ..functor import substitute
from ..structural_key import Bound, StructuralKey, Unkeyable

__all__ = ["SimplifyMemo"]


class SimplifyMemo:
    """At most ``max_size`` simplified expressions (then it starts afresh), by structure.

    Args:
        max_size: the most entries kept.
    """

    def __init__(self, max_size: int = 4096) -> None:
        self.max_size = max_size
        # key -> (the first caller's variables and buffers in order of appearance, its
        # answer, whether the answer was its input)
        self._items: dict[tuple, tuple[tuple[Any, ...], E.PrimExpr, bool]] = {}

    def simplify(
        self,
        expr: E.PrimExpr,
        bounds: Mapping[E.Var, Bound],
        compute: Callable[[E.PrimExpr], E.PrimExpr],
    ) -> E.PrimExpr:
        """``compute(expr)``, the simplification of ``expr`` under the variable ``bounds``
        (and nothing else known of its variables), or its remembered answer."""
        keyer = StructuralKey(bounds)
        try:
            key = keyer.key(expr)
        except Unkeyable:
            return compute(expr)
        hit = self._items.get(key)
        if hit is not None:
            first, out, unchanged = hit
            if unchanged:
                return expr
            return substitute(out, *keyer.renaming(first))
        out = compute(expr)
        if out is expr or keyer.covers(out):
            if len(self._items) >= self.max_size:
                self._items.clear()
            self._items[key] = (tuple(keyer.names), out, out is expr)
        return out
