"""Keys of expressions by their structure, up to a renaming of their variables and buffers.

The memos of the search's hot path remember answers that depend only on the structure
of their arguments (the simplifier's answer, the simplified bindings of a block), while
every schedule replayed brings fresh variables. :class:`StructuralKey` keys such
arguments as hashable tuples: a variable is its order of first appearance, its dtype and
its bound (when bounds are given), a buffer its order and dtype, a constant its dtype and
value; two expressions get equal keys exactly when one is the other with its variables
and buffers renamed (bounds and dtypes kept). A memo stores its answer with ``names``
(the first caller's variables and buffers, in order) and instantiates it for a later
caller with :meth:`StructuralKey.renaming`.

Unlike :mod:`.structural` (equality and hashing of whole IR nodes, statements included),
this keys small expressions for a dictionary lookup: a tree walk bounded by a number of
nodes, which gives up (:class:`Unkeyable`) on what it does not describe.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from . import expr as E
from .buffer import Buffer
from .functor import post_order_visit

__all__ = ["MAX_NODES", "Bound", "StructuralKey", "Unkeyable"]

#: inclusive bounds of a variable
Bound = tuple[int, int]

#: most inner nodes keyed by one :class:`StructuralKey` (a tree walk keys them: index
#: arithmetic is small, and a DAG of shared subexpressions must not be walked path by path)
MAX_NODES = 256

_NO_BOUNDS: Mapping[E.Var, Bound] = {}


class Unkeyable(Exception):
    """A node :class:`StructuralKey` does not describe, or more than its node budget:
    the memo computes its answer without remembering it."""


class StructuralKey:
    """Keys expressions, variables numbered by first appearance across every :meth:`key`
    call of this instance (so the keys of several expressions are one joint key).

    Args:
        bounds: the bounds of variables, part of their keys (None for those not in it).
        max_nodes: the most inner nodes keyed; beyond it :meth:`key` raises
            :class:`Unkeyable`.

    Attributes:
        names: the variables and buffers met, in order of first appearance, with their keys.
    """

    def __init__(self, bounds: Mapping[E.Var, Bound] = _NO_BOUNDS, max_nodes: int = MAX_NODES):
        self.bounds = bounds
        self.names: dict[E.Var | Buffer, tuple] = {}
        self.budget = max_nodes

    def key(self, e: Any) -> tuple:
        """``e``'s key. Raises :class:`Unkeyable`."""
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
            raise Unkeyable
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
        raise Unkeyable

    def covers(self, node: Any) -> bool:
        """Whether every variable and buffer (of a load) in ``node`` was keyed: an answer
        that :meth:`renaming` can turn wholly into a later caller's names."""
        names = self.names
        outside: list[Any] = []

        def check(x: Any) -> None:
            if type(x) is E.Var:
                if x not in names:
                    outside.append(x)
            elif type(x) is E.BufferLoad and x.buffer not in names:
                outside.append(x.buffer)

        post_order_visit(node, check)
        return not outside

    def renaming(
        self, first: Iterable[E.Var | Buffer]
    ) -> tuple[dict[E.Var, E.PrimExpr], dict[Buffer, Buffer]]:
        """The maps (for :func:`~.functor.substitute`) from ``first``, the ``names`` of
        expressions keyed alike, to this key's names."""
        vmap: dict[E.Var, E.PrimExpr] = {}
        bmap: dict[Buffer, Buffer] = {}
        for old, new in zip(first, self.names):
            # (equal keys: ``new`` is a buffer exactly when ``old`` is)
            if isinstance(old, Buffer):
                bmap[old] = new  # type: ignore[assignment]
            else:
                vmap[old] = new  # type: ignore[assignment]
        return vmap, bmap
