"""Do the splits of an iteration map use every digit of every iterator at most once?

The rewriter expresses each index as one split of an :class:`IterMark`. Marks nest: a
fused mark is a chain of splits of other marks. To compare the indices we bring every
split to a common frame of reference, in the spirit of TVM's "fuse, then split" normal
form:

* **open** a split of a fused mark into the splits of its terms when its digit range
  starts and ends on digit boundaries of those terms (``(l7 * 3 + l8) % 3`` is ``l8``);
* a fused mark with a split that cannot be opened (``(l7 * 3 + l8) // 8``) is a
  **frame**: its digits are the reference, and it consumes its terms whole;
* **lift** a split that lies inside a term of a frame into that frame: with ``l8 < 3``,
  ``l7 // 8`` is ``(l7 * 3 + l8) // 24``. A split that straddles a term's edge is cut
  there first (``l8 // 3`` beside ``l8 % 6 * 4 + l9`` is ``l8 // 3 % 2 + l8 // 6 * 2``);
* a frame whose terms lift, in order, onto consecutive digits of another frame is an
  **alias** of those digits (``l6 * 3 + l7 // 2`` is ``(l6 * 6 + l7) // 2``).

Then the splits of each frame and input iterator must not overlap (surjective) and must
cover it exactly (bijective). Frames are consumed depth first; a split never lifts into a
frame that is being consumed, nor into one built from it, so no frame accounts for its
own digits. Where several frames hold a split, the widest is tried first (the fusion
that the others are digits of). Every step rewrites a split into an equal one, so an
accepted map is affine at the level asked; a rejected one may still be, in patterns
beyond these rules.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Literal

from .. import expr as E
from .iter_expr import IterMark, IterSplitExpr, IterSumExpr, NotAffine, SplitArith, is_int

CheckLevel = Literal["surjective", "bijective"]

_MAX_DEPTH = 64  # lifts climb one frame at a time; frames are few


class _Misaligned(Exception):
    def __init__(self, mark: IterMark, split: IterSplitExpr):
        super().__init__()
        self.mark, self.split = mark, split


def _is_fused(m: IterMark) -> bool:
    return isinstance(m.source, IterSumExpr)


class SplitChecker:
    """Checks the splits of ``indices`` (each an IterSumExpr of at most one split)."""

    def __init__(
        self,
        arith: SplitArith,
        input_marks: Sequence[IterMark],
        tightened: Sequence[tuple[IterMark, str]],
    ):
        self.ar = arith
        self.input_marks = list(input_marks)
        self.tightened = list(tightened)
        self.tight = {id(m) for m, _ in tightened}
        # fused mark -> the digits of it that are a frame: (mark, gcd of the lower factors,
        # lcm of the tops) of its misaligned splits, None for all of it; a tightened mark
        # ranges over less than its terms, so it is a frame as a whole
        self.spans: dict[int, tuple[IterMark, int | None, int | None]] = {}
        self.partial = False  # whether a frame may be a run of its mark's digits
        # per round: fused mark -> (its frame, the frame's lowest digit in the mark)
        self.views: dict[int, tuple[IterMark, E.PrimExpr]] = {}
        self.frames: dict[int, IterMark] = {}  # id -> frame
        self.consumed: dict[int, list[IterSplitExpr]] = {}  # frame -> its opened terms
        self.parents: dict[int, list[tuple[IterMark, IterSplitExpr]]] = {}
        self.alias: dict[int, tuple[IterMark, E.PrimExpr]] = {}
        self.inside: dict[int, set[int]] = {}  # mark -> ids of the marks it is built from
        self.rooted: set[int] = set()  # marks that the opened indices split directly

    def check(self, indices: Sequence[IterSumExpr], level: CheckLevel) -> None:
        """Raise NotAffine unless the splits are disjoint (and cover all, if bijective).

        Whole marks as frames first; failing that, frames of only the digits that the
        unopenable splits need (``(l10 % 36 * 4 + l11) // 3 % 8`` needs ``l10 % 6``, which
        leaves ``l10 // 6`` to other indices). Either answer is sound; whole frames let more
        frames be recognised as runs of digits of one another.
        """
        roots = [a for s in indices for a in s.args]
        try:
            self._check(roots, level)
            return
        except NotAffine as err:
            first = err
        if all(fid in self.tight for fid in self.frames):
            raise first
        self.partial = True
        try:
            self._check(roots, level)
        except NotAffine:
            raise first from None

    def _check(self, roots: list[IterSplitExpr], level: CheckLevel) -> None:
        self.spans = {id(m): (m, None, None) for m, _ in self.tightened if _is_fused(m)}
        self.alias.clear()
        while True:  # each round widens the frame of one fused mark
            for table in (self.views, self.frames, self.consumed, self.parents, self.inside):
                table.clear()
            try:
                opened = [p for a in roots for p in self.open(a)]
                break
            except _Misaligned as mis:
                self.widen(mis.mark, mis.split)
        for fid, parts in self.consumed.items():
            for p in parts:  # the scale of an opened term is its digit position in the frame
                self.parents.setdefault(id(p.source), []).append((self.frames[fid], p))
        self.rooted = {id(p.source) for p in opened}
        for lst in self.parents.values():
            lst.sort(key=lambda fp: self.rank(fp[0]))
        self.find_aliases()
        uses = self.collect_uses(opened)
        for mark, why in self.tightened:
            if id(mark) not in uses:
                raise NotAffine(f"predicate {why} bounds iterators that no index uses whole")
        for mark, splits in uses.values():
            self.check_mark(mark, splits, level)
        if level == "bijective":
            for m in self.input_marks:
                if id(m) not in uses:
                    raise NotAffine(f"bijective map: the iterator {m.source} is not used")

    # opening ------------------------------------------------------------------------------
    def open(self, sp: IterSplitExpr) -> list[IterSplitExpr]:
        """``sp`` as consecutive splits of frames and input iterators, lowest first."""
        m = sp.source
        if not _is_fused(m):
            return [sp]
        if id(m) in self.spans:
            frame, lo = self.view(m)
            if frame is m:
                return [sp]
            ar = self.ar
            if ar.divisible(sp.lower_factor, lo) and ar.divisible(
                ar.mul(lo, frame.extent), ar.mul(sp.lower_factor, sp.extent)
            ):
                return [IterSplitExpr(frame, ar.div(sp.lower_factor, lo), sp.extent, sp.scale)]
        parts = self._term_digits(m, sp)
        if parts is None:
            raise _Misaligned(m, sp)
        return self._open_parts(parts, sp.scale)

    def _open_parts(self, parts, scale: E.PrimExpr) -> list[IterSplitExpr]:
        out: list[IterSplitExpr] = []
        for term, lf, ext in parts:
            sub = IterSplitExpr(term.source, self.ar.mul(term.lower_factor, lf), ext, scale)
            out.extend(self.open(sub))
            scale = self.ar.mul(scale, ext)
        return out

    def view(self, m: IterMark) -> tuple[IterMark, E.PrimExpr]:
        """The frame of the fused mark ``m`` (``m`` itself, or a run of its digits)."""
        hit = self.views.get(id(m))
        if hit is not None:
            return hit
        dt = m.extent.dtype
        one = E.IntImm(dt, 1)
        _, g, top = self.spans[id(m)]
        span = None if g is None else self._span(m, g, top)
        digits = None
        if span is not None:
            lo, ext = E.IntImm(dt, span[0]), E.IntImm(dt, span[1] // span[0])
            digits = self._term_digits(m, IterSplitExpr(m, lo, ext, one))
        if digits is None:
            frame, lo = m, one
            parts = [p for t in m.source.args for p in self.open(t)]
        else:
            parts = self._open_parts(digits, one)
            frame = IterMark(IterSumExpr(tuple(parts), E.IntImm(dt, 0)), ext)
        self.views[id(m)] = (frame, lo)
        self.frames[id(frame)] = frame
        self.consumed[id(frame)] = parts
        return frame, lo

    def widen(self, m: IterMark, sp: IterSplitExpr) -> None:
        """Make the frame of ``m`` hold ``sp``, a split of ``m`` that cannot be opened."""
        _, g, top = self.spans.get(id(m), (m, 0, 1))
        if self.partial and g is not None and is_int(sp.lower_factor) and is_int(sp.extent):
            lf = sp.lower_factor.value
            g, top = math.gcd(g, lf), math.lcm(top, lf * sp.extent.value)
            old = self.spans.get(id(m))
            if old is not None and self._span(m, *old[1:]) == self._span(m, g, top):
                g = top = None  # no progress: take all of it
        else:
            g = top = None
        self.spans[id(m)] = (m, g, top)

    def _span(self, m: IterMark, g: int, top: int) -> tuple[int, int] | None:
        """``(lo, hi)``: the smallest run of whole term digits with ``lo | g`` and
        ``top | hi``; None when it is all of ``m`` or the terms are symbolic."""
        terms = m.source.args
        if not all(is_int(t.scale) and is_int(t.extent) for t in terms):
            return None
        cuts = sorted({t.scale.value * d for t in terms for d in _divisors(t.extent.value)})
        lo = max(c for c in cuts if g % c == 0)
        hi = next((c for c in cuts if c % top == 0 and c % lo == 0), None)
        if hi is None or (lo == 1 and hi == cuts[-1]):
            return None
        return lo, hi

    def _term_digits(self, m: IterMark, sp: IterSplitExpr):
        """``[(term, lf, ext)]``: digits ``[lf, lf*ext)`` of each term that ``sp`` covers."""
        terms = m.source.args
        lo, ext = sp.lower_factor, sp.extent
        if is_int(lo) and is_int(ext) and all(is_int(t.scale) and is_int(t.extent) for t in terms):
            lo, hi = lo.value, lo.value * ext.value
            if hi > terms[-1].scale.value * terms[-1].extent.value:
                return None
            out = []
            for t in terms:
                p, e = t.scale.value, t.extent.value
                a, b = max(lo, p), min(hi, p * e)
                if a >= b:
                    continue
                if a % p or b % p or e % (b // p) or (b // p) % (a // p):
                    return None  # the range starts or ends inside a digit of the term
                dt = t.extent.dtype
                out.append((t, E.IntImm(dt, a // p), E.IntImm(dt, b // a)))
            return out
        # symbolic factors: only whole terms
        hi = self.ar.mul(lo, ext)
        first = next((k for k, t in enumerate(terms) if self.ar.eq(t.scale, lo)), None)
        last = next(
            (k for k, t in enumerate(terms) if self.ar.eq(self.ar.mul(t.scale, t.extent), hi)), None
        )
        if first is None or last is None or first > last:
            return None
        return [(t, E.IntImm(t.extent.dtype, 1), t.extent) for t in terms[first : last + 1]]

    def rank(self, frame: IterMark) -> tuple[bool, int]:
        """Preference among frames holding the same digits: a frame that the indices use
        directly, then the widest (the fusion that the others are digits of)."""
        width = frame.extent.value if is_int(frame.extent) else 0
        return id(frame) not in self.rooted, -width

    def built_from(self, m: IterMark) -> set[int]:
        hit = self.inside.get(id(m))
        if hit is None:
            hit = set()
            if _is_fused(m):
                for t in m.source.args:
                    hit.add(id(t.source))
                    hit |= self.built_from(t.source)
            self.inside[id(m)] = hit
        return hit

    def _avoid(self, busy: AbstractSet[int]) -> set[int]:
        """Frames a split must not lift into while the ``busy`` frames are consumed."""
        out = set(busy)
        for fid in self.consumed:
            if self.built_from(self.frames[fid]) & busy:
                out.add(fid)
        return out

    # lifting ------------------------------------------------------------------------------
    def lift(self, sp: IterSplitExpr, avoid: AbstractSet[int]) -> IterSplitExpr:
        """``sp`` as a split of a frame whose terms hold its digits, else ``sp``."""
        ar = self.ar
        for frame, part in self.parents.get(id(sp.source), []):
            if self.blocked(frame, avoid) or not self._holds(part, sp):
                continue
            lf = ar.mul(part.scale, ar.div(sp.lower_factor, part.lower_factor))
            return IterSplitExpr(frame, lf, sp.extent, sp.scale)
        return sp

    def blocked(self, frame: IterMark, avoid: AbstractSet[int]) -> bool:
        """Whether ``frame`` is in ``avoid``, or an alias (of an alias...) of one that is."""
        for _ in range(_MAX_DEPTH):
            if id(frame) in avoid:
                return True
            hit = self.alias.get(id(frame))
            if hit is None:
                return False
            frame = hit[0]
        return True

    def cut(self, sp: IterSplitExpr, avoid: AbstractSet[int]) -> list[IterSplitExpr]:
        """``sp`` cut into consecutive digit ranges at the edges of frame terms it straddles.

        Only constant digit positions are cut.
        """
        if not (is_int(sp.lower_factor) and is_int(sp.extent)):
            return [sp]
        lo, top = sp.lower_factor.value, sp.lower_factor.value * sp.extent.value
        edges = set()
        for frame, part in self.parents.get(id(sp.source), []):
            if not self.blocked(frame, avoid) and is_int(part.lower_factor) and is_int(part.extent):
                edges.update((part.lower_factor.value, part.lower_factor.value * part.extent.value))
        cuts = [lo]
        for b in sorted(e for e in edges if lo < e < top):
            if b % cuts[-1] == 0 and top % b == 0:
                cuts.append(b)
        if len(cuts) == 1:
            return [sp]
        cuts.append(top)
        dt = sp.extent.dtype
        return [
            IterSplitExpr(
                sp.source,
                E.IntImm(dt, a),
                E.IntImm(dt, b // a),
                self.ar.mul(sp.scale, E.IntImm(dt, a // lo)),
            )
            for a, b in itertools.pairwise(cuts)
        ]

    def resolve(
        self,
        sp: IterSplitExpr,
        avoid: AbstractSet[int] = frozenset(),
        cut: bool = True,
        depth: int = 0,
    ) -> list[IterSplitExpr]:
        """Lift ``sp`` (cut where needed) through frames and aliases, short of ``avoid``.

        The terms a frame consumes are not cut: a term that straddles another frame's term
        is not inside it, and that frame's term, if inside this one, lifts here instead
        (whichever of the two frames is consumed first).
        """
        out: list[IterSplitExpr] = []
        for part in self.cut(sp, avoid) if cut else [sp]:
            new = self.lift(part, avoid)
            hit = self.alias.get(id(new.source))
            if hit is not None and id(hit[0]) not in avoid:
                new = IterSplitExpr(
                    hit[0], self.ar.mul(hit[1], new.lower_factor), new.extent, new.scale
                )
            elif hit is not None:  # ``part`` itself splits an alias of a frame in ``avoid``
                new = part
            if new is part or depth >= _MAX_DEPTH:
                out.append(part)
            else:
                out.extend(self.resolve(new, avoid, cut, depth + 1))
        return out

    def find_aliases(self) -> None:
        """Frames that are consecutive digits of another frame, as ``(other, lf)``."""
        self.alias.clear()
        frames = [m for m in map(self._frame_of, self.consumed) if m is not None]
        grew = True
        while grew:  # aliases of inner frames can enable aliases of outer ones
            grew = False
            for m in frames:
                if id(m) not in self.alias:
                    found = self.as_digits_of(m)
                    if found is not None:
                        self.alias[id(m)] = found
                        grew = True

    def _frame_of(self, fid: int) -> IterMark | None:
        # a tightened frame ranges over less than its terms: it is no run of other digits
        return None if fid in self.tight else self.frames[fid]

    def as_digits_of(self, mark: IterMark) -> tuple[IterMark, E.PrimExpr] | None:
        avoid = self._avoid({id(mark)})
        reached = [self.reach(p, avoid) for p in self.consumed[id(mark)]]
        common = set(reached[0]).intersection(*reached[1:]) - {id(mark)}
        for target in sorted((reached[0][t].source for t in common), key=self.rank):
            lifted = [r[id(target)] for r in reached]
            covered = lifted[0].lower_factor
            for x in lifted:
                if not self.ar.eq(x.lower_factor, covered):
                    break
                covered = self.ar.mul(covered, x.extent)
            else:
                if self.ar.eq(self.ar.div(covered, lifted[0].lower_factor), mark.extent):
                    return target, lifted[0].lower_factor
        return None

    def reach(self, sp: IterSplitExpr, avoid: AbstractSet[int]) -> dict[int, IterSplitExpr]:
        """Every mark that holds the digits of ``sp`` (``sp``'s own among them), with the
        split of it that equals ``sp``: all ways of lifting, where ``resolve`` takes one."""
        ar = self.ar
        out: dict[int, IterSplitExpr] = {}
        stack = [sp]
        while stack and len(out) < 4 * _MAX_DEPTH:
            x = stack.pop()
            if id(x.source) in out:
                continue
            out[id(x.source)] = x
            hit = self.alias.get(id(x.source))
            if hit is not None and id(hit[0]) not in avoid:
                stack.append(
                    IterSplitExpr(hit[0], ar.mul(hit[1], x.lower_factor), x.extent, x.scale)
                )
            for frame, part in self.parents.get(id(x.source), []):
                if not self.blocked(frame, avoid) and self._holds(part, x):
                    lf = ar.mul(part.scale, ar.div(x.lower_factor, part.lower_factor))
                    stack.append(IterSplitExpr(frame, lf, x.extent, x.scale))
        return out

    def _holds(self, part: IterSplitExpr, sp: IterSplitExpr) -> bool:
        """Whether the digits of ``sp`` lie inside those of ``part`` (splits of one mark)."""
        ar = self.ar
        return ar.divisible(sp.lower_factor, part.lower_factor) and ar.divisible(
            ar.mul(part.lower_factor, part.extent), ar.mul(sp.lower_factor, sp.extent)
        )

    # uses ---------------------------------------------------------------------------------
    def collect_uses(
        self, opened: list[IterSplitExpr]
    ) -> dict[int, tuple[IterMark, list[IterSplitExpr]]]:
        uses: dict[int, tuple[IterMark, list[IterSplitExpr]]] = {}
        busy: set[int] = set()

        def use(sp: IterSplitExpr) -> None:
            m = sp.source
            first = id(m) not in uses
            uses.setdefault(id(m), (m, []))[1].append(sp)
            if first and id(m) in self.consumed:  # a frame: consume its terms, once
                busy.add(id(m))
                avoid = self._avoid(busy)
                for p in self.consumed[id(m)]:
                    for part in self.resolve(p, avoid, cut=False):
                        use(part)
                busy.discard(id(m))

        for p in opened:
            for part in self.resolve(p):
                use(part)
        return uses

    def check_mark(self, mark: IterMark, splits: list[IterSplitExpr], level: CheckLevel) -> None:
        if all(is_int(s.lower_factor) and is_int(s.extent) for s in splits) and is_int(mark.extent):
            order = sorted(splits, key=lambda s: s.lower_factor.value)
            covered = 1
            for s in order:
                lf = s.lower_factor.value
                ok = lf == covered if level == "bijective" else lf % covered == 0
                if not ok:
                    raise NotAffine(
                        f"the splits of {mark!r} overlap or leave gaps: {[str(s) for s in order]}"
                    )
                covered = lf * s.extent.value
            if mark.extent.value % covered != 0 or (
                level == "bijective" and covered != mark.extent.value
            ):
                raise NotAffine(
                    f"the splits of {mark!r} do not cover it exactly: {[str(s) for s in order]}"
                )
            return
        # symbolic: an exact chain from lower_factor 1 up
        rest = list(splits)
        covered: E.PrimExpr = E.IntImm(mark.extent.dtype, 1)
        while rest:
            nxt = next((s for s in rest if self.ar.eq(s.lower_factor, covered)), None)
            if nxt is None:
                raise NotAffine(
                    f"the splits of {mark!r} overlap or leave gaps: {[str(s) for s in splits]}"
                )
            rest.remove(nxt)
            covered = self.ar.mul(covered, nxt.extent)
        if level == "bijective" and not self.ar.eq(covered, mark.extent):
            raise NotAffine(
                f"the splits of {mark!r} do not cover it exactly: {[str(s) for s in splits]}"
            )


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]
