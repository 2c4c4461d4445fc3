"""Operator fusion in the manner of TVM's FuseOps.

Calls are visited in order; a call joins the group of the producer of one of its
arguments when that value has no other reader and is not a model output, and the
patterns allow it:

* element-wise and broadcast calls join any group (conv + bias + relu, matmul + bias +
  GELU, a reduction and its epilogue);
* injective calls (reshape, transpose, slices, ...) join groups of injective calls;
* reductions (softmax, layer norm, reduce, global pooling) join groups of injective
  calls (their producers' element-wise work is inlined into them);
* convolutions, matmuls and pooling (OUT_EWISE_FUSABLE) start a group.

A group has at most one call of pattern COMM_REDUCE or above (its anchor).

A group is also bounded, since its calls end up as one expression once the default or a
tuned schedule inlines them: at most :data:`MAX_FUSED_CALLS` calls, and the expression
estimated for its output at most :data:`MAX_INLINED_NODES` nodes and
:data:`MAX_INLINED_DEPTH` deep (a call that reads its input twice, ``x / (1 + |x|)``,
doubles the size of what it inlines, so sixteen of them in a row would be 65536 copies
of the first). A call that would take its producer's group over a bound starts a group
of its own. Without the bounds a model of a few thousand element-wise calls in a chain
(TVM fuses it into one function) takes minutes and then dies with ``RecursionError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..te import placeholder
from ..tir.buffer import Buffer
from ..tir.expr import PrimExpr
from ..tir.functor import walked_fields
from .ir import Call, Function
from .op import Pattern, get_op

__all__ = ["MAX_FUSED_CALLS", "MAX_INLINED_DEPTH", "MAX_INLINED_NODES", "Group", "fuse"]

#: the most calls one fused group holds
MAX_FUSED_CALLS = 64
#: the most expression nodes estimated for a group's output with its calls inlined
MAX_INLINED_NODES = 4096
#: the deepest expression estimated for a group's output with its calls inlined (the IR's
#: walks recurse about three Python frames per level, under Python's limit of 1000)
MAX_INLINED_DEPTH = 128


@dataclass
class Group:
    calls: list[Call] = field(default_factory=list)
    anchor: Pattern = Pattern.ELEMWISE
    #: the estimated size and depth of the output's expression, its calls inlined
    nodes: int = 0
    depth: int = 0

    @property
    def output(self) -> str:
        return self.calls[-1].name

    @property
    def name(self) -> str:
        ops = [c.op for c in self.calls]
        return ops[0] if len(ops) == 1 else "fused_" + "_".join(ops)


def _accepts(group: Group, pattern: Pattern) -> bool:
    if pattern <= Pattern.BROADCAST:
        return group.anchor < Pattern.OPAQUE
    if pattern == Pattern.INJECTIVE or pattern == Pattern.COMM_REDUCE:
        return group.anchor <= Pattern.INJECTIVE
    return False


@dataclass(frozen=True)
class _Cost:
    """The expression of one call alone: its size and depth, and per argument how often
    it is read and how deep the deepest read is."""

    nodes: int
    depth: int
    reads: dict[int, tuple[int, int]]  # argument position -> (reads, depth of the deepest)

    def joined(self, arg: int, group: Group) -> tuple[int, int]:
        """Size and depth with argument ``arg`` replaced by ``group``'s expression."""
        count, at = self.reads.get(arg, (0, 0))
        return self.nodes + count * max(group.nodes - 1, 0), max(self.depth, at + group.depth)


def _cost(func: Function, call: Call) -> _Cost | None:
    """The call's expression, lowered on placeholders of its arguments' types, measured
    with an explicit stack (None when the graph has no types: only the call cap holds)."""
    try:
        types = [func.type_of(a) for a in call.args]
    except KeyError:
        return None
    holders = [placeholder(t.shape, t.dtype, f"arg{i}") for i, t in enumerate(types)]
    position = {h.buffer: i for i, h in enumerate(holders)}
    out = get_op(call.op).lower(list(holders), call.attr)
    nodes, depth, reads = 0, 0, {}
    stack: list[tuple[object, int]] = [(b, 1) for b in getattr(out.op, "body", ())]
    while stack:
        node, level = stack.pop()
        if isinstance(node, (list, tuple)):
            stack.extend((x, level) for x in node)
            continue
        if not isinstance(node, PrimExpr):
            continue
        nodes += 1
        depth = max(depth, level)
        buffer = getattr(node, "buffer", None)
        if isinstance(buffer, Buffer) and buffer in position:
            i = position[buffer]
            count, at = reads.get(i, (0, 0))
            reads[i] = (count + 1, max(at, level))
        for name in walked_fields(type(node)):
            value = getattr(node, name)
            if not isinstance(value, Buffer):
                stack.append((value, level + 1))
    return _Cost(nodes, depth, reads)


def _fits(group: Group, joined: tuple[int, int] | None) -> bool:
    if len(group.calls) >= MAX_FUSED_CALLS:
        return False
    return joined is None or (joined[0] <= MAX_INLINED_NODES and joined[1] <= MAX_INLINED_DEPTH)


def fuse(func: Function) -> list[Group]:
    """The fused groups of ``func`` in execution order (each at its last call's place).

    No group goes over the bounds of the module docstring (:data:`MAX_FUSED_CALLS`,
    :data:`MAX_INLINED_NODES`, :data:`MAX_INLINED_DEPTH`): a call that would take one over
    them starts a group.
    """
    users = func.users()
    outputs = set(func.outputs)
    group_of: dict[str, Group] = {}
    order: list[Group] = []
    for call in func.calls:
        pattern = get_op(call.op).pattern
        cost = _cost(func, call)
        target, size = None, None
        for i, a in enumerate(call.args):
            g = group_of.get(a)
            if g is None or a != g.output or a in outputs or len(users.get(a, [])) != 1:
                continue
            joined = None if cost is None else cost.joined(i, g)
            if _accepts(g, pattern) and _fits(g, joined):
                target, size = g, joined
                break
        if target is None:
            target = Group()
            order.append(target)
            size = None if cost is None else (cost.nodes, cost.depth)
        else:  # keep groups ordered by their last call
            order.remove(target)
            order.append(target)
        target.calls.append(call)
        target.anchor = max(target.anchor, pattern)
        if size is not None:
            target.nodes, target.depth = size
        group_of[call.name] = target
    return order
