"""Pass: simplify index expressions, loop bounds and conditions.

Uses the arithmetic simplifier with the ranges of the enclosing loops, so that e.g.
``(i0 * 8 + i1) // 8`` becomes ``i0`` when ``i1`` is in ``[0, 8)``, and an ``if`` whose
condition is decided (a split predicate that always holds) keeps only its live branch.
"""

from __future__ import annotations

from ..arith import Analyzer
from ..expr import BufferLoad, IntImm, PrimExpr
from ..function import PrimFunc
from ..functor import Mutator, replace_fields
from ..stmt import BufferStore, Evaluate, For, IfThenElse, Range, Stmt


class _Simplify(Mutator):
    def __init__(self) -> None:
        # loop variables are distinct objects, so a binding never needs to be undone
        self.analyzer = Analyzer()

    def simplify(self, e: PrimExpr) -> PrimExpr:
        out = self.analyzer.simplify(e)
        return out if out.dtype == e.dtype else e

    def visit_For(self, loop: For) -> Stmt:
        lo = self.simplify(loop.min)
        extent = self.simplify(loop.extent)
        self.analyzer.bind(loop.loop_var, Range(lo, extent), allow_override=True)
        body = self.visit(loop.body)
        if lo is loop.min and extent is loop.extent and body is loop.body:
            return loop
        return replace_fields(loop, min=lo, extent=extent, body=body)

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        load = self.generic_visit(load)
        indices = tuple(self.simplify(i) for i in load.indices)
        if all(a is b for a, b in zip(indices, load.indices)):
            return load
        return BufferLoad(load.buffer, indices)

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        store = self.generic_visit(store)
        indices = tuple(self.simplify(i) for i in store.indices)
        if all(a is b for a, b in zip(indices, store.indices)):
            return store
        return BufferStore(store.buffer, store.value, indices)

    def visit_IfThenElse(self, node: IfThenElse) -> Stmt:
        node = self.generic_visit(node)
        cond = self.simplify(node.condition)
        if isinstance(cond, IntImm):  # decided: keep only the branch that runs
            if cond.value:
                return node.then_case
            return node.else_case if node.else_case is not None else Evaluate(IntImm("int32", 0))
        return node if cond is node.condition else replace_fields(node, condition=cond)


def simplify_indices(func: PrimFunc) -> PrimFunc:
    """Simplify buffer indices, loop bounds and ``if`` conditions under the loop ranges."""
    return func.with_body(_Simplify().visit(func.body))
