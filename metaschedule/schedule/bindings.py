"""Block bindings after a loop nest changes: substitution and re-simplification.

``split`` and ``fuse`` replace loop variables by expressions of new loops
(``i -> i_0 * 8 + i_1``, ``i -> f // 6``). :class:`LoopVarRewriter` substitutes them
below the rewritten loop and re-simplifies the bindings of each block they reach with
the affine iter-map simplifier (TVM's ``IterMapSimplify``), so ``(i_0 * 8 + i_1) // 8``
becomes ``i_0`` and the forms of a fusion fold away when they cancel.

Replaying traces is on the search's hot path, so the rewriter avoids the simplifier
where its answer is known: blocks whose bindings do not change are kept, a plain
binding ``i`` of a perfectly split loop becomes the tiled sum directly, and a fused
loop's digit replaces a term ``i * s`` as it is (tests check these shortcuts give what
the simplifier gives). When a shortcut composes affine bindings with a bijection of the loops,
it records in the state's :class:`~.analysis.AffineMemo` that the new bindings are
affine too, so the checks of the following primitives (reorder, parallel...) need not
detect them again.
"""

from __future__ import annotations

import dataclasses
from collections import ChainMap
from collections.abc import Mapping, Sequence

from ..tir import Block, BlockRealize, For, IntImm, PrimExpr, Range, Var
from ..tir.arith import Analyzer
from ..tir.arith.iter_map import iter_map_simplify
from ..tir.buffer import Buffer
from ..tir.expr import Add, FloorDiv, FloorMod, Mul, Sub, const, is_const_int
from ..tir.functor import Mutator, collect_vars, substitute
from ..tir.structural_key import StructuralKey, Unkeyable
from .affine import AffineMemo, is_tiling_binding, known_affine, tiling_terms
from .analysis import expr_vars
from .state import ScheduleState

_ARITH = (Add, Sub, Mul, FloorDiv, FloorMod)


def is_true(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.dtype == "bool" and e.value == 1


def simplify_bindings(
    values: Sequence[PrimExpr],
    dom: Mapping[Var, Range],
    predicate: PrimExpr,
    preserve_unit_iters: bool,
) -> tuple[PrimExpr, ...]:
    """Bindings simplified as one affine iter map over ``dom`` (TVM's IterMapSimplify).

    With ``preserve_unit_iters=False`` unit-extent loop variables are replaced by their
    minimum; otherwise they are kept (the arith simplifier would fold them to their
    only value, so they are hidden from it as free symbols, which keeps every rewrite
    valid).
    """
    unit = {v: r.min for v, r in dom.items() if is_const_int(r.extent, 1)}
    if unit:
        dom = {v: r for v, r in dom.items() if v not in unit}
        if not preserve_unit_iters:
            values = [substitute(v, unit) for v in values]
            predicate = substitute(predicate, unit)
    return tuple(iter_map_simplify(list(values), dom, predicate))


class BindingsMemo:
    """Remembers :func:`simplify_bindings` by the structure of its arguments (their
    :class:`~..tir.structural_key.StructuralKey`), up to the identity of their variables
    and buffers: the replays of a design space simplify the same bindings over fresh loops
    again and again (a padding block fused and split alike in every schedule). Answers
    are pure functions of that structure, so one memo is shared by copies of a state; it
    holds at most ``_MAX_ENTRIES`` of them. Arguments it cannot key (a domain with a
    non-constant min or extent, a node the key does not describe, too many nodes) are
    simplified without it."""

    _MAX_ENTRIES = 4096

    def __init__(self) -> None:
        # key -> (the variables and buffers of the first call, its answer: an output that
        # was its input value is kept as the input's position, so that a hit returns the
        # caller's own value, as the simplifier does)
        self._memo: dict[tuple, tuple[tuple[Var | Buffer, ...], tuple[PrimExpr | int, ...]]] = {}

    def simplify(
        self,
        values: Sequence[PrimExpr],
        dom: Mapping[Var, Range],
        predicate: PrimExpr,
        preserve_unit_iters: bool,
    ) -> tuple[PrimExpr, ...]:
        """:func:`simplify_bindings` of the arguments."""
        keyer = StructuralKey()
        try:
            key = (
                tuple([keyer.key(v) for v in values]),
                keyer.key(predicate),
                tuple([_dom_key(keyer, v, r) for v, r in dom.items()]),
                preserve_unit_iters,
            )
        except Unkeyable:
            return simplify_bindings(values, dom, predicate, preserve_unit_iters)
        hit = self._memo.get(key)
        if hit is not None:
            vmap, bmap = keyer.renaming(hit[0])
            return tuple(
                values[out] if type(out) is int else substitute(out, vmap, bmap) for out in hit[1]
            )
        outs = simplify_bindings(values, dom, predicate, preserve_unit_iters)
        if keyer.covers(outs):
            if len(self._memo) >= self._MAX_ENTRIES:
                self._memo.clear()
            kept = tuple(k if out is v else out for k, (out, v) in enumerate(zip(outs, values)))
            self._memo[key] = (tuple(keyer.names), kept)
        return outs


def _dom_key(keyer: StructuralKey, v: Var, r: Range) -> tuple:
    """The key of a loop domain; only constant ones are keyed (raises
    :class:`~..tir.structural_key.Unkeyable`)."""
    if type(r.min) is not IntImm or type(r.extent) is not IntImm:
        raise Unkeyable
    return keyer.key(v), keyer.key(r.min), keyer.key(r.extent)


def bindings_memo(state: ScheduleState) -> BindingsMemo:
    """The state's memo of simplified bindings (shared by its copies)."""
    return state.memo("bindings", BindingsMemo)


def tiled_value(
    new_vars: Sequence[Var], factors: Sequence[int], preserve_unit_iters: bool
) -> PrimExpr | None:
    """``i_0 * (f_1 * f_2) + i_1 * f_2 + i_2``: the simplified value of a loop split into
    ``new_vars`` with extents ``factors`` (outermost first), as :func:`simplify_bindings`
    gives it; None when every term drops out (all unit loops not preserved)."""
    out: PrimExpr | None = None
    stride = 1
    terms = []
    for v, f in zip(reversed(new_vars), reversed(factors)):
        if f != 1 or preserve_unit_iters:
            terms.append(v if stride == 1 else Mul(v, const(stride, v.dtype)))
        stride *= f
    for t in reversed(terms):
        out = t if out is None else Add(out, t)
    return out


class LoopVarRewriter(Mutator):
    """Substitute loop variables below a rewritten loop and re-simplify the bindings.

    Args:
        vmap: old loop variable -> its value in the new loops.
        old_ranges: the ranges the old loop variables had (to transfer known affinity).
        outer: the domains of the loops above (new loops included), innermost last.
        predicate: added to every block below (an imperfect split), or None.
        preserve_unit_iters: see :func:`simplify_bindings`.
        memo: the state's memo of affine bindings (read and extended).
        fast_values: ``{id(value): (value, simplified)}``: when a binding is exactly a
            substituted value (the old binding was the plain loop variable), its
            simplified form, so a block that changes only that way skips the simplifier.
        digit_values: the values of ``vmap`` are digits of one new loop (``f // 8 % 4``,
            as fuse makes): a binding ``c + sum(v_k * s_k)`` in which one term's variable
            was substituted is then already simplified.
        simplified: the state's memo of simplified bindings, or None.

    It does not enter blocks: a well-formed block sees the loops only through its
    bindings (``verify_well_formed`` checks it).
    """

    def __init__(
        self,
        vmap: Mapping[Var, PrimExpr],
        old_ranges: Mapping[Var, Range],
        outer: Mapping[Var, Range],
        predicate: PrimExpr | None,
        preserve_unit_iters: bool,
        memo: AffineMemo,
        fast_values: Mapping[int, tuple[PrimExpr, PrimExpr]] | None = None,
        digit_values: bool = False,
        simplified: BindingsMemo | None = None,
    ):
        self.vmap = vmap
        self.old_ranges = old_ranges
        self.dom = dict(outer)
        self.predicate = predicate
        self.preserve_unit_iters = preserve_unit_iters
        self.memo = memo
        self.fast_values = fast_values or {}
        self.digit_values = digit_values
        self.simplified = simplified

    def visit_Var(self, v: Var) -> PrimExpr:
        return self.vmap.get(v, v)

    def _expr(self, e: PrimExpr) -> PrimExpr:
        """``e`` with ``vmap`` applied (quick on the integer arithmetic of bindings)."""
        if isinstance(e, IntImm):
            return e
        if isinstance(e, Var):
            return self.vmap.get(e, e)
        if type(e) in _ARITH:
            a, b = self._expr(e.a), self._expr(e.b)
            return e if a is e.a and b is e.b else type(e)(a, b)
        return self.visit(e)

    def visit_Block(self, node: Block) -> Block:
        return node

    def visit_For(self, node: For) -> For:
        lo, ext = self._expr(node.min), self._expr(node.extent)
        self.dom[node.loop_var] = Range(lo, ext)
        try:
            body = self.visit(node.body)
        finally:
            del self.dom[node.loop_var]
        if lo is node.min and ext is node.extent:
            return node if body is node.body else node.with_body(body)
        return dataclasses.replace(node, min=lo, extent=ext, body=body)

    def visit_BlockRealize(self, node: BlockRealize) -> BlockRealize:
        values = tuple(self._expr(v) for v in node.iter_values)
        pred = self._expr(node.predicate)
        same = pred is node.predicate and all(a is b for a, b in zip(values, node.iter_values))
        if self.predicate is not None:
            pred = self.predicate if is_true(pred) else pred & self.predicate
        elif same and self.preserve_unit_iters:
            return node  # nothing below changed and there is nothing to simplify away
        if self.predicate is None and pred is node.predicate:
            fast = self._fast(node.iter_values, values)
            if fast is not None:
                if all(a is b for a, b in zip(fast, node.iter_values)):
                    return node
                new = BlockRealize(fast, pred, node.block)
                # the old bindings composed with a bijection of the loops stay affine
                # (remembered unless the quick check sees it anyway)
                old_dom = ChainMap(dict(self.old_ranges), self.dom)
                if known_affine(node, old_dom, self.memo) and not is_tiling_binding(new, self.dom):
                    self.memo.put(new, self.dom, True)
                return new
        used = collect_vars((values, pred))
        dom = {v: r for v, r in self.dom.items() if v in used}
        # (whether the simplified bindings are affine is left to the checks that ask: the
        # simplifier keeps values, not always forms the affine detection recognises)
        if self.simplified is not None:
            values = self.simplified.simplify(values, dom, pred, self.preserve_unit_iters)
        else:
            values = simplify_bindings(values, dom, pred, self.preserve_unit_iters)
        pred = _simplify_predicate(pred, self.dom)
        if pred is node.predicate and all(a is b for a, b in zip(values, node.iter_values)):
            return node
        return BlockRealize(values, pred, node.block)

    def _fast(
        self, old: tuple[PrimExpr, ...], values: tuple[PrimExpr, ...]
    ) -> tuple[PrimExpr, ...] | None:
        """The simplified bindings when each one is unchanged or a plain substituted
        value; None when the simplifier is needed."""
        if not self.fast_values and not self.digit_values:
            return None
        out = []
        for o, v in zip(old, values):
            hit = self.fast_values.get(id(v))
            digit = self._one_digit_term(o) if self.digit_values and v is not o else None
            if hit is not None and hit[0] is v:
                out.append(hit[1])
            elif v is o:
                out.append(v)
            elif digit is not None:  # a unit loop's digit is 0: its term goes away
                out.append(_drop_term(o, digit) if isinstance(self.vmap[digit], IntImm) else v)
            else:
                return None  # a substituted variable inside a larger expression
        if not self.preserve_unit_iters:  # unit loops in unchanged bindings go away
            used = expr_vars(old)
            if any(is_const_int(r.extent, 1) for v, r in self.dom.items() if v in used):
                return None
        return tuple(out)

    def _one_digit_term(self, old: PrimExpr) -> Var | None:
        """The variable substituted in ``old`` when ``old`` is ``c + sum(v_k * s_k)`` with
        exactly one substituted ``v_k``; else None."""
        terms = tiling_terms(old)
        if terms is None:
            return None
        hits = [v for v, _ in terms if v in self.vmap]
        digit_kinds = (Var, FloorDiv, FloorMod, IntImm)
        if len(hits) != 1 or not isinstance(self.vmap[hits[0]], digit_kinds):
            return None
        return hits[0]


def _is_term_of(e: PrimExpr, var: Var) -> bool:
    return e is var or (isinstance(e, Mul) and e.a is var)


def _drop_term(e: PrimExpr, var: Var) -> PrimExpr:
    """``e`` (a sum of terms, one of them ``var`` or ``var * s``) without that term: what
    simplifying ``e`` with ``var = 0`` gives."""
    if _is_term_of(e, var):
        return const(0, e.dtype)
    if isinstance(e, Add):
        if _is_term_of(e.b, var):
            return e.a
        if _is_term_of(e.a, var):
            return e.b
        a, b = _drop_term(e.a, var), _drop_term(e.b, var)
        return e if a is e.a and b is e.b else Add(a, b)
    return e


def _simplify_predicate(pred: PrimExpr, dom: Mapping[Var, Range]) -> PrimExpr:
    if is_true(pred):
        return pred
    ana = Analyzer()
    for v, r in dom.items():
        ana.bind(v, r)
    return ana.simplify(pred)
