"""Affine bindings: whether a block's bindings are an affine map of its loops.

Loop primitives (reorder, parallel, vectorize, bind, compute_at, rfactor) require it.
The full check is arith's ``detect_iter_map``; as trace replay asks it often, two
shortcuts come first: a structural test that recognises tilings (what splits of plain
loop variables and compute_at produce), and a memo of answers, keyed by the immutable
BlockRealize and the loop ranges, shared by copies of the schedule state.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..tir import Add, BlockRealize, IntImm, Mul, PrimExpr, Range, Var
from ..tir.arith.iter_map import is_affine_binding
from ..tir.expr import is_const_int
from .analysis import expr_vars, loop_doms
from .error import NotAffineError
from .state import ScheduleState


class AffineMemo:
    """Remembers whether a BlockRealize's bindings are affine over given loop domains.

    The answer is a pure function of the (immutable) BlockRealize and the ranges of the
    loops its bindings and predicate use, so one memo is shared by copies of a state.
    Entries hold their BlockRealize, which keeps its ``id`` (the key) from being reused;
    domains with symbolic bounds are not memoised (they may depend on other loops).
    """

    _MAX_ENTRIES = 4096

    def __init__(self):
        self._memo: dict[int, tuple[BlockRealize, tuple[Var, ...], tuple, bool]] = {}

    @staticmethod
    def _signature(used: tuple[Var, ...], dom: Mapping[Var, Range]) -> tuple | None:
        sig = []
        for k, v in enumerate(used):
            r = dom.get(v)
            if r is None:
                continue  # not a loop variable here: a symbolic constant
            if not (isinstance(r.min, IntImm) and isinstance(r.extent, IntImm)):
                return None
            sig.append((k, r.min.value, r.extent.value))
        return tuple(sig)

    def get(self, realize: BlockRealize, dom: Mapping[Var, Range]) -> bool | None:
        """The remembered answer, or None when unknown."""
        hit = self._memo.get(id(realize))
        if hit is None or hit[0] is not realize:
            return None
        sig = self._signature(hit[1], dom)
        return hit[3] if sig is not None and sig == hit[2] else None

    def put(self, realize: BlockRealize, dom: Mapping[Var, Range], value: bool) -> None:
        used = tuple(expr_vars((*realize.iter_values, realize.predicate)))
        sig = self._signature(used, dom)
        if sig is None:
            return
        if len(self._memo) >= self._MAX_ENTRIES:
            self._memo.clear()
        self._memo[id(realize)] = (realize, used, sig, value)


def affine_memo(state: ScheduleState) -> AffineMemo:
    """The state's memo of affine bindings (shared by its copies)."""
    return state.memo("affine", AffineMemo)


def tiling_terms(value: PrimExpr) -> list[tuple[PrimExpr, int]] | None:
    """``value`` as ``[(v, stride)]`` when it is ``c + v_0 * s_0 + v_1 * s_1 + ...`` with
    variables ``v_k`` and constants ``c`` (at most one) and ``s_k``; else None."""
    terms: list[tuple[PrimExpr, int]] = []
    stack = [value]
    consts = 0
    while stack:
        e = stack.pop()
        if isinstance(e, Add):
            stack += [e.a, e.b]
        elif isinstance(e, Var):
            terms.append((e, 1))
        elif isinstance(e, Mul) and isinstance(e.a, Var) and isinstance(e.b, IntImm):
            terms.append((e.a, e.b.value))
        elif isinstance(e, IntImm) and consts == 0:
            consts = 1
        else:
            return None
    return terms


def is_tiling_binding(realize: BlockRealize, dom: Mapping[Var, Range]) -> bool:
    """A cheap sufficient test of affine bindings: no predicate, and each binding is
    ``c + v_0 * s_0 + ... + v_n`` over loops of ``dom`` starting at 0 that no other
    binding uses, with strides that are the mixed radix of the loops' extents (what
    splits of plain loop variables, compute_at and cache stages produce). Such
    bindings are products of bijections, so the full check would accept them."""
    pred = realize.predicate
    if not (isinstance(pred, IntImm) and pred.value == 1):
        return False
    seen: set[Var] = set()
    for value in realize.iter_values:
        terms = tiling_terms(value)
        if terms is None:
            return False
        need = 1
        for v, stride in sorted(terms, key=lambda t: t[1]):
            r = dom.get(v)
            if r is None or v in seen:
                return False
            seen.add(v)
            if not (is_const_int(r.min, 0) and isinstance(r.extent, IntImm)):
                return False
            if r.extent.value == 1:
                continue  # a unit loop adds nothing
            if stride != need:
                return False
            need *= r.extent.value
    return True


def known_affine(
    realize: BlockRealize, dom: Mapping[Var, Range], memo: AffineMemo | None
) -> bool | None:
    """Whether the bindings are affine over ``dom`` when that is known without running
    the full detection (no bindings, :func:`is_tiling_binding`, or the memo)."""
    if not realize.iter_values or is_tiling_binding(realize, dom):
        return True
    return memo.get(realize, dom) if memo is not None else None


def binding_is_affine(
    realize: BlockRealize, dom: Mapping[Var, Range], memo: AffineMemo | None = None
) -> bool:
    """True when the block's bindings are a surjective affine map of the loops in ``dom``."""
    known = known_affine(realize, dom, memo)
    if known is not None:
        return known
    ok = is_affine_binding(realize.iter_values, dom, realize.predicate)
    if memo is not None:
        memo.put(realize, dom, ok)
    return ok


def has_affine_binding(state: ScheduleState, fname: str, realize: BlockRealize) -> bool:
    """True when the block's bindings are a surjective affine map of its loops."""
    dom = loop_doms(state.loops_above(fname, realize))
    return binding_is_affine(realize, dom, affine_memo(state))


def check_affine_binding(
    state: ScheduleState, fname: str, realize: BlockRealize, primitive: str
) -> None:
    """Raise a NotAffineError unless the block's bindings are affine in its loops.

    ``primitive`` starts the message (a primitive's name, or what cannot be done).
    """
    if not has_affine_binding(state, fname, realize):
        vals = ", ".join(str(v) for v in realize.iter_values)
        raise NotAffineError(
            f"{primitive}: block {realize.block.name_hint!r} has non-affine bindings [{vals}], "
            "not an affine map of its loops; the primitive needs affine bindings"
        )
