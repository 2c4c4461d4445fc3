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
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .ir import Call, Function
from .op import Pattern, get_op


@dataclass
class Group:
    calls: list[Call] = field(default_factory=list)
    anchor: Pattern = Pattern.ELEMWISE

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


def fuse(func: Function) -> list[Group]:
    """The fused groups of ``func`` in execution order (each at its last call's place)."""
    users = func.users()
    outputs = set(func.outputs)
    group_of: dict[str, Group] = {}
    order: list[Group] = []
    for call in func.calls:
        pattern = get_op(call.op).pattern
        target = None
        for a in call.args:
            g = group_of.get(a)
            if g is None or a != g.output or a in outputs or len(users.get(a, [])) != 1:
                continue
            if _accepts(g, pattern):
                target = g
                break
        if target is None:
            target = Group()
            order.append(target)
        else:  # keep groups ordered by their last call
            order.remove(target)
            order.append(target)
        target.calls.append(call)
        target.anchor = max(target.anchor, pattern)
        group_of[call.name] = target
    return order
