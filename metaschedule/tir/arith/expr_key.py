"""Structural keys of expressions (hash-consing) and the expression-tree walks the
simplifier and iter-map analysis share."""

from __future__ import annotations

from typing import Any

from .. import expr as E

__all__ = ["ExprKeyer", "expr_children", "free_vars"]

#: ``EqualOp``/``NotEqualOp`` (the ``==``/``!=`` of te) key like ``EQ``/``NE``.
_CMP_CLASS = {E.EqualOp: E.EQ, E.NotEqualOp: E.NE}


class ExprKeyer:
    """Hash-consing of expressions: structurally equal expressions get the same int key.

    Variables and buffers are distinguished by identity. Keys are only meaningful within
    one keyer.
    """

    def __init__(self):
        self._memo: dict[int, tuple[Any, int]] = {}
        self._table: dict[tuple, int] = {}

    def key(self, e: Any) -> int:
        memo = self._memo
        hit = memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        stack = [e]  # explicit post-order: expressions may be thousands of nodes deep
        while stack:
            node = stack[-1]
            pending = []
            for c in expr_children(node):
                h = memo.get(id(c))
                if h is None or h[0] is not c:
                    pending.append(c)
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            h = memo.get(id(node))
            if h is not None and h[0] is node:
                continue
            shape = self._shape(node)
            k = self._table.get(shape)
            if k is None:
                k = self._table[shape] = len(self._table)
            memo[id(node)] = (node, k)
        return memo[id(e)][1]

    def _known(self, e: Any) -> bool:
        hit = self._memo.get(id(e))
        return hit is not None and hit[0] is e

    def lookup(self, shape: tuple) -> int | None:
        """The key of an expression of this shape, if one was ever keyed."""
        return self._table.get(shape)

    def _shape(self, e: Any) -> tuple:
        if isinstance(e, E.IntImm):
            return ("int", e.dtype, e.value)
        if isinstance(e, E.Var):
            return ("var", id(e))
        if isinstance(e, E.FloatImm):
            return ("float", e.dtype, repr(e.value))
        if isinstance(e, E.BinaryOp):
            cls = _CMP_CLASS.get(type(e), type(e))
            return (cls.__name__, self.key(e.a), self.key(e.b))
        if isinstance(e, E.Not):
            return ("not", self.key(e.a))
        if isinstance(e, E.Select):
            return (
                "select",
                self.key(e.condition),
                self.key(e.true_value),
                self.key(e.false_value),
            )
        if isinstance(e, E.Cast):
            return ("cast", e.dtype, self.key(e.value))
        if isinstance(e, E.Call):
            return ("call", e.dtype, e.op, *[self.key(a) for a in e.args])
        if isinstance(e, E.BufferLoad):
            return ("load", id(e.buffer), *[self.key(i) for i in e.indices])
        if isinstance(e, E.StringImm):
            return ("str", e.value)
        return ("node", id(e))


def expr_children(e: Any) -> tuple:
    """The sub-expressions of an expression node (empty for leaves and unknown nodes)."""
    if isinstance(e, E.BinaryOp):
        return (e.a, e.b)
    if isinstance(e, (E.Cast,)):
        return (e.value,)
    if isinstance(e, E.Not):
        return (e.a,)
    if isinstance(e, E.Select):
        return (e.condition, e.true_value, e.false_value)
    if isinstance(e, E.Call):
        return e.args
    if isinstance(e, E.BufferLoad):
        return e.indices
    return ()


def free_vars(e: Any) -> set[E.Var]:
    """The variables of an expression (iteratively; ``Reduce`` bodies are not entered)."""
    out: set[E.Var] = set()
    seen: set[int] = set()
    stack = [e]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, E.Var):
            out.add(node)
        else:
            stack.extend(expr_children(node))
    return out
