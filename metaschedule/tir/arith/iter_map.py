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
and every input iterator is used (a one-to-one map). We follow TVM's IterMap analysis
in spirit; unlike it, a non-divisible split is rejected rather than padded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .. import expr as E
from ..stmt import Range
from .analyzer import Analyzer
from .simplify import ExprKeyer, free_vars

CheckLevel = Literal["surjective", "bijective"]


@dataclass(frozen=True, eq=False)
class IterMark:
    """An iterator over ``[0, extent)``; ``source`` is an expression or an IterSumExpr."""

    source: E.PrimExpr | IterSumExpr
    extent: E.PrimExpr

    def __repr__(self) -> str:
        src = self.source
        text = normalize_iter_map_to_expr(src) if isinstance(src, IterSumExpr) else src
        return f"IterMark({text}, extent={self.extent})"


@dataclass(frozen=True, eq=False)
class IterSplitExpr:
    """``((source // lower_factor) % extent) * scale``."""

    source: IterMark
    lower_factor: E.PrimExpr
    extent: E.PrimExpr
    scale: E.PrimExpr

    def __repr__(self) -> str:
        return (f"split({self.source!r}, lower_factor={self.lower_factor}, "
                f"extent={self.extent}, scale={self.scale})")

    def __str__(self) -> str:
        return str(normalize_iter_map_to_expr(self))


@dataclass(frozen=True, eq=False)
class IterSumExpr:
    """``sum(args) + base``."""

    args: tuple[IterSplitExpr, ...]
    base: E.PrimExpr

    def __repr__(self) -> str:
        return f"IterSumExpr([{', '.join(repr(a) for a in self.args)}], base={self.base})"

    def __str__(self) -> str:
        return str(normalize_iter_map_to_expr(self))


@dataclass
class IterMapResult:
    """``indices`` (empty when the map is not affine) and the reasons it failed."""

    indices: list[IterSumExpr] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return not self.errors


class _NotAffine(Exception):
    """Internal: raised while rewriting; becomes an entry of ``IterMapResult.errors``."""


def _is_int(e: E.PrimExpr, value: int | None = None) -> bool:
    return isinstance(e, E.IntImm) and (value is None or e.value == value)


class _Rewriter:
    def __init__(self, input_iters: Mapping[E.Var, Range], analyzer: Analyzer | None = None):
        self.ana = analyzer.copy() if analyzer is not None else Analyzer()
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
            src = v if _is_int(lo, 0) else self.ana.simplify(v - lo)
            mark = IterMark(src, ext)
            self.input_marks.append(mark)
            one = E.IntImm(v.dtype, 1)
            self.var_map[v] = IterSumExpr((IterSplitExpr(mark, one, ext, one),), lo)

    # arithmetic on (mostly constant) PrimExprs -------------------------------------------
    def mul(self, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
        if _is_int(a) and _is_int(b):
            return E.IntImm(a.dtype, a.value * b.value)
        return self.ana.simplify(a * b)

    def eq(self, a: E.PrimExpr, b: E.PrimExpr | int) -> bool:
        if isinstance(b, int):
            b = E.IntImm(a.dtype, b)
        if _is_int(a) and _is_int(b):
            return a.value == b.value
        return a is b or self.ana.can_prove_equal(a, b)

    def divisible(self, a: E.PrimExpr, c: E.PrimExpr) -> bool:
        if _is_int(a) and _is_int(c):
            return c.value != 0 and a.value % c.value == 0
        return self.ana.can_prove_equal(E.FloorMod(a, c), E.IntImm(a.dtype, 0))

    def div(self, a: E.PrimExpr, c: E.PrimExpr) -> E.PrimExpr:
        if _is_int(a) and _is_int(c):
            return E.IntImm(a.dtype, a.value // c.value)
        return self.ana.simplify(E.FloorDiv(a, c))

    def uses_iters(self, e: E.PrimExpr) -> bool:
        hit = self._uses.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        out = any(v in self.var_map for v in free_vars(e))
        self._uses[id(e)] = (e, out)
        return out

    # sums ---------------------------------------------------------------------------------
    def scale_sum(self, s: IterSumExpr, k: E.PrimExpr) -> IterSumExpr:
        args = tuple(IterSplitExpr(a.source, a.lower_factor, a.extent, self.mul(a.scale, k))
                     for a in s.args)
        return self.make_sum(args, self.mul(s.base, k))

    def add_sums(self, x: IterSumExpr, y: IterSumExpr) -> IterSumExpr:
        base = self.ana.simplify(x.base + y.base)
        return self.make_sum(x.args + y.args, base)

    def make_sum(self, args: Sequence[IterSplitExpr], base: E.PrimExpr) -> IterSumExpr:
        """Combine splits of the same digits and adjacent digits of one mark."""
        out: list[IterSplitExpr] = []
        for a in args:
            for n, b in enumerate(out):
                if (b.source is a.source and self.eq(b.lower_factor, a.lower_factor)
                        and self.eq(b.extent, a.extent)):
                    out[n] = IterSplitExpr(b.source, b.lower_factor, b.extent,
                                           self.ana.simplify(b.scale + a.scale))
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
                    if (self.eq(hi.lower_factor, self.mul(lo.lower_factor, lo.extent))
                            and self.eq(hi.scale, self.mul(lo.scale, lo.extent))):
                        new = IterSplitExpr(lo.source, lo.lower_factor,
                                            self.mul(lo.extent, hi.extent), lo.scale)
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
        succ = [any(j != i and self.eq(a.scale, self.mul(b.scale, b.extent))
                    for j, b in enumerate(args)) for i, a in enumerate(args)]
        starts = [a for a, is_succ in zip(args, succ) if not is_succ]
        if len(starts) != 1:
            raise _NotAffine(f"cannot fuse {s}: its terms overlap or leave gaps")
        chain = [starts[0]]
        rest = [a for a in args if a is not starts[0]]
        expected = self.mul(starts[0].scale, starts[0].extent)
        while rest:
            nxt = next((a for a in rest if self.eq(a.scale, expected)), None)
            if nxt is None:
                raise _NotAffine(f"cannot fuse {s}: its terms overlap or leave gaps")
            chain.append(nxt)
            rest.remove(nxt)
            expected = self.mul(nxt.scale, nxt.extent)
        base_scale = chain[0].scale
        norm = tuple(IterSplitExpr(a.source, a.lower_factor, a.extent,
                                   self.div(a.scale, base_scale)) for a in chain)
        extent = self.div(expected, base_scale)
        key = tuple((id(a.source), self.keyer.key(a.lower_factor), self.keyer.key(a.extent),
                     self.keyer.key(a.scale)) for a in norm)
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
            raise _NotAffine(f"{e} multiplies two iterator expressions")
        if isinstance(e, (E.FloorDiv, E.FloorMod)):
            if self.uses_iters(e.b):
                raise _NotAffine(f"{e} divides by an iterator expression")
            c = self.ana.simplify(e.b)
            if not (c.value > 0 if _is_int(c) else self.ana.can_prove(c > 0)):
                raise _NotAffine(f"{e}: the divisor {c} is not provably positive")
            a = self.rewrite(e.a)
            return self.split_div(a, c) if isinstance(e, E.FloorDiv) else self.split_mod(a, c)
        raise _NotAffine(f"{type(e).__name__} of iterators is not affine: {e}")

    def _low_high(self, s: IterSumExpr, c: E.PrimExpr):
        """Split ``s = c*high + low`` with ``0 <= low < c`` when all terms are constant."""
        if not _is_int(c) or not _is_int(s.base) or not all(
                _is_int(a.scale) and _is_int(a.extent) for a in s.args):
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
        q = IterSumExpr(tuple(IterSplitExpr(a.source, a.lower_factor, a.extent,
                                            E.IntImm(dt, a.scale.value // cv)) for a in high),
                        E.IntImm(dt, bq))
        return q, IterSumExpr(tuple(low), E.IntImm(dt, br))

    def _fused_with_base(self, s: IterSumExpr, c: E.PrimExpr) -> tuple[IterSplitExpr, E.PrimExpr]:
        if not self.divisible(s.base, c):
            raise _NotAffine(f"{s}: the base {s.base} is not a multiple of {c}")
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
        elif self.divisible(c, sp.scale):
            f = self.div(c, sp.scale)
            if not self.divisible(sp.extent, f):
                raise _NotAffine(f"split of extent {sp.extent} by {f} is not exact")
            one = E.IntImm(c.dtype, 1)
            new = IterSplitExpr(sp.source, self.mul(sp.lower_factor, f), self.div(sp.extent, f),
                                one)
        else:
            raise _NotAffine(f"cannot divide the iterator {sp} by {c}")
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
        if self.divisible(c, sp.scale):
            f = self.div(c, sp.scale)
            if not self.divisible(sp.extent, f):
                raise _NotAffine(f"split of extent {sp.extent} by {f} is not exact")
            return IterSumExpr((IterSplitExpr(sp.source, sp.lower_factor, f, sp.scale),), zero)
        raise _NotAffine(f"cannot take the iterator {sp} modulo {c}")

    # predicate ----------------------------------------------------------------------------
    def apply_predicate(self, predicate: E.PrimExpr) -> None:
        """Tighten marks from conjuncts ``expr < bound`` / ``expr <= bound``."""
        pred = self.ana.simplify(predicate)
        if _is_int(pred):
            if not pred.value:
                raise _NotAffine("the predicate is always false")
            return
        conjs = _conjuncts(pred)
        # bounds on single loop variables first: fused iterators are built from their marks
        conjs.sort(key=lambda c: not (isinstance(c, E.CmpOp) and (
            isinstance(c.a, E.Var) or isinstance(c.b, E.Var))))
        for conj in conjs:
            if not self.uses_iters(conj):
                continue
            if isinstance(conj, (E.GT, E.GE)):
                conj = (E.LT if isinstance(conj, E.GT) else E.LE)(conj.b, conj.a)
            if not isinstance(conj, (E.LT, E.LE)) or self.uses_iters(conj.b):
                raise _NotAffine(f"unsupported predicate {conj}: expected iterators < bound")
            s = self.rewrite(conj.a)
            if not s.args:
                continue
            sp = self.fuse(s)
            mark = sp.source
            if not (self.eq(sp.lower_factor, 1) and self.eq(sp.scale, 1)
                    and self.eq(sp.extent, mark.extent)):
                raise _NotAffine(f"unsupported predicate {conj}: not a bound on a whole iterator")
            ub = self.ana.simplify(conj.b - s.base + (1 if isinstance(conj, E.LE) else 0))
            if self.ana.can_prove(ub >= mark.extent):
                continue
            if not self.ana.can_prove(ub <= mark.extent) or not self.ana.can_prove(ub >= 1):
                raise _NotAffine(f"predicate {conj}: cannot compare {ub} with {mark.extent}")
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

    # checks -------------------------------------------------------------------------------
    def check(self, indices: list[IterSumExpr], level: CheckLevel) -> None:
        uses: dict[int, tuple[IterMark, list[IterSplitExpr]]] = {}
        seen: set[int] = set()

        def use(sp: IterSplitExpr) -> None:
            m = sp.source
            uses.setdefault(id(m), (m, []))[1].append(sp)
            if isinstance(m.source, IterSumExpr) and id(m) not in seen:
                seen.add(id(m))
                for a in m.source.args:
                    use(a)

        # fused marks the indices reach, and where each inner mark sits in them
        parents: dict[int, list[tuple[IterMark, IterSplitExpr]]] = {}
        stack = [a.source for s in indices for a in s.args]
        reached: set[int] = set()
        while stack:
            m = stack.pop()
            if id(m) in reached or not isinstance(m.source, IterSumExpr):
                continue
            reached.add(id(m))
            for a in m.source.args:
                parents.setdefault(id(a.source), []).append((m, a))
                stack.append(a.source)
        alias: dict[int, tuple[IterMark, E.PrimExpr]] = {}
        fused = [m for m in _marks_by_id(indices).values() if id(m) in reached]
        grew = True
        while grew:  # aliases of inner marks can enable aliases of outer ones
            grew = False
            for m in fused:
                if id(m) not in alias:
                    found = self.as_digits_of(m, parents, alias)
                    if found is not None:
                        alias[id(m)] = found
                        grew = True
        for s in indices:
            for a in s.args:
                use(self.resolve(a, parents, alias))
        for mark, why in self.tightened:
            if id(mark) not in uses:
                raise _NotAffine(f"predicate {why} bounds iterators that no index uses whole")
        for mark, splits in uses.values():
            self.check_mark(mark, splits, level)
        if level == "bijective":
            for m in self.input_marks:
                if id(m) not in uses:
                    raise _NotAffine(f"bijective map: the iterator {m.source} is not used")

    def lift(self, sp: IterSplitExpr, parents, exclude: IterMark | None = None
             ) -> IterSplitExpr:
        """Re-express a split of an inner mark as a split of a fused mark holding it.

        ``l9 // 8`` (l9 in [0, 64)) is digit range ``[48, 384)`` of ``l9 * 6 + l10``: seen
        that way it no longer overlaps with the other digits of the fused iterator.
        """
        for fused, arg in parents.get(id(sp.source), []):
            if fused is exclude or not (
                    self.divisible(sp.lower_factor, arg.lower_factor) and self.divisible(
                        self.mul(arg.lower_factor, arg.extent),
                        self.mul(sp.lower_factor, sp.extent))):
                continue
            lf = self.mul(arg.scale, self.div(sp.lower_factor, arg.lower_factor))
            return IterSplitExpr(fused, lf, sp.extent, sp.scale)
        return sp

    def as_digits_of(self, mark: IterMark, parents, alias) -> tuple[IterMark, E.PrimExpr] | None:
        """``(other, lf)`` when the fused ``mark`` is ``(other // lf) % mark.extent``."""
        lifted = [self.resolve(a, parents, alias, exclude=mark) for a in mark.source.args]
        target = lifted[0].source
        if target is mark or any(x.source is not target for x in lifted):
            return None
        covered = lifted[0].lower_factor
        for x in lifted:
            if not self.eq(x.lower_factor, covered):
                return None
            covered = self.mul(covered, x.extent)
        if not self.eq(self.div(covered, lifted[0].lower_factor), mark.extent):
            return None
        return target, lifted[0].lower_factor

    def resolve(self, sp: IterSplitExpr, parents, alias, exclude: IterMark | None = None
                ) -> IterSplitExpr:
        """Lift ``sp`` through fusions and aliases as far as it goes."""
        for _ in range(64):  # bounded: each step climbs one fusion level
            new = self.lift(sp, parents, exclude)
            hit = alias.get(id(new.source))
            if hit is not None:
                new = IterSplitExpr(hit[0], self.mul(hit[1], new.lower_factor), new.extent,
                                    new.scale)
            if new is sp:
                return sp
            sp = new
        return sp

    def check_mark(self, mark: IterMark, splits: list[IterSplitExpr], level: CheckLevel) -> None:
        if all(_is_int(s.lower_factor) and _is_int(s.extent) for s in splits) and _is_int(
                mark.extent):
            order = sorted(splits, key=lambda s: s.lower_factor.value)
            covered = 1
            for s in order:
                lf = s.lower_factor.value
                ok = lf == covered if level == "bijective" else lf % covered == 0
                if not ok:
                    raise _NotAffine(
                        f"the splits of {mark!r} overlap or leave gaps: {[str(s) for s in order]}")
                covered = lf * s.extent.value
            if mark.extent.value % covered != 0 or (
                    level == "bijective" and covered != mark.extent.value):
                raise _NotAffine(
                    f"the splits of {mark!r} do not cover it exactly: {[str(s) for s in order]}")
            return
        # symbolic: an exact chain from lower_factor 1 up
        rest = list(splits)
        covered: E.PrimExpr = E.IntImm(mark.extent.dtype, 1)
        while rest:
            nxt = next((s for s in rest if self.eq(s.lower_factor, covered)), None)
            if nxt is None:
                raise _NotAffine(
                    f"the splits of {mark!r} overlap or leave gaps: {[str(s) for s in splits]}")
            rest.remove(nxt)
            covered = self.mul(covered, nxt.extent)
        if level == "bijective" and not self.eq(covered, mark.extent):
            raise _NotAffine(
                f"the splits of {mark!r} do not cover it exactly: {[str(s) for s in splits]}")


def _marks_by_id(indices: list[IterSumExpr]) -> dict[int, IterMark]:
    """Every mark reachable from ``indices`` (through fused sources)."""
    out: dict[int, IterMark] = {}
    stack = [a.source for s in indices for a in s.args]
    while stack:
        m = stack.pop()
        if id(m) in out:
            continue
        out[id(m)] = m
        if isinstance(m.source, IterSumExpr):
            stack.extend(a.source for a in m.source.args)
    return out


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
        rw.check(sums, check_level)
    except _NotAffine as err:
        return IterMapResult([], [str(err)])
    return IterMapResult(sums, [])


def normalize_iter_map_to_expr(expr: IterSumExpr | IterSplitExpr) -> E.PrimExpr:
    """The plain expression an IterSumExpr (or IterSplitExpr) stands for."""
    if isinstance(expr, IterSplitExpr):
        return _norm_split(expr)
    out: E.PrimExpr | None = None
    for a in reversed(expr.args):  # fused chains are stored lowest digit first
        t = _norm_split(a)
        out = t if out is None else E.Add(out, t)
    if out is None:
        return expr.base
    if not _is_int(expr.base, 0):
        out = E.Add(out, expr.base)
    return out


def _norm_split(s: IterSplitExpr) -> E.PrimExpr:
    src = s.source.source
    out = normalize_iter_map_to_expr(src) if isinstance(src, IterSumExpr) else src
    if not _is_int(s.lower_factor, 1):
        out = E.FloorDiv(out, s.lower_factor)
    whole = E.Mul(s.lower_factor, s.extent)
    if not Analyzer().can_prove_equal(whole, s.source.extent):
        out = E.FloorMod(out, s.extent)
    if not _is_int(s.scale, 1):
        out = E.Mul(out, s.scale)
    return out


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
