"""Generic traversal of the IR: a visitor, a rewriting mutator, and ``substitute``.

Both dispatch on the node's class name (``visit_For``, ``visit_BufferLoad``, ...)
and fall back to walking the dataclass fields, so a pass only writes the cases it
cares about. The mutator rebuilds a node only when one of its children changed.
Buffers are visited through ``visit_buffer`` (a hook to substitute buffers).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

from .buffer import Buffer
from .expr import Node, PrimExpr, Var


def _fields(node: Node):
    return [f for f in dataclasses.fields(node) if f.init]


class Visitor:
    """Walks every node; override ``visit_<ClassName>(node)`` and call ``generic_visit``."""

    def visit(self, node: Any) -> None:
        if isinstance(node, (tuple, list)):
            for x in node:
                self.visit(x)
            return
        if isinstance(node, dict):
            for x in node.values():
                self.visit(x)
            return
        if isinstance(node, Buffer):
            self.visit_buffer(node)
            return
        if not isinstance(node, Node):
            return
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            self.generic_visit(node)
        else:
            method(node)

    def generic_visit(self, node: Node) -> None:
        for f in _fields(node):
            self.visit(getattr(node, f.name))

    def visit_buffer(self, buffer: Buffer) -> None:
        """Called for every buffer reference; does not descend into its shape by default."""


class Mutator:
    """Rebuilds the tree bottom-up; override ``visit_<ClassName>(node)`` to rewrite."""

    def visit(self, node: Any) -> Any:
        if isinstance(node, tuple):
            new = tuple(self.visit(x) for x in node)
            return node if all(a is b for a, b in zip(new, node)) else new
        if isinstance(node, list):
            return [self.visit(x) for x in node]
        if isinstance(node, dict):
            new_d = {k: self.visit(v) for k, v in node.items()}
            return node if all(new_d[k] is node[k] for k in node) else new_d
        if isinstance(node, Buffer):
            return self.visit_buffer(node)
        if not isinstance(node, Node):
            return node
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            return self.generic_visit(node)
        return method(node)

    def generic_visit(self, node: Node) -> Node:
        changes = {}
        for f in _fields(node):
            old = getattr(node, f.name)
            new = self.visit(old)
            if new is not old:
                changes[f.name] = new
        if not changes:
            return node
        return dataclasses.replace(node, **changes)

    def visit_buffer(self, buffer: Buffer) -> Buffer:
        return buffer


def post_order_visit(node: Any, fn: Callable[[Node], None]) -> None:
    """Call ``fn`` on every node (children first). Buffers are not descended into."""

    class _V(Visitor):
        def visit(self, n):
            super().visit(n)
            if isinstance(n, Node) and not isinstance(n, Buffer):
                fn(n)

    _V().visit(node)


class _Substituter(Mutator):
    def __init__(self, vmap: Mapping[Var, PrimExpr], bmap: Mapping[Buffer, Buffer] | None):
        self.vmap = vmap
        self.bmap = bmap or {}

    def visit_Var(self, v: Var) -> PrimExpr:
        return self.vmap.get(v, v)

    def visit_buffer(self, b: Buffer) -> Buffer:
        return self.bmap.get(b, b)


def substitute(node: Any, vmap: Mapping[Var, Any], bmap: Mapping[Buffer, Buffer] | None = None):
    """Replace variables (and optionally buffers) in ``node``; Python numbers are converted."""
    from .expr import convert

    vmap = {k: convert(v) for k, v in vmap.items()}
    if not vmap and not bmap:
        return node
    return _Substituter(vmap, bmap).visit(node)


def collect_vars(node: Any) -> set[Var]:
    """All variables used in ``node`` (free or bound)."""
    out: set[Var] = set()

    def f(n):
        if isinstance(n, Var):
            out.add(n)

    post_order_visit(node, f)
    return out


def uses_var(node: Any, pred: Callable[[Var], bool]) -> bool:
    return any(pred(v) for v in collect_vars(node))
