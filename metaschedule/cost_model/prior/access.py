"""How one store's accesses move through its loops, for the analytic prior: index forms
with ``//`` and ``%`` simplified over the loops' ranges (:class:`IndexForms`), flat strides
(:func:`flat_strides`), per-buffer footprints (:func:`buffer_stats`), the perfect part of
the nest (:func:`perfect_from`), and the padding guards the code generator versions away
(:func:`padding_guards`).
"""

from __future__ import annotations

from typing import Any

from ...feature_extractor.features.buffers import BufferStats
from ...feature_extractor.features.linear import LinearForm
from ...feature_extractor.features.loop_nest import Store, const_int
from ...tir import expr as E
from ...tir.arith.analyzer import Analyzer
from ...tir.dtype import is_float
from ...tir.stmt import Range
from .machine import Machine

__all__ = [
    "flat_strides",
    "affine_in",
    "renumbered",
    "is_init",
    "IndexForms",
    "IndexMemo",
    "padding_guards",
    "buffer_stats",
    "first_strides",
    "perfect_from",
]


def flat_strides(buf: Any, lin: list[LinearForm], n: int) -> list[float]:
    """Elements the row-major address of an access moves per step of each loop.

    A loop inside ``v % c`` (a fused loop, emitted as a loop over ``v // c`` around a
    vector loop over ``v % c``) moves the address by its coefficient in the modulus
    only: its ``v // c`` part steps once per ``c`` iterations.
    """
    shape = [const_int(s, 0) for s in buf.shape]
    row = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        row[d] = row[d + 1] * max(1, shape[d + 1])
    flat = [0.0] * n
    for d, form in enumerate(lin):
        in_mod = {j for coefs, _ in form.capped for j in coefs}
        for j in form.loops():
            if j in in_mod:
                flat[j] += row[d] * sum(c.get(j, 0.0) for c, _ in form.capped)
            else:
                flat[j] += row[d] * form.coef(j)
    return flat


def affine_in(lin: list[LinearForm], j: int) -> bool:
    """Whether loop ``j`` enters the indices with integer coefficients only (no ``//``,
    ``%``): what the code generator's register tiles need of the vector loop."""
    for form in lin:
        if any(j in coefs for coefs, _ in form.capped):
            return False
        c = form.plain.get(j, 0.0)
        if c != int(c):
            return False
    return True


def renumbered(form: LinearForm, new: dict[int, int]) -> LinearForm:
    """``form`` with its loop positions renumbered by ``new`` (old -> new position)."""
    return LinearForm(
        {new[j]: c for j, c in form.plain.items()},
        [({new[j]: c for j, c in coefs.items()}, cap) for coefs, cap in form.capped],
        form.const,
    )


def is_init(st: Store) -> bool:
    """Whether the store writes a constant (a reduction's init)."""
    return isinstance(st.store.value, (E.IntImm, E.FloatImm))


class IndexForms:
    """The :class:`LinearForm` of an index of one store, ``//`` and ``%`` by a constant
    first simplified over the loops' ranges: a channel ``c`` split as ``c_o*16 + c_i``
    and read from a weight packed as ``[c // 16, ..., c % 16]`` (RewriteLayout) steps
    that weight by 1 along ``c_i``, as the code generator emits it, not by
    ``1 + stride/16`` (a gather) as the unsimplified form says."""

    #: most simplified indices a memo holds
    MAX_MEMO = 16384

    def __init__(self, st: Store, pos: dict[E.Var, int], memo: IndexMemo | None = None) -> None:
        self.st, self.pos = st, pos
        self._analyzer: Analyzer | None = None
        self.memo = memo

    def __call__(self, index: E.PrimExpr) -> LinearForm:
        if not _has_divmod(index):
            return LinearForm.of(index, self.pos)
        memo, key = self.memo, None
        if memo is not None:
            key = self._key(index)
            hit = memo.get(key) if key is not None else None
            if hit is not None:  # simplified for another store: its loops' positions
                return LinearForm.of(*hit)
        if self._analyzer is None:
            self._analyzer = Analyzer()
            for lp in self.st.loops:
                self._analyzer.bind(
                    lp.var, Range(E.const(0), E.const(max(1, lp.extent))), allow_override=True
                )
        simple = self._analyzer.simplify(index)
        if memo is not None and key is not None:
            if len(memo) >= self.MAX_MEMO:
                memo.clear()
            memo[key] = (simple, self.pos)
        return LinearForm.of(simple, self.pos)

    def _key(self, e: E.PrimExpr) -> tuple | None:
        """``e`` with its loop variables as (position, extent): what the simplified
        index depends on; None for another variable or node."""
        t = type(e)  # tested as type(e) below where that narrows e for the type checker
        if type(e) is E.Var:
            j = self.pos.get(e)
            return None if j is None else (j, self.st.loops[j].extent, e.dtype)
        if type(e) is E.IntImm:
            return (e.dtype, e.value)
        if t in _INDEX_OPS and isinstance(e, E.BinaryOp):
            a, b = self._key(e.a), self._key(e.b)
            return None if a is None or b is None else (t, a, b)
        if type(e) is E.Cast:
            a = self._key(e.value)
            return None if a is None else (t, e.dtype, a)
        return None


#: the index arithmetic :meth:`IndexForms._key` describes
_INDEX_OPS = frozenset((E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max))


#: simplified indices by :meth:`IndexForms._key` (an index up to the identity of its
#: loops, with their positions and extents): the simplified index and its loops' positions
IndexMemo = dict[tuple, tuple[E.PrimExpr, dict[E.Var, int]]]


def _has_divmod(e: E.PrimExpr) -> bool:
    stack = [e]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is E.FloorDiv or t is E.FloorMod:
            return True
        if isinstance(x, E.BinaryOp):
            stack += [x.a, x.b]
        elif type(x) is E.Cast:
            stack.append(x.value)
    return False


def padding_guards(e: E.PrimExpr) -> tuple[int, int]:
    """``(and, select)`` op counts of the padding guards in ``e``: selects of a loaded
    value or a constant under a conjunction of integer comparisons (an inlined padding
    block). In an accumulation the code generator tests them once per tile and runs an
    unguarded copy of the tile in the interior (:mod:`~metaschedule.codegen.c_versioning`)."""
    bools = selects = 0
    stack = [e]
    while stack:
        x = stack.pop()
        if type(x) is E.Select:
            ands = _integer_conjunction(x.condition)
            if ands is not None and isinstance(x.false_value, (E.IntImm, E.FloatImm)):
                bools += ands
                selects += 1
            stack += [x.true_value, x.false_value]
        elif isinstance(x, E.BinaryOp):
            stack += [x.a, x.b]
        elif type(x) is E.Cast:
            stack.append(x.value)
    return bools, selects


def _integer_conjunction(c: E.PrimExpr) -> int | None:
    """The number of ``and`` ops of a conjunction of integer comparisons, else None."""
    if type(c) is E.And:
        a, b = _integer_conjunction(c.a), _integer_conjunction(c.b)
        return None if a is None or b is None else a + b + 1
    if isinstance(c, E.CmpOp) and not is_float(c.a.dtype):
        return 0
    return None


def buffer_stats(
    st: Store,
    store_lin: list[LinearForm],
    accesses: list,
    m: Machine,
    extents: tuple[int, ...] | None = None,
) -> list[BufferStats]:
    per: dict[Any, list] = {st.store.buffer: [[store_lin], 0, 1]}
    for buf, lin in accesses:
        entry = per.setdefault(buf, [[], 0, 0])
        entry[0].append(lin)
        entry[1] += 1
    ext = st.extents if extents is None else extents
    return [BufferStats(b, lins, r, w, ext, 64) for b, (lins, r, w) in per.items()]


def first_strides(
    st: Store, store_lin: list[LinearForm], accesses: list, stats: list[BufferStats]
) -> list[list[float] | None]:
    """The flat strides of the first access of each buffer of ``stats``."""
    n = len(st.extents)
    first: dict[Any, list[LinearForm]] = {st.store.buffer: store_lin}
    for buf, lin in accesses:
        first.setdefault(buf, lin)
    return [
        flat_strides(s.buffer, first[s.buffer], n) if s.buffer in first else None for s in stats
    ]


def perfect_from(st: Store) -> int:
    """The outermost loop position from which the store's loops nest perfectly (each
    the whole body of the one above it) down to the innermost."""
    loops = st.loops
    p = len(loops) - 1
    while p > 0 and loops[p - 1].node.body is loops[p].node:
        p -= 1
    return max(p, 0)
