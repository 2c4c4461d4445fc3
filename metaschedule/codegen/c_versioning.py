"""Loop versioning: a guarded loop body gets an unguarded copy for the interior.

An inlined padding block leaves its bounds test in every load of the consumer::

    for y, x0, c0:                          # the output tile loops
      for ry, rx, x1:                       # the 3x3 window, the tile's pixels
        acc += select(1 <= y + ry && y + ry < 113 && 1 <= x0*4 + x1 + rx && ...,
                      X[y + ry - 1, x0*4 + x1 + rx - 1, c], 0) * K[ry, rx, c]

Every window load is then a branch or a blend, and the loads of neighbouring taps cannot
be shared (:func:`.c_accumulate.straight_line` keeps guarded loads apart). GCC neither
splits the iteration space nor hoists such tests. Here the code generator does: for a
loop ``L`` above the guarded code, each comparison in a guard (``a <= b``, ``a < b``, ...
of integer index expressions, within a conjunction) is bounded over the loops inside
``L``'s body (:func:`..tir.transform.affine.bounds`); its worst case is a test on the
variables of ``L`` and the loops around it. When all the tests hold, no guard inside
``L``'s body can fail, and a copy of the body without those comparisons runs::

    for y, x0, c0:
      if (1 <= y && y + 2 < 113 && 1 <= x0*4 && x0*4 + 5 < 113)
        <the body, the window loads plain>  # the interior: most tiles
      else
        <the body as it was>                # tiles on the border

(the original body stays for the tiles that touch the border). When the test does not
depend on ``L`` itself (the guards are invariant in it), the test goes ahead of ``L``
instead, and the copy is the whole loop, the loop the C compiler would vectorize::

    for pixel:                              # a padding block computed per pixel
      if (<the pixel's window inside the input>)
        for c: pad[ry, rx, c] = X[...]      # 9 plain loads a channel: vectorized
      else
        for c: pad[ry, rx, c] = (<ry, rx inside>) ? X[...] : 0

GCC vectorizes a loop with one or two invariant guards by unswitching it, but with
more it keeps each ``cond ? X[i] : 0`` a masked load with a scalar mask, which it does
not vectorize (the 9 window loads of an average pool ran 0.13x as fast as LLVM's code).

Guards are ``Select`` conditions and ``if`` statements (the predicates of imperfect
tiles); comparisons that cannot be bounded (``(y + ry) % 2 == 0`` of a strided
transposed convolution) stay in both copies.

Where the test goes, and the bounds on code growth:

* ``L`` is the deepest loop above the guards that is not inside an accumulation: every
  loop around ``L`` (and ``L``) that encloses an updated buffer's allocation moves the
  updated element (a reduction loop would put the test inside the register tile of
  :mod:`.c_accumulate`); ``L`` is not vectorized and its body holds no parallel loop.
* The guards left without a bounds comparison must feed an accumulation (the loads of
  a window; a padding block copied into its own buffer is left alone) and run at least
  :data:`MIN_GUARDS_PER_TEST` times per test (a test per guard gains nothing); or, for
  the test ahead of ``L``, ``L`` is serial, of at least two iterations, holds no
  vectorized loop, and at least :data:`MIN_INVARIANT_GUARDS` guards (any, a padding
  copy's too) run per iteration.
* The body holds at most :data:`MAX_BODY_NODES` statements and runs at most
  :data:`MAX_BODY_STEPS` stores (larger tiles measured slower with the copy): one copy
  of it (or of ``L``) is added, once per nest (the copies are not versioned again). A
  body whose only guards are the tile predicates of an accumulation (an imperfect split's
  ``if`` around the updates, no select) has no bound on its stores: it is a register tile
  (8 rows of a 197-row matmul by 8), whose interior copy :mod:`.c_accumulate` keeps in
  variables (10x the guarded tile's speed). At
  least :data:`MIN_INTERIOR_SHARE` of the iterations must take the unguarded copy
  (:func:`.c_interior.interior_share` evaluates the test over the loops' iteration space): a row
  of 8 pixels tiled by 4 has no interior tile, and gets no copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, cast

from ..tir import expr as E
from ..tir.buffer import Buffer
from ..tir.dtype import is_int
from ..tir.functor import Mutator, Visitor, collect_vars, has_loop_kind
from ..tir.stmt import Allocate, BufferStore, For, ForKind, IfThenElse, SeqStmt, Stmt
from ..tir.transform.affine import Affine, Ranges, bounds
from .c_expr import conjuncts, nonneg_form
from .c_interior import interior_share

__all__ = [
    "MAX_BODY_NODES",
    "MAX_BODY_STEPS",
    "MIN_GUARDS_PER_TEST",
    "MIN_INTERIOR_SHARE",
    "MIN_INVARIANT_GUARDS",
    "adds_tests",
    "count_ifs",
    "version_guards",
]

#: Fewest guard evaluations a test must replace (per execution of the versioned body).
MIN_GUARDS_PER_TEST = 4
#: Fewest guards per iteration, invariant in the loop, that make a loop versioned as a
#: whole (the test ahead of it): GCC unswitches a loop on one or two invariant guards and
#: vectorizes it, but not on more (the 9 selects of a 3x3 window stay masked loads with a
#: scalar mask, "no vectype for stmt .MASK_LOAD", and the loop stays scalar).
MIN_INVARIANT_GUARDS = 3
#: Most statements (IR nodes) in a body that gets an unguarded copy.
MAX_BODY_NODES = 512
#: Most stores one execution of a versioned body runs (a vector store counts once):
#: measured on depthwise tiles of 56 accumulators of 16 lanes across a 3x3 window (252
#: vector updates per test), the unguarded copy ran 0.71-0.83x as fast as the guarded
#: body; at 126 updates (14 accumulators of 8 lanes) level (0.97-1.05x).
MAX_BODY_STEPS = 128
#: Smallest share of the iterations that must take the unguarded copy.
MIN_INTERIOR_SHARE = 1 / 8


def version_guards(body: Stmt) -> Stmt:
    """``body`` with the guarded loop bodies versioned (see the module docstring)."""
    facts = _FactsWalk()
    facts.visit(body)
    return _Versioner(facts.loops).walk(body, [], {})[0]


def adds_tests(body: Stmt) -> bool:
    """Whether :func:`version_guards` gives ``body`` more ``if`` statements than it has:
    some nest gets a test ahead of an unguarded copy. The same walk, which stops at the
    first such nest when the rest of ``body`` cannot make up for it (a copy whose guards
    all hold removes ``if`` statements), instead of counting them in the result."""
    facts = _FactsWalk()
    facts.visit(body)
    versioner = _Versioner(facts.loops, stop_above=facts.ifs)
    try:
        versioner.walk(body, [], {})
    except _Decided:
        return True
    return versioner.added > 0


def count_ifs(node: Stmt) -> int:
    """The number of ``if`` statements in ``node``."""
    counter = _IfCounter()
    counter.visit(node)
    return counter.count


class _IfCounter(Visitor):
    def __init__(self) -> None:
        self.count = 0

    def visit_IfThenElse(self, node: IfThenElse) -> None:
        self.count += 1
        self.generic_visit(node)


@dataclass(frozen=True)
class _Facts:
    """What one walk learns of the body of a loop with a guard (an ``if`` or a select)
    inside, so that :class:`_Versioner` passes over the loops it would reject anyway
    without analysing them: the guard-free ones (a convolution's beside its padding
    stage), those of too many stores or too few guards."""

    steps: int  # stores one execution runs, as :attr:`_Proofs.steps` counts them
    counted: int  # guard evaluations feeding an accumulation: at least ``_Proofs.saved``
    guards: int  # guard evaluations: at least ``_Proofs.freed``
    vectorized: bool  # a vectorized loop inside
    selects: bool = False  # a select inside (a guarded load): not a register tile


class _FactsWalk(Visitor):
    """One walk: the :class:`_Facts` of the loops with a guard inside (``loops``, by id)
    and the number of ``if`` statements (``ifs``)."""

    def __init__(self) -> None:
        self.loops: dict[int, _Facts] = {}
        self.ifs = 0
        # of the loop body being walked, so far
        self.steps = self.counted = self.guards = 0
        self.guarded = self.vectorized = self.selects = False
        self.ifs_open = 0  # ``if`` statements around the node being walked
        self.update = False  # a store that reads its own buffer (under the open ``if``)

    def visit_For(self, loop: For) -> None:
        outer = (
            self.steps, self.counted, self.guards, self.guarded, self.vectorized, self.selects
        )  # fmt: skip
        self.steps = self.counted = self.guards = 0
        self.guarded = self.vectorized = self.selects = False
        self.generic_visit(loop)
        if self.guarded:
            self.loops[id(loop)] = _Facts(
                self.steps, self.counted, self.guards, self.vectorized, self.selects
            )
        trips = 1 if loop.kind is ForKind.VECTORIZED else _trips(loop)
        self.steps = outer[0] + trips * self.steps
        self.counted = outer[1] + trips * self.counted
        self.guards = outer[2] + trips * self.guards
        self.guarded = outer[3] or self.guarded
        self.vectorized = outer[4] or self.vectorized or loop.kind is ForKind.VECTORIZED
        self.selects = outer[5] or self.selects

    def visit_BufferStore(self, s: BufferStore) -> None:
        self.steps += 1
        before = self.guards
        self.generic_visit(s)
        selects = self.guards - before  # no loop inside a store: each runs once
        if (selects or self.ifs_open) and _reads(s.value, s.buffer):
            self.counted += selects  # the guards of an accumulation's loads
            self.update = True

    def visit_IfThenElse(self, s: IfThenElse) -> None:
        self.ifs += 1
        self.guarded = True
        outer = self.update
        self.update = False
        self.ifs_open += 1
        self.generic_visit(s)
        self.ifs_open -= 1
        self.guards += 1
        self.counted += self.update  # an ``if`` around an accumulation
        self.update = outer or self.update

    def visit_Select(self, e: E.Select) -> None:
        self.guarded = self.selects = True
        self.guards += 1
        self.generic_visit(e)


def _trips(loop: For) -> int:
    """Iterations of ``loop`` as :class:`_Unguard` counts them (a symbolic extent: many)."""
    return loop.extent.value if isinstance(loop.extent, E.IntImm) else 1 << 20


# ----------------------------------------------------------------------------- guards


def _conjunction(atoms: list[E.PrimExpr]) -> E.PrimExpr | None:
    out: E.PrimExpr | None = None
    for a in atoms:
        out = a if out is None else E.And(out, a)
    return out


_INDEX_NODES = (E.Var, E.IntImm, E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max)


def _index_of(e: E.PrimExpr, outer: set[E.Var]) -> bool:
    """True if ``e`` is integer arithmetic of the ``outer`` loop variables only (a test
    that may run ahead of the body: no loads, calls or other variables)."""
    if isinstance(e, E.Var):
        return e in outer
    if isinstance(e, E.Cast):
        return is_int(e.dtype) and _index_of(e.value, outer)
    if not isinstance(e, _INDEX_NODES):
        return False
    if isinstance(e, E.BinaryOp):
        return _index_of(e.a, outer) and _index_of(e.b, outer)
    return True


def _prove(atom: E.PrimExpr, inner: Ranges, outer: set[E.Var]) -> Literal[True] | Affine | None:
    """When ``atom`` holds for every value of the ``inner`` loop variables: always (True),
    when ``lo >= 0`` holds for the returned form ``lo`` of the ``outer`` loop variables, or
    unknown (None)."""
    form = nonneg_form(atom)
    if form is None or not isinstance(atom, E.CmpOp):  # nonneg_form: comparisons only
        return None
    iv = bounds(form.to_expr(atom.a.dtype), inner)
    if iv is None:
        return None
    lo = iv[0]
    if lo.is_const():
        return True if lo.const >= 0 else None
    if not all(_index_of(a, outer) for _, a in lo.terms.values()):
        return None
    return lo


def _terms_key(form: Affine) -> tuple:
    return tuple(sorted((k, c) for k, (c, _) in form.terms.items()))


def _test(lo: Affine, dtype: str) -> E.PrimExpr:
    """``lo >= 0`` written as ``terms >= c``, or ``terms <= c`` when every coefficient is
    negative."""
    terms = Affine(lo.terms, 0)
    if all(c < 0 for c, _ in lo.terms.values()):
        return E.LE(terms.scale(-1).to_expr(dtype), E.const(lo.const, dtype))
    return E.GE(terms.to_expr(dtype), E.const(-lo.const, dtype))


@dataclass
class _Proofs:
    """The tests found in one body (the strongest ``lo >= 0`` per set of terms, with its
    dtype), and how many guard evaluations the unguarded copy rids of their bounds
    comparisons per execution of the body."""

    tests: dict = field(default_factory=dict)
    saved: int = 0
    freed: int = 0  # as ``saved``, counting every guard (a padding copy's too)
    steps: int = 0  # stores run per execution of the body (a vector store counts once)
    selects: bool = False  # a select in the body (a guarded load)

    def add(self, lo: Affine, dtype: str) -> None:
        key = _terms_key(lo)
        old = self.tests.get(key)
        if old is None or lo.const < old[0].const:
            self.tests[key] = (lo, dtype)

    def condition(self) -> E.PrimExpr | None:
        return _conjunction([_test(lo, dtype) for lo, dtype in self.tests.values()])


class _Unguard(Mutator):
    """The unguarded copy of a body: proven comparisons dropped from its guards."""

    def __init__(self, proofs: _Proofs, outer: set[E.Var]) -> None:
        self.proofs, self.outer = proofs, outer
        self.inner: dict[E.Var, tuple[E.PrimExpr, E.PrimExpr]] = {}
        self.trips = 1  # executions per body execution at this point
        self.in_update = False  # inside the value of a store that reads its own buffer

    def _strip(self, cond: E.PrimExpr, counts: bool) -> tuple[E.PrimExpr | None, bool]:
        """The comparisons of ``cond`` left after the proven ones (None: all proven), and
        whether any was proven; ``counts``: the guard feeds an accumulation (a window's
        loads), whose evaluations count towards :data:`MIN_GUARDS_PER_TEST`."""
        kept: list[E.PrimExpr] = []
        for atom in conjuncts(cond):
            proof = _prove(atom, self.inner, self.outer)
            if proof is None:
                kept.append(atom)
            elif proof is not True and isinstance(atom, E.CmpOp):  # only comparisons are proved
                self.proofs.add(proof, atom.a.dtype)
        changed = len(kept) < len(conjuncts(cond))
        if changed and all(nonneg_form(a) is None for a in kept):
            # no bounds test left (a deeper test could not remove more)
            self.proofs.freed += self.trips
            if counts:
                self.proofs.saved += self.trips
        return _conjunction(kept), changed

    def visit_For(self, loop: For) -> Stmt:
        saved = self.trips
        if loop.kind is not ForKind.VECTORIZED:
            self.trips *= _trips(loop)
        self.inner[loop.loop_var] = (loop.min, loop.extent)
        try:
            return cast(Stmt, self.generic_visit(loop))  # a mutated For
        finally:
            del self.inner[loop.loop_var]
            self.trips = saved

    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        self.proofs.steps += self.trips
        saved = self.in_update
        self.in_update = _reads(s.value, s.buffer)
        try:
            return cast(Stmt, self.generic_visit(s))  # a mutated BufferStore
        finally:
            self.in_update = saved

    def visit_IfThenElse(self, s: IfThenElse) -> Stmt:
        rest, changed = self._strip(s.condition, _has_update(s))
        then_case = self.visit(s.then_case)
        else_case = self.visit(s.else_case) if s.else_case is not None else None
        if rest is None:
            return then_case
        cond = rest if changed else s.condition
        if cond is s.condition and then_case is s.then_case and else_case is s.else_case:
            return s
        return IfThenElse(cond, then_case, else_case)

    def visit_Select(self, e: E.Select) -> E.PrimExpr:
        self.proofs.selects = True
        rest, changed = self._strip(e.condition, self.in_update)
        t, f = self.visit(e.true_value), self.visit(e.false_value)
        if rest is None:
            return t
        cond = rest if changed else e.condition
        if cond is e.condition and t is e.true_value and f is e.false_value:
            return e
        return E.Select(cond, t, f)


def _reads(e: E.PrimExpr, buf: Buffer) -> bool:
    """True if ``e`` loads from ``buf``."""
    hit = False

    class _V(Visitor):
        def visit_BufferLoad(self, load: E.BufferLoad) -> None:
            nonlocal hit
            hit = hit or load.buffer is buf
            self.generic_visit(load)

    _V().visit(e)
    return hit


def _has_update(s: Stmt) -> bool:
    """True if ``s`` holds a store that reads its own buffer."""
    hit = False

    class _V(Visitor):
        def visit_BufferStore(self, store: BufferStore) -> None:
            nonlocal hit
            hit = hit or _reads(store.value, store.buffer)

    _V().visit(s)
    return hit


# ----------------------------------------------------------------------------- placement


@dataclass(frozen=True)
class _Update:
    """A store that reads its own buffer (an accumulation) and the variables of its
    indices."""

    buffer: Buffer
    index_vars: frozenset


def _body_facts(body: Stmt) -> tuple[list[_Update], bool, int]:
    """The updates in ``body`` of buffers allocated outside it (one allocated inside
    accumulates inside), whether it holds a parallel loop, and its node count."""
    updates: list[_Update] = []
    parallel = False
    nodes = 0
    local: set[Buffer] = set()  # allocated inside body: its updates run inside it too

    class _V(Visitor):
        def visit_For(self, loop: For) -> None:
            nonlocal parallel, nodes
            parallel = parallel or loop.kind is ForKind.PARALLEL
            nodes += 1
            self.visit(loop.body)

        def visit_BufferStore(self, s: BufferStore) -> None:
            nonlocal nodes
            nodes += 1
            if _reads(s.value, s.buffer):
                idx: set[E.Var] = set()
                for i in s.indices:
                    idx |= collect_vars(i)
                updates.append(_Update(s.buffer, frozenset(idx)))

        def visit_IfThenElse(self, s: IfThenElse) -> None:
            nonlocal nodes
            nodes += 1
            self.visit(s.then_case)
            if s.else_case is not None:
                self.visit(s.else_case)

        def visit_Allocate(self, s: Allocate) -> None:
            local.add(s.buffer)
            self.visit(s.body)

        def visit_SeqStmt(self, s: SeqStmt) -> None:
            for x in s.seq:
                self.visit(x)

    _V().visit(body)
    return [u for u in updates if u.buffer not in local], parallel, nodes


def _invariant(loop: For, test: E.PrimExpr | None, proofs: _Proofs) -> bool:
    """True if ``loop``, a loop the C compiler may vectorize (serial, at least two
    iterations, no vectorized loop inside), has guards invariant in it (``test`` does not
    depend on its variable) that the unguarded copy rids of their bounds tests, at least
    :data:`MIN_INVARIANT_GUARDS` per iteration."""
    if loop.kind is not ForKind.SERIAL or not isinstance(loop.extent, E.IntImm):
        return False
    if loop.extent.value < 2 or proofs.freed < MIN_INVARIANT_GUARDS:
        return False
    if test is not None and loop.loop_var in collect_vars(test):
        return False
    return not has_loop_kind(loop.body, ForKind.VECTORIZED)


def _may_be_invariant(loop: For, facts: _Facts) -> bool:
    """Whether :func:`_invariant` may hold of ``loop``, as far as ``facts`` tell."""
    return (
        loop.kind is ForKind.SERIAL
        and isinstance(loop.extent, E.IntImm)
        and loop.extent.value >= 2
        and facts.guards >= MIN_INVARIANT_GUARDS
        and not facts.vectorized
    )


def _unit(loop: For) -> bool:
    return isinstance(loop.extent, E.IntImm) and loop.extent.value == 1


class _Decided(Exception):
    """:func:`adds_tests` knows its answer: the tests added so far outnumber the ``if``
    statements the rest of the walk could remove."""


class _Versioner:
    """The top-down walk: versions the deepest eligible loop on each path.

    Args:
        facts: the :class:`_Facts` of the loops with a guard inside, by id: only those
            can be versioned, or hold a loop that can.
        stop_above: count the ``if`` statements the versioning adds (``added``) and raise
            :class:`_Decided` once they are more than this; None: do not count.
    """

    def __init__(self, facts: dict[int, _Facts], stop_above: int | None = None) -> None:
        self.facts = facts
        self.stop_above = stop_above
        self.added = 0

    def walk(self, s: Stmt, chain: list[For], alloc_depth: dict[Buffer, int]) -> tuple[Stmt, bool]:
        if isinstance(s, SeqStmt):
            out, changed = [], False
            for x in s.seq:
                y, c = self.walk(x, chain, alloc_depth)
                out.append(y)
                changed = changed or c
            return (SeqStmt(tuple(out)) if changed else s), changed
        if isinstance(s, Allocate):
            inner = {**alloc_depth, s.buffer: len(chain)}
            body, changed = self.walk(s.body, chain, inner)
            return (Allocate(s.buffer, body) if changed else s), changed
        if isinstance(s, IfThenElse):
            then_case, c1 = self.walk(s.then_case, chain, alloc_depth)
            else_case, c2 = (
                self.walk(s.else_case, chain, alloc_depth) if s.else_case else (None, False)
            )
            if not (c1 or c2):
                return s, False
            return IfThenElse(s.condition, then_case, else_case), True
        if isinstance(s, For) and s.kind is not ForKind.VECTORIZED:
            facts = self.facts.get(id(s))
            if facts is not None:
                return self._loop(s, chain, alloc_depth, facts)
        return s, False

    def _loop(
        self, loop: For, chain: list[For], alloc_depth: dict[Buffer, int], facts: _Facts
    ) -> tuple[Stmt, bool]:
        body, changed = self.walk(loop.body, [*chain, loop], alloc_depth)
        if changed:  # versioned deeper
            return _with_body(loop, body), True
        # the checks below, on bounds of what the proofs would count; the bound on the
        # stores (MAX_BODY_STEPS) is for guarded loads: a body whose guards are the tile
        # predicates of an accumulation only is versioned at any size (a register tile
        # whose interior copy :mod:`.c_accumulate` keeps in variables)
        if facts.steps > MAX_BODY_STEPS and (facts.selects or not facts.counted):
            return loop, False
        if facts.counted < MIN_GUARDS_PER_TEST and not _may_be_invariant(loop, facts):
            return loop, False
        if not self._eligible(loop, chain, alloc_depth):
            return loop, False
        proofs = _Proofs()
        fast = _Unguard(proofs, {f.loop_var for f in (*chain, loop)}).visit(loop.body)
        tiles_only = not proofs.selects and proofs.saved > 0
        if fast is loop.body or (proofs.steps > MAX_BODY_STEPS and not tiles_only):
            return loop, False
        test = proofs.condition()
        around = _invariant(loop, test, proofs)
        if not around and proofs.saved < MIN_GUARDS_PER_TEST:
            return loop, False
        if test is None:  # every guard holds everywhere: the unguarded body is the body
            self._count(loop.body, fast, 0)
            return _with_body(loop, fast), True
        share = interior_share(test, [*chain, loop])
        if share is not None and share < MIN_INTERIOR_SHARE:
            return loop, False  # a copy that (almost) never runs
        self._count(None, fast, 1)
        if around:  # the test ahead of the loop: an unguarded loop for the compiler
            return IfThenElse(test, _with_body(loop, fast), loop), True
        return _with_body(loop, IfThenElse(test, fast, loop.body)), True

    def _count(self, replaced: Stmt | None, copy: Stmt, tests: int) -> None:
        """Count the ``if`` statements a versioning adds: ``tests`` and those of the
        unguarded ``copy``, less those of the ``replaced`` body (the copy replaces it)."""
        if self.stop_above is None:
            return
        if self.stop_above > 0:  # else neither has any
            tests += count_ifs(copy) - (count_ifs(replaced) if replaced is not None else 0)
        self.added += tests
        if self.added > self.stop_above:
            raise _Decided

    @staticmethod
    def _eligible(loop: For, chain: list[For], alloc_depth: dict[Buffer, int]) -> bool:
        updates, parallel, nodes = _body_facts(loop.body)
        if parallel or nodes > MAX_BODY_NODES:
            return False
        loops = [*chain, loop]
        for u in updates:
            for f in loops[alloc_depth.get(u.buffer, 0) :]:
                if not _unit(f) and f.loop_var not in u.index_vars:
                    return False  # the body is inside u's accumulation over f
        return True


def _with_body(loop: For, body: Stmt) -> For:
    return For(
        loop.loop_var, loop.min, loop.extent, loop.kind, body, loop.thread_binding, loop.annotations
    )
