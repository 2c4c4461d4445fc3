"""Affine iteration maps: are block bindings affine in the loops, and what do they cover?

Every index is rewritten into an :class:`IterSumExpr`, a sum of :class:`IterSplitExpr`
terms plus a base that does not depend on the input iterators. A split
``(mark, lower_factor, extent, scale)`` denotes ``((mark // lower_factor) % extent) *
scale``, where an :class:`IterMark` is an iterator ranging over ``[0, extent)``: either
an input loop variable (minus its minimum) or a fused sum of splits such as the
``i0 * 8 + i1`` of a loop split. Loop fuse gives ``f // 8`` and ``f % 8``, which are the
two digits of the mark of ``f``.

``check_level="surjective"``: the splits of one mark never overlap (every combination of
index values is reached); ``"bijective"`` also asks that every mark is covered exactly
and every input iterator is used (a one-to-one map); :mod:`.iter_check` decides it, by
seeing the splits as digits of common fused iterators. We follow TVM's IterMap analysis
in spirit; unlike it, a non-divisible split is rejected rather than padded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .. import expr as E
from ..stmt import Range
from .analyzer import Analyzer
from .expr_key import ExprKeyer, free_vars
from .iter_check import CheckLevel, SplitChecker
from .iter_expr import (
    IterMark,
    IterSplitExpr,
    IterSumExpr,
    NotAffine,
    SplitArith,
    is_int,
    normalize_iter_map_to_expr,
)

__all__ = [
    "CheckLevel",
    "IterMapResult",
    "IterMark",
    "IterSplitExpr",
    "IterSumExpr",
    "detect_iter_map",
    "is_affine_binding",
    "iter_map_simplify",
    "normalize_iter_map_to_expr",
]


@dataclass
class IterMapResult:
    """``indices`` (empty when the map is not affine) and the reasons it failed."""

    indices: list[IterSumExpr] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return not self.errors


class _Rewriter(SplitArith):
    def __init__(self, input_iters: Mapping[E.Var, Range], analyzer: Analyzer | None = None):
        super().__init__(analyzer.copy() if analyzer is not None else Analyzer())
        self.keyer = ExprKeyer()
        self.var_map: dict[E.Var, IterSumExpr] = {}
        self.input_marks: list[IterMark] = []
        self.fused: dict[tuple, IterMark] = {}
        self.tightened: list[tuple[IterMark, str]] = []
        self._uses: dict[int, tuple[E.PrimExpr, bool]] = {}
        for v, rng in input_iters.items():
            if not isinstance(rng, Range):
                raise TypeError(f"input_iters[{v.name}] must be a Range, got {rng!r}")
            self.ana.bind(v, rng, allow_override=True)
        for v, rng in input_iters.items():
            lo, ext = self.ana.simplify(rng.min), self.ana.simplify(rng.extent)
            if self.ana.can_prove_equal(ext, 1):
                self.var_map[v] = IterSumExpr((), lo)
                continue
            src = v if is_int(lo, 0) else self.ana.simplify(v - lo)
            mark = IterMark(src, ext)
            self.input_marks.append(mark)
            one = E.IntImm(v.dtype, 1)
            self.var_map[v] = IterSumExpr((IterSplitExpr(mark, one, ext, one),), lo)

    def uses_iters(self, e: E.PrimExpr) -> bool:
        hit = self._uses.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        out = any(v in self.var_map for v in free_vars(e))
        self._uses[id(e)] = (e, out)
        return out

    # sums ---------------------------------------------------------------------------------
    def scale_sum(self, s: IterSumExpr, k: E.PrimExpr) -> IterSumExpr:
        args = tuple(
            IterSplitExpr(a.source, a.lower_factor, a.extent, self.mul(a.scale, k)) for a in s.args
        )
        return self.make_sum(args, self.mul(s.base, k))

    def add_sums(self, x: IterSumExpr, y: IterSumExpr) -> IterSumExpr:
        base = self.ana.simplify(x.base + y.base)
        return self.make_sum(x.args + y.args, base)

    def make_sum(self, args: Sequence[IterSplitExpr], base: E.PrimExpr) -> IterSumExpr:
        """Combine splits of the same digits and adjacent digits of one mark."""
        out: list[IterSplitExpr] = []
        for a in args:
            for n, b in enumerate(out):
                if (
                    b.source is a.source
                    and self.eq(b.lower_factor, a.lower_factor)
                    and self.eq(b.extent, a.extent)
                ):
                    out[n] = IterSplitExpr(
                        b.source, b.lower_factor, b.extent, self.ana.simplify(b.scale + a.scale)
                    )
                    break
            else:
                out.append(a)
        out = [a for a in out if not self.eq(a.scale, 0)]
        merged = True
        while merged:  # (m // lf) % e * s + (m // (lf*e)) % e2 * (s*e) -> (m // lf) % (e*e2) * s
            merged = False
            for i, lo in enumerate(out):
                for j, hi in enumerate(out):
                    if i == j or lo.source is not hi.source:
                        continue
                    if self.eq(hi.lower_factor, self.mul(lo.lower_factor, lo.extent)) and self.eq(
                        hi.scale, self.mul(lo.scale, lo.extent)
                    ):
                        new = IterSplitExpr(
                            lo.source, lo.lower_factor, self.mul(lo.extent, hi.extent), lo.scale
                        )
                        out = [x for n, x in enumerate(out) if n not in (i, j)] + [new]
                        merged = True
                        break
                if merged:
                    break
        return IterSumExpr(tuple(out), base)

    def fuse(self, s: IterSumExpr) -> IterSplitExpr:
        """The sum of splits as one split of a (possibly new, fused) mark."""
        if len(s.args) == 1:
            return s.args[0]
        args = list(s.args)
        succ = [
            any(
                j != i and self.eq(a.scale, self.mul(b.scale, b.extent)) for j, b in enumerate(args)
            )
            for i, a in enumerate(args)
        ]
        starts = [a for a, is_succ in zip(args, succ) if not is_succ]
        if len(starts) != 1:
            raise NotAffine(f"cannot fuse {s}: its terms overlap or leave gaps")
        chain = [starts[0]]
        rest = [a for a in args if a is not starts[0]]
        expected = self.mul(starts[0].scale, starts[0].extent)
        while rest:
            nxt = next((a for a in rest if self.eq(a.scale, expected)), None)
            if nxt is None:
                raise NotAffine(f"cannot fuse {s}: its terms overlap or leave gaps")
            chain.append(nxt)
            rest.remove(nxt)
            expected = self.mul(nxt.scale, nxt.extent)
        base_scale = chain[0].scale
        norm = tuple(
            IterSplitExpr(a.source, a.lower_factor, a.extent, self.div(a.scale, base_scale))
            for a in chain
        )
        extent = self.div(expected, base_scale)
        key = tuple(
            (
                id(a.source),
                self.keyer.key(a.lower_factor),
                self.keyer.key(a.extent),
                self.keyer.key(a.scale),
            )
            for a in norm
        )
        mark = self.fused.get(key)
        if mark is None:
            mark = self.fused[key] = IterMark(IterSumExpr(norm, E.IntImm(extent.dtype, 0)), extent)
        one = E.IntImm(extent.dtype, 1)
        return IterSplitExpr(mark, one, mark.extent, base_scale)

    # rewriting ----------------------------------------------------------------------------
    def rewrite(self, e: E.PrimExpr) -> IterSumExpr:
        if not self.uses_iters(e):
            return IterSumExpr((), self.ana.simplify(e))
        if isinstance(e, E.Var):
            return self.var_map[e]
        if isinstance(e, E.Add):
            return self.add_sums(self.rewrite(e.a), self.rewrite(e.b))
        if isinstance(e, E.Sub):
            neg = E.IntImm(e.dtype, -1)
            return self.add_sums(self.rewrite(e.a), self.scale_sum(self.rewrite(e.b), neg))
        if isinstance(e, E.Mul):
            a, b = self.rewrite(e.a), self.rewrite(e.b)
            if not a.args:
                return self.scale_sum(b, a.base)
            if not b.args:
                return self.scale_sum(a, b.base)
            raise NotAffine(f"{e} multiplies two iterator expressions")
        if isinstance(e, (E.FloorDiv, E.FloorMod)):
            if self.uses_iters(e.b):
                raise NotAffine(f"{e} divides by an iterator expression")
            c = self.ana.simplify(e.b)
            if not self.positive(c):
                raise NotAffine(f"{e}: the divisor {c} is not provably positive")
            a = self.rewrite(e.a)
            return self.split_div(a, c) if isinstance(e, E.FloorDiv) else self.split_mod(a, c)
        raise NotAffine(f"{type(e).__name__} of iterators is not affine: {e}")

    def _low_high(self, s: IterSumExpr, c: E.PrimExpr):
        """Split ``s = c*high + low`` with ``0 <= low < c`` when all terms are constant."""
        if (
            not is_int(c)
            or not is_int(s.base)
            or not all(is_int(a.scale) and is_int(a.extent) for a in s.args)
        ):
            return None
        cv = c.value
        bq, br = divmod(s.base.value, cv)
        high = [a for a in s.args if a.scale.value % cv == 0]
        low = [a for a in s.args if a.scale.value % cv != 0]
        lo = br + sum(min(0, (a.extent.value - 1) * a.scale.value) for a in low)
        hi = br + sum(max(0, (a.extent.value - 1) * a.scale.value) for a in low)
        if lo < 0 or hi >= cv:
            return None
        dt = c.dtype
        q = IterSumExpr(
            tuple(
                IterSplitExpr(a.source, a.lower_factor, a.extent, E.IntImm(dt, a.scale.value // cv))
                for a in high
            ),
            E.IntImm(dt, bq),
        )
        return q, IterSumExpr(tuple(low), E.IntImm(dt, br))

    def _fused_with_base(self, s: IterSumExpr, c: E.PrimExpr) -> tuple[IterSplitExpr, E.PrimExpr]:
        if not self.divisible(s.base, c):
            raise NotAffine(f"{s}: the base {s.base} is not a multiple of {c}")
        return self.fuse(s), self.div(s.base, c)

    def split_div(self, s: IterSumExpr, c: E.PrimExpr) -> IterSumExpr:
        if not s.args:
            return IterSumExpr((), self.ana.simplify(E.FloorDiv(s.base, c)))
        lh = self._low_high(s, c)
        if lh is not None:
            return lh[0]
        sp, base = self._fused_with_base(s, c)
        if self.divisible(sp.scale, c):
            new = IterSplitExpr(sp.source, sp.lower_factor, sp.extent, self.div(sp.scale, c))
        elif self.positive(sp.scale) and self.divisible(c, sp.scale):
            f = self.div(c, sp.scale)
            if not self.divisible(sp.extent, f):
                raise NotAffine(f"split of extent {sp.extent} by {f} is not exact")
            one = E.IntImm(c.dtype, 1)
            new = IterSplitExpr(
                sp.source, self.mul(sp.lower_factor, f), self.div(sp.extent, f), one
            )
        else:
            raise NotAffine(f"cannot divide the iterator {sp} by {c}")
        return IterSumExpr((new,), base)

    def split_mod(self, s: IterSumExpr, c: E.PrimExpr) -> IterSumExpr:
        if not s.args:
            return IterSumExpr((), self.ana.simplify(E.FloorMod(s.base, c)))
        lh = self._low_high(s, c)
        if lh is not None:
            return lh[1]
        sp, _ = self._fused_with_base(s, c)
        zero = E.IntImm(c.dtype, 0)
        if self.divisible(sp.scale, c):
            return IterSumExpr((), zero)
        if self.positive(sp.scale) and self.divisible(c, sp.scale):
            f = self.div(c, sp.scale)
            if not self.divisible(sp.extent, f):
                raise NotAffine(f"split of extent {sp.extent} by {f} is not exact")
            return IterSumExpr((IterSplitExpr(sp.source, sp.lower_factor, f, sp.scale),), zero)
        raise NotAffine(f"cannot take the iterator {sp} modulo {c}")

    # predicate ----------------------------------------------------------------------------
    def apply_predicate(self, predicate: E.PrimExpr) -> None:
        """Tighten marks from conjuncts ``expr < bound`` / ``expr <= bound``."""
        pred = self.ana.simplify(predicate)
        if is_int(pred):
            if not pred.value:
                raise NotAffine("the predicate is always false")
            return
        conjs = _conjuncts(pred)
        # bounds on single loop variables first: fused iterators are built from their marks
        conjs.sort(
            key=lambda c: (
                not (isinstance(c, E.CmpOp) and (isinstance(c.a, E.Var) or isinstance(c.b, E.Var)))
            )
        )
        for conj in conjs:
            if not self.uses_iters(conj):
                continue
            if isinstance(conj, (E.GT, E.GE)):
                conj = (E.LT if isinstance(conj, E.GT) else E.LE)(conj.b, conj.a)
            if not isinstance(conj, (E.LT, E.LE)) or self.uses_iters(conj.b):
                raise NotAffine(f"unsupported predicate {conj}: expected iterators < bound")
            s = self.rewrite(conj.a)
            if not s.args:
                continue
            sp = self.fuse(s)
            mark = sp.source
            if not (
                self.eq(sp.lower_factor, 1)
                and self.eq(sp.scale, 1)
                and self.eq(sp.extent, mark.extent)
            ):
                raise NotAffine(f"unsupported predicate {conj}: not a bound on a whole iterator")
            ub = self.ana.simplify(conj.b - s.base + (1 if isinstance(conj, E.LE) else 0))
            if self.ana.can_prove(ub >= mark.extent):
                continue
            if not self.ana.can_prove(ub <= mark.extent) or not self.ana.can_prove(ub >= 1):
                raise NotAffine(f"predicate {conj}: cannot compare {ub} with {mark.extent}")
            self.tighten(mark, ub, str(conj))

    def tighten(self, mark: IterMark, extent: E.PrimExpr, why: str) -> None:
        new = IterMark(mark.source, extent)
        for key, m in self.fused.items():
            if m is mark:
                self.fused[key] = new
        for v, s in self.var_map.items():
            if s.args and s.args[0].source is mark:
                one = E.IntImm(extent.dtype, 1)
                self.var_map[v] = IterSumExpr((IterSplitExpr(new, one, extent, one),), s.base)
        self.input_marks = [new if m is mark else m for m in self.input_marks]
        self.tightened.append((new, why))


def _conjuncts(c: E.PrimExpr) -> list[E.PrimExpr]:
    if isinstance(c, E.And):
        return _conjuncts(c.a) + _conjuncts(c.b)
    return [c]


# ----------------------------------------------------------------------------- public API


def detect_iter_map(
    indices: Sequence[E.PrimExpr | int],
    input_iters: Mapping[E.Var, Range],
    predicate: E.PrimExpr | bool = True,
    check_level: CheckLevel = "surjective",
    analyzer: Analyzer | None = None,
) -> IterMapResult:
    """Rewrite ``indices`` as affine maps of ``input_iters``.

    Args:
        indices: the index expressions (block bindings, buffer indices...).
        input_iters: the loop variables and their ranges; other variables are symbolic
            constants.
        predicate: a condition on the iterators (``i0 * 4 + i1 < 10`` for a split that
            does not divide the extent); it narrows the fused iterator it bounds.
        check_level: "surjective" or "bijective" (see the module docstring).
        analyzer: facts about other variables (the range of a symbolic extent ``n``); it
            is copied, not changed.

    Returns:
        an :class:`IterMapResult`; its ``indices`` are empty and ``errors`` say why when
        the map is not affine at the requested level.
    """
    if check_level not in ("surjective", "bijective"):
        raise ValueError(f"check_level must be 'surjective' or 'bijective', got {check_level!r}")
    rw = _Rewriter(input_iters, analyzer)
    try:
        rw.apply_predicate(E.convert(predicate))
        sums = [rw.rewrite(E.convert(i)) for i in indices]
        sums = [s if len(s.args) <= 1 else IterSumExpr((rw.fuse(s),), s.base) for s in sums]
        SplitChecker(rw, rw.input_marks, rw.tightened).check(sums, check_level)
    except NotAffine as err:
        return IterMapResult([], [str(err)])
    return IterMapResult(sums, [])


def is_affine_binding(
    bindings: Sequence[E.PrimExpr | int],
    loop_ranges: Mapping[E.Var, Range],
    predicate: E.PrimExpr | bool = True,
    analyzer: Analyzer | None = None,
) -> bool:
    """True when ``bindings`` form a surjective affine map of the loops in ``loop_ranges``."""
    return detect_iter_map(bindings, loop_ranges, predicate, "surjective", analyzer).success


def iter_map_simplify(
    indices: Sequence[E.PrimExpr | int],
    input_iters: Mapping[E.Var, Range],
    predicate: E.PrimExpr | bool = True,
    check_level: CheckLevel = "surjective",
    analyzer: Analyzer | None = None,
) -> list[E.PrimExpr]:
    """Simplified ``indices`` (via the affine map when there is one): ``(i0*8+i1)//8 -> i0``."""
    ana = analyzer.copy() if analyzer is not None else Analyzer()
    for v, r in input_iters.items():
        ana.bind(v, r, allow_override=True)
    res = detect_iter_map(indices, input_iters, predicate, check_level, analyzer)
    if not res.success:
        return [ana.simplify(i) for i in indices]
    return [ana.simplify(normalize_iter_map_to_expr(s)) for s in res.indices]
