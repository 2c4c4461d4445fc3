"""``blockize``: wrap the subtree under a loop (or a run of sibling blocks) in a new block.

For a loop, each binding of the block below is divided into an outer part (a function
of the loops above the loop) and an inner part (of the loops from the loop down)::

    for i0, i1 in T.grid(4, 8):              for i0 in range(4):
        with block("B"):                         with block("B_o"):
            vi = i0 * 8 + i1          ->             vi_o = i0
            B[vi] = A[vi]                            for i1 in range(8):
                                                         with block("B"):
                                                             vi = vi_o * 8 + i1
                                                             B[vi] = A[vi]

The outer block's iteration variables are those outer parts (``vi_o``), with the kind
of the variable they come from; its regions are the inner block's relaxed over the
inner loops. Where we differ from TVM: the inner block keeps its iteration variables,
domains and body (only its bindings change), and keeps its ``init``: it still runs
exactly when every reduction variable is at its minimum. For a list of blocks, the
outer block gets one iteration variable per enclosing loop its blocks use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ...tir import (
    Block,
    BlockRealize,
    BufferRegion,
    For,
    IterType,
    IterVar,
    PrimExpr,
    Range,
    SeqStmt,
    Stmt,
    Var,
)
from ...tir.arith import Analyzer
from ...tir.arith.iter_map import IterSplitExpr, IterSumExpr, detect_iter_map
from ...tir.expr import IntImm, const
from ...tir.functor import collect_vars, substitute
from ..analysis import (
    and_all,
    clamp_region,
    conjuncts,
    loop_doms,
    lowest_common_ancestor,
    relax_region,
    union_regions,
)
from ..base import ScheduleBase, atomic
from ..edit import (
    StmtEditor,
    body_children,
    child_index,
    enclosing_loop_or_block,
    unique_block_name,
    with_children,
)
from ..error import BlockizeError, NotAffineError, SubspaceNotDivisibleError
from ..instruction import InstructionKind, register_inst_kind
from ..rv import BlockRV, LoopRV


class _NoDiv(Exception):
    index = -1


class _NotAffine(_NoDiv):
    pass


# ----------------------------------------------------------------------------- division


def _int(e: PrimExpr) -> int:
    if not isinstance(e, IntImm):
        raise _NoDiv(f"symbolic {e}")
    return e.value


def _digits(sp: IterSplitExpr) -> list[tuple[PrimExpr, int, int, int]]:
    """``sp`` as a sum of ``((src // lf) % ext) * scale`` terms over input iterators."""
    lf, ext, scale = _int(sp.lower_factor), _int(sp.extent), _int(sp.scale)
    src = sp.source.source
    if not isinstance(src, IterSumExpr):
        return [(src, lf, ext, scale)]
    # a predicate may have narrowed the mark: then taking it whole means every digit above lf
    lo_sel = lf
    hi_sel = lf * ext if lf * ext < _int(sp.source.extent) else float("inf")
    out = []
    for t in src.args:
        st, et = _int(t.scale), _int(t.extent)
        lo, hi = max(lo_sel, st), int(min(hi_sel, st * et))
        if lo >= hi:
            continue
        if lo % st or hi % lo or lo % lf:
            raise _NoDiv(f"digits [{lo}, {hi}) straddle a term of scale {st}")
        sub = IterSplitExpr(
            t.source,
            const(_int(t.lower_factor) * (lo // st)),
            const(hi // lo),
            const(scale * (lo // lf)),
        )
        out += _digits(sub)
    return out


def _term(src: PrimExpr, lf: int, ext: int, scale: int) -> PrimExpr:
    e = src if lf == 1 else src // lf
    return (e % ext) * scale


def divide_bindings(
    values: Sequence[PrimExpr],
    outer: dict[Var, Range],
    inner: dict[Var, Range],
    ana: Analyzer,
    predicate: PrimExpr | bool = True,
) -> list[tuple[PrimExpr, PrimExpr, int]]:
    """Each ``value == outer_part * factor + inner_part``: (outer_part, inner_part, factor).

    ``outer_part`` uses only ``outer`` loops, ``inner_part`` only ``inner`` ones. The
    bindings are analysed together, under ``predicate``. Raises ``_NotAffine`` when they
    are not an affine map of the loops, ``_NoDiv`` (with ``index``) when one cannot be split.
    """
    res = detect_iter_map(list(values), {**outer, **inner}, predicate)
    if not res.success:
        raise _NotAffine("; ".join(res.errors))
    out = []
    for n, (s, value) in enumerate(zip(res.indices, values)):
        try:
            out.append(_divide(s, value, inner, ana))
        except _NoDiv as err:
            err.index = n
            raise
    return out


def _divide(
    s: IterSumExpr, value: PrimExpr, inner: dict[Var, Range], ana: Analyzer
) -> tuple[PrimExpr, PrimExpr, int]:
    terms = _digits(s.args[0]) if s.args else []
    ins, outs = [], []
    for src, lf, ext, scale in terms:
        used = collect_vars(src)
        (ins if used & set(inner) else outs).append((src, lf, ext, scale))
    factor = 1
    for _src, _lf, ext, scale in sorted(ins, key=lambda t: t[3]):
        if scale != factor:
            raise _NoDiv(f"the inner loops do not form the low digits of {value}")
        factor *= ext
    if any(scale % factor for _, _, _, scale in outs):
        raise _NoDiv(
            f"an outer loop has a stride in {value} that is not a multiple of the "
            f"inner extent {factor}"
        )
    base = s.base
    if isinstance(base, IntImm):
        q, r = divmod(base.value, factor)
        qb, rb = const(q, value.dtype), const(r, value.dtype)
    elif factor == 1:
        qb, rb = base, const(0, value.dtype)
    else:
        raise _NoDiv(f"the symbolic offset {base} of {value}")
    o: PrimExpr = qb
    for src, lf, ext, scale in outs:
        o = o + _term(src, lf, ext, scale // factor)
    i: PrimExpr = rb
    for src, lf, ext, scale in ins:
        i = i + _term(src, lf, ext, scale)
    return ana.simplify(o), ana.simplify(i), factor


# ----------------------------------------------------------------------------- the mixin


class BlockizeMixin(ScheduleBase):
    @atomic
    def blockize(self, target: LoopRV | list[BlockRV], preserve_unit_iters: bool = True) -> BlockRV:
        """Wrap the subtree under a loop, or consecutive sibling blocks, in a new block::

            for i0, i1 in T.grid(4, 8):        for i0 in range(4):
                with block("B"):                   with block("B_o"):  # vi_o = i0
                    vi = i0 * 8 + i1   ->              for i1 in range(8):
                    ...                                    with block("B"):  # vi = vi_o * 8 + i1

        Args:
            target: a loop with exactly one block below it, or a list of blocks that are
                consecutive children of one loop or block (each alone in its subtree).
            preserve_unit_iters: keep outer iteration variables of extent 1.

        Returns:
            The new outer block (``<inner>_o`` for a loop, ``outer_<names>`` for blocks).

        Raises:
            ScheduleError: several or no blocks under the loop, bindings that are not
                affine or cannot be divided at the loop, a predicate or loop bound that
                mixes outer and inner loops, or blocks that are not consecutive siblings.
        """
        inputs: list
        if isinstance(target, LoopRV):
            inputs = [target]
            out = self._blockize_loop(target, bool(preserve_unit_iters))
        elif (
            isinstance(target, (list, tuple)) and len(target) == 1 and isinstance(target[0], LoopRV)
        ):
            inputs = [target[0]]
            out = self._blockize_loop(target[0], bool(preserve_unit_iters))
        elif (
            isinstance(target, (list, tuple))
            and target
            and all(isinstance(b, BlockRV) for b in target)
        ):
            inputs = list(target)
            out = self._blockize_blocks(list(target))
        else:
            raise BlockizeError(
                f"blockize: expected a LoopRV or a non-empty list of BlockRVs, got {target!r}"
            )
        self._record("Blockize", inputs, [bool(preserve_unit_iters)], [out])
        return out

    def _blockize_loop(self, loop: LoopRV, preserve_unit_iters: bool) -> BlockRV:
        fname, loop_node = self._loop(loop)
        lname = loop_node.loop_var.name
        blocks = self.state.child_block_realizes(loop_node)
        if len(blocks) != 1:
            raise BlockizeError(
                f"blockize: loop {lname} must hold exactly one block, it holds "
                f"{[b.block.name_hint for b in blocks]}; blockize a list of blocks instead"
            )
        realize = blocks[0]
        block = realize.block
        loops = self.state.loops_above(fname, realize)
        k = next(i for i, lp in enumerate(loops) if lp is loop_node)
        outer_loops, inner_loops = loops[:k], loops[k:]
        outer, inner = loop_doms(outer_loops), loop_doms(inner_loops)
        ana = Analyzer()
        for v, r in {**outer, **inner}.items():
            ana.bind(v, r)
        outer_ivs: list[IterVar] = []
        outer_vals: list[PrimExpr] = []
        inner_vals: list[PrimExpr] = []
        values = realize.iter_values
        try:
            parts = divide_bindings(values, outer, inner, ana, realize.predicate)
        except _NotAffine as err:
            shown = ", ".join(f"{iv.var.name} = {v}" for iv, v in zip(block.iter_vars, values))
            raise NotAffineError(
                f"blockize: block {block.name_hint!r} has non-affine bindings [{shown}] ({err}); "
                "blockize needs affine bindings"
            ) from None
        except _NoDiv as err:
            iv, value = block.iter_vars[err.index], values[err.index]
            raise SubspaceNotDivisibleError(
                f"blockize: the binding {iv.var.name} = {value} of block {block.name_hint!r} "
                f"cannot be divided into a part of the loops above {lname} and a part of "
                f"the loops from {lname} down ({err})"
            ) from None
        for iv, (o, i, factor) in zip(block.iter_vars, parts):
            ext_set = ana.int_set(o, outer)
            lo, hi = ext_set.min, ext_set.max
            if lo is None or hi is None:
                raise SubspaceNotDivisibleError(
                    f"blockize: cannot bound the outer part {o} of "
                    f"{iv.var.name} in block {block.name_hint!r}"
                )
            dom = Range(lo, ana.simplify(hi - lo + 1))
            unit = isinstance(dom.extent, IntImm) and dom.extent.value == 1
            if unit and not preserve_unit_iters:
                inner_vals.append(ana.simplify(lo * factor + i))
                continue
            ov = IterVar(Var(iv.var.name + "_o", iv.var.dtype), dom, iv.iter_type)
            outer_ivs.append(ov)
            outer_vals.append(o)
            inner_vals.append(
                ana.simplify(ov.var * factor + i) if factor != 1 else ana.simplify(ov.var + i)
            )
        # outer loop vars that an outer iter var stands for exactly
        as_outer = {
            v: ov.var for ov, v in zip(outer_ivs, outer_vals) if isinstance(v, Var) and v in outer
        }
        outer_pred, inner_pred = [], []
        for c in conjuncts(realize.predicate):
            used = collect_vars(c)
            if not used & set(inner):
                outer_pred.append(c)
            elif not used & set(outer):
                inner_pred.append(c)
            elif used & set(outer) <= set(as_outer):
                inner_pred.append(substitute(c, as_outer))
            else:
                raise SubspaceNotDivisibleError(
                    f"blockize: the predicate {c} of block {block.name_hint!r} mixes the loops "
                    f"above {lname} with the loops below it"
                )
        for lp in inner_loops:
            if collect_vars((lp.min, lp.extent)) & set(outer):
                raise BlockizeError(
                    f"blockize: the bounds of loop {lp.loop_var.name} depend on loops above {lname}"
                )
        new_inner = BlockRealize(tuple(inner_vals), and_all(inner_pred), block)
        outer_ana = Analyzer()
        for ov in outer_ivs:
            outer_ana.bind(ov.var, ov.dom)
        bmap = dict(zip((iv.var for iv in block.iter_vars), inner_vals))
        reads = relax_region(block.reads, bmap, inner, outer_ana)
        writes = relax_region(block.writes, bmap, inner, outer_ana)
        name = unique_block_name(self.state, fname, f"{block.name_hint}_o")
        body = StmtEditor().add(realize, lambda _: new_inner).run(loop_node)
        outer_block = Block(
            iter_vars=tuple(outer_ivs),
            reads=tuple(clamp_region(r, outer_ana) for r in reads),
            writes=tuple(clamp_region(w, outer_ana) for w in writes),
            name_hint=name,
            body=body,
        )
        new = BlockRealize(tuple(outer_vals), and_all(outer_pred), outer_block)
        self.state.replace(fname, {loop_node: new})
        return self._new_block_rv(fname, name)

    def _blockize_blocks(self, rvs: list[BlockRV]) -> BlockRV:
        located = [self._block(rv) for rv in rvs]
        fname = located[0][0]
        realizes = [r for _, r in located]
        names = [r.block.name_hint for r in realizes]
        if any(f != fname for f, _ in located) or len(set(names)) != len(names):
            raise BlockizeError(
                f"blockize: the blocks {names} must be distinct blocks of one function"
            )
        if any(self.state.parent(fname, r) is None for r in realizes):
            raise BlockizeError("blockize: the root block cannot be wrapped in another block")
        if len(realizes) > 1:
            lca = lowest_common_ancestor(self.state, fname, realizes)
        else:
            lca = self.state.parent(fname, realizes[0])
        parent = enclosing_loop_or_block(self.state, fname, lca)
        positions = [child_index(self.state, fname, parent, r) for r in realizes]
        kids = body_children(parent)
        order = sorted(positions)
        if order != list(range(order[0], order[0] + len(order))) or len(set(order)) != len(order):
            raise BlockizeError(
                f"blockize: the blocks {names} must be consecutive children of "
                "one loop or block, each in its own subtree"
            )
        for pos, r in zip(positions, realizes):
            under = self.state.child_block_realizes(kids[pos])
            if kids[pos] is not r and (len(under) != 1 or under[0] is not r):
                raise BlockizeError(
                    f"blockize: block {r.block.name_hint!r} shares its loops with "
                    "other blocks; pass those blocks too"
                )
        scope_loops = self.state.loops_above(fname, realizes[0])
        outer_loops = (
            scope_loops[: next(i for i, lp in enumerate(scope_loops) if lp is parent) + 1]
            if isinstance(parent, For)
            else []
        )
        outer = loop_doms(outer_loops)
        kinds: dict[Var, set[IterType]] = {v: set() for v in outer}
        used_stmt: set[Var] = set()
        for pos, r in zip(positions, realizes):
            used_stmt |= collect_vars(_loop_bounds(kids[pos])) | collect_vars(r.predicate)
            for iv, v in zip(r.block.iter_vars, r.iter_values):
                for var in collect_vars(v) & set(outer):
                    kinds[var].add(iv.iter_type)
        outer_ivs, vmap = [], {}
        for lp in outer_loops:
            ks = kinds[lp.loop_var]
            if not ks and lp.loop_var not in used_stmt:
                continue
            if len(ks) > 1:
                raise BlockizeError(
                    f"blockize: loop {lp.loop_var.name} feeds iter vars of "
                    f"different kinds in blocks {names}"
                )
            kind = next(iter(ks)) if ks else IterType.DATA_PAR
            iv = IterVar(
                Var("v" + lp.loop_var.name, lp.loop_var.dtype), Range(lp.min, lp.extent), kind
            )
            outer_ivs.append(iv)
            vmap[lp.loop_var] = iv.var
        ana = Analyzer()
        for iv in outer_ivs:
            ana.bind(iv.var, iv.dom)
        regions_r: list[BufferRegion] = []
        regions_w: list[BufferRegion] = []
        new_kids = []
        for pos in sorted(positions):
            stmt = kids[pos]
            r = realizes[positions.index(pos)]
            inner_loops = self.state.loops_above(fname, r)[len(outer_loops) :]
            new_r = BlockRealize(
                tuple(substitute(v, vmap) for v in r.iter_values),
                substitute(r.predicate, vmap),
                r.block,
            )
            bmap = dict(zip((iv.var for iv in r.block.iter_vars), new_r.iter_values))
            regions_r += relax_region(r.block.reads, bmap, loop_doms(inner_loops), ana)
            regions_w += relax_region(r.block.writes, bmap, loop_doms(inner_loops), ana)
            edit = StmtEditor().add(r, lambda _, n=new_r: n)
            for lp in inner_loops:
                edit.add(
                    lp,
                    lambda n: dataclasses.replace(
                        n, min=substitute(n.min, vmap), extent=substitute(n.extent, vmap)
                    ),
                )
            new_kids.append(edit.run(stmt))
        name = unique_block_name(
            self.state,
            fname,
            "outer_" + "_".join(names[positions.index(p)] for p in sorted(positions)),
        )
        body = new_kids[0] if len(new_kids) == 1 else SeqStmt(tuple(new_kids))
        outer_block = Block(
            iter_vars=tuple(outer_ivs),
            reads=tuple(clamp_region(x, ana) for x in union_regions(regions_r, ana)),
            writes=tuple(clamp_region(x, ana) for x in union_regions(regions_w, ana)),
            name_hint=name,
            body=body,
        )
        new = BlockRealize(
            tuple(lp.loop_var for lp in outer_loops if lp.loop_var in vmap),
            const(True),
            outer_block,
        )
        start = order[0]
        children = kids[:start] + [new] + kids[start + len(order) :]
        self.state.replace(fname, {parent: with_children(parent, children)})
        return self._new_block_rv(fname, name)


def _loop_bounds(stmt: Stmt) -> list[PrimExpr]:
    out: list[PrimExpr] = []
    while isinstance(stmt, For):
        out += [stmt.min, stmt.extent]
        stmt = stmt.body
    return out


register_inst_kind(
    InstructionKind("Blockize", "blockize", inputs=("target[]",), attrs=("preserve_unit_iters",))
)

__all__ = ["BlockizeMixin", "divide_bindings"]
