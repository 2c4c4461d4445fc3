"""Placeholder printer: replaced by the full script printer."""

from __future__ import annotations


def script(node) -> str:
    from . import expr as E

    if isinstance(node, E.Var):
        return node.name
    if isinstance(node, (E.IntImm, E.FloatImm)):
        return repr(node.value)
    if isinstance(node, E.BinaryOp):
        return f"({script(node.a)} {node.symbol} {script(node.b)})"
    return f"<{type(node).__name__}>"
