"""Matching a block's subtree against a tensor intrinsic's description, and binding the
intrinsic's buffers to the regions the block accesses (for :mod:`.tensorize`).

Both sides must be a loop nest around one block (loops of extent 1 are ignored). Loops
pair up in order and must have equal extents and feed iterators of the same kinds
(spatial or reduction). With every iterator replaced by its binding, the two blocks'
bodies must be the same computation up to renaming: the same operators, dtypes and
constants, each buffer of the description standing for one buffer of the block. An
access ``B[i, k]`` of the description and ``Bt[v_j_o * 16 + j_1, v_k_o * 4 + k_1]`` of
the block bind ``B`` to the region of ``Bt`` at ``base = (v_j_o * 16, v_k_o * 4)``: each
non-unit axis of ``B`` maps to the axis of ``Bt`` whose index moves with the loops the
same way (so a transposed access maps its axes crosswise), and the other axes of ``Bt``
stay at ``base``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...tir import (
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    For,
    IterType,
    PrimFunc,
    Range,
)
from ...tir import expr as E
from ...tir.arith import Analyzer
from ...tir.expr import IntImm, PrimExpr, const
from ...tir.functor import collect_vars, substitute
from ..error import TensorizeError

__all__ = ["BoundBuffer", "match_description"]


@dataclass(frozen=True)
class BoundBuffer:
    """A parameter of the intrinsic bound to a region of one of the function's buffers.

    Attributes:
        param: the parameter (of the description; the implementation's has its position).
        buffer: the function's buffer.
        base: the region's origin, one index per axis of ``buffer``.
        axes: for each axis of ``param``, the axis of ``buffer`` it runs along (None for
            an axis of extent 1).
    """

    param: Buffer
    buffer: Buffer
    base: tuple[PrimExpr, ...]
    axes: tuple[int | None, ...]

    def index(self, indices: tuple[PrimExpr, ...], ana: Analyzer) -> tuple[PrimExpr, ...]:
        """The element of ``buffer`` that ``param[indices]`` stands for."""
        out = list(self.base)
        for idx, t in zip(indices, self.axes):
            if t is not None:
                out[t] = ana.simplify(out[t] + idx)
        return tuple(out)

    def stride(self, axis: int) -> PrimExpr:
        """The distance in ``buffer`` between consecutive elements of ``param`` along
        ``axis`` (row-major)."""
        t = self.axes[axis]
        if t is None:
            return const(compact_stride(self.param, axis))
        shape = self.buffer.shape[t + 1 :]
        if all(isinstance(s, IntImm) for s in shape):
            return const(math.prod(s.value for s in shape))
        out: PrimExpr = const(1)
        for s in shape:
            out = out * s
        return out

    def region(self, region: tuple[Range, ...], ana: Analyzer) -> BufferRegion:
        """The part of ``buffer`` that ``param[region]`` stands for."""
        ranges = [Range(b, const(1, b.dtype)) for b in self.base]
        for r, t in zip(region, self.axes):
            if t is not None:
                ranges[t] = Range(ana.simplify(self.base[t] + r.min), r.extent)
        return BufferRegion(self.buffer, tuple(ranges))


def compact_stride(buffer: Buffer, axis: int) -> int:
    return math.prod(buffer.static_shape()[axis + 1 :])


def description_body(func: PrimFunc):
    """The statement under a PrimFunc's root block(s) without iterators."""
    body = func.body
    while isinstance(body, BlockRealize) and not body.block.iter_vars:
        body = body.block.body
    return body


# ----------------------------------------------------------------------------- matching


def match_description(name: str, desc: PrimFunc, block: Block, ana: Analyzer) -> list[BoundBuffer]:
    """Bind each parameter of ``desc`` to a region of the buffers ``block`` accesses.

    Raises:
        TensorizeError: naming the part of ``block`` that differs from the description.
    """
    where = f"block {block.name_hint!r}"
    d_loops, d_real = _nest(description_body(desc), f"the description of {name}")
    t_loops, t_real = _nest(block.body, where)
    if block.init is not None:
        raise TensorizeError(
            f"tensorize {name}: {where} has an init statement; the intrinsic only "
            "accumulates: decompose_reduction first"
        )
    d_map, d_pairs = _loop_map(d_loops)
    t_map, t_pairs = _loop_map(t_loops)
    if [e for _, e in d_pairs] != [e for _, e in t_pairs]:
        raise TensorizeError(
            f"tensorize {name}: the loops under {where} are ({_show(t_pairs)}), the "
            f"intrinsic's are ({_show(d_pairs)}); split and reorder so that the innermost "
            "loops have the intrinsic's extents, in its order"
        )
    # the description's loops, renamed to the block's
    rename = {
        d.loop_var: ana.simplify(t.loop_var - t.min + d.min)
        for (d, _), (t, _) in zip(d_pairs, t_pairs)
    }
    d_map = {v: substitute(x, rename) for v, x in d_map.items()} | rename
    for lp, _ in t_pairs:
        ana.bind(lp.loop_var, Range(lp.min, lp.extent))
    d_leaf, t_leaf = d_real.block, t_real.block
    if not (isinstance(t_real.predicate, IntImm) and t_real.predicate.value):
        raise TensorizeError(
            f"tensorize {name}: block {t_leaf.name_hint!r} runs under the predicate "
            f"{t_real.predicate} (a partial tile); tile by a divisor of the loop extents"
        )
    if t_leaf.init is not None and d_leaf.init is None:
        raise TensorizeError(
            f"tensorize {name}: block {t_leaf.name_hint!r} has an init statement the "
            "intrinsic does not; decompose_reduction first"
        )
    d_bind = {iv.var: substitute(v, d_map) for iv, v in zip(d_leaf.iter_vars, d_real.iter_values)}
    t_bind = {iv.var: substitute(v, t_map) for iv, v in zip(t_leaf.iter_vars, t_real.iter_values)}
    _check_kinds(name, d_leaf, d_bind, t_leaf, t_bind, t_pairs)
    d_body, t_body = d_leaf.body, t_leaf.body
    if not isinstance(d_body, BufferStore) or not isinstance(t_body, BufferStore):
        raise TensorizeError(
            f"tensorize {name}: block {t_leaf.name_hint!r} must be one buffer store, as the "
            f"intrinsic's is; it is a {type(t_body).__name__}"
        )
    cmp = _Comparer(name, t_leaf.name_hint)
    cmp.store(substitute(d_body, d_bind), substitute(t_body, t_bind))
    zero = {lp.loop_var: lp.min for lp, _ in t_pairs}
    binder = _Binder(name, ana, zero)
    for d_load, t_load in cmp.accesses:
        binder.add(d_load, t_load)
    missing = [p.name for p in desc.params if p not in binder.bound]
    if missing:
        raise TensorizeError(
            f"tensorize {name}: the description never accesses its parameters {missing}"
        )
    return [binder.bound[p] for p in desc.params]


def _nest(stmt, what: str) -> tuple[list[For], BlockRealize]:
    loops = []
    while isinstance(stmt, For):
        loops.append(stmt)
        stmt = stmt.body
    if not isinstance(stmt, BlockRealize):
        names = ", ".join(lp.loop_var.name for lp in loops) or "none"
        raise TensorizeError(
            f"tensorize: {what} must be a loop nest around one block; under the loops "
            f"({names}) there is a {type(stmt).__name__}"
        )
    return loops, stmt


def _loop_map(loops: list[For]) -> tuple[dict[E.Var, PrimExpr], list[tuple[For, int]]]:
    """Unit loops' variables (to their min), and the other loops with their extents."""
    unit: dict[E.Var, PrimExpr] = {}
    pairs = []
    for lp in loops:
        if not isinstance(lp.extent, IntImm) or not isinstance(lp.min, IntImm):
            raise TensorizeError(
                f"tensorize: loop {lp.loop_var.name} has symbolic bounds "
                f"[{lp.min}, {lp.min} + {lp.extent})"
            )
        if lp.extent.value == 1:
            unit[lp.loop_var] = lp.min
        else:
            pairs.append((lp, lp.extent.value))
    return unit, pairs


def _show(pairs) -> str:
    return ", ".join(f"{lp.loop_var.name}: {e}" for lp, e in pairs) or "no loops"


def _kinds(leaf: Block, bind: dict, var: E.Var) -> set[str]:
    return {
        "reduction" if iv.iter_type == IterType.COMM_REDUCE else "spatial"
        for iv in leaf.iter_vars
        if var in collect_vars(bind[iv.var])
    }


def _check_kinds(name, d_leaf, d_bind, t_leaf, t_bind, t_pairs) -> None:
    for lp, _ in t_pairs:
        dk, tk = _kinds(d_leaf, d_bind, lp.loop_var), _kinds(t_leaf, t_bind, lp.loop_var)
        if dk != tk:
            raise TensorizeError(
                f"tensorize {name}: loop {lp.loop_var.name} feeds {_names(tk)} iterators of "
                f"block {t_leaf.name_hint!r} where the intrinsic's loop at its place feeds "
                f"{_names(dk)} ones"
            )


def _names(kinds: set[str]) -> str:
    return " and ".join(sorted(kinds)) or "no"


class _Comparer:
    """Walks the description's and the block's stores side by side, collecting the
    buffer accesses they pair up."""

    def __init__(self, name: str, block: str):
        self.name, self.block = name, block
        self.accesses: list[tuple[E.BufferLoad, E.BufferLoad]] = []

    def fail(self, d, t, what: str) -> TensorizeError:
        return TensorizeError(
            f"tensorize {self.name}: block {self.block!r} computes {t} where the intrinsic "
            f"computes {d} ({what})"
        )

    def store(self, d: BufferStore, t: BufferStore) -> None:
        self.access(E.BufferLoad(d.buffer, d.indices), E.BufferLoad(t.buffer, t.indices), d, t)
        self.expr(d.value, t.value)

    def access(self, d: E.BufferLoad, t: E.BufferLoad, dshow=None, tshow=None) -> None:
        if d.buffer.dtype != t.buffer.dtype:
            raise self.fail(
                dshow or d,
                tshow or t,
                f"{t.buffer.name} is {t.buffer.dtype}, the intrinsic's {d.buffer.name} is "
                f"{d.buffer.dtype}",
            )
        self.accesses.append((d, t))

    def expr(self, d: PrimExpr, t: PrimExpr) -> None:
        if _op_type(d) is not _op_type(t):
            raise self.fail(d, t, f"a {type(t).__name__} where it has a {type(d).__name__}")
        if isinstance(d, E.BufferLoad):
            self.access(d, t)
            return
        if d.dtype != t.dtype:
            raise self.fail(d, t, f"dtype {t.dtype} where it has {d.dtype}")
        if isinstance(d, (E.IntImm, E.FloatImm, E.StringImm)):
            if d.value != t.value:
                raise self.fail(d, t, f"the constant {t.value} where it has {d.value}")
        elif isinstance(d, E.Var):
            if d is not t:
                raise self.fail(d, t, f"the variable {t.name} where it has {d.name}")
        elif isinstance(d, E.BinaryOp):
            self.expr(d.a, t.a)
            self.expr(d.b, t.b)
        elif isinstance(d, E.Cast):
            self.expr(d.value, t.value)
        elif isinstance(d, E.Call):
            if d.op != t.op or len(d.args) != len(t.args):
                raise self.fail(d, t, f"a call of {t.op} where it has {d.op}")
            for a, b in zip(d.args, t.args):
                self.expr(a, b)
        elif isinstance(d, E.Select):
            for a, b in zip(
                (d.condition, d.true_value, d.false_value),
                (t.condition, t.true_value, t.false_value),
            ):
                self.expr(a, b)
        elif isinstance(d, E.Not):
            self.expr(d.a, t.a)
        else:
            raise self.fail(d, t, f"{type(d).__name__} is not supported in a description")


def _op_type(e: PrimExpr) -> type:
    """The node class, with Python's ``==``/``!=`` nodes counted as EQ/NE."""
    return E.EQ if isinstance(e, E.EQ) else E.NE if isinstance(e, E.NE) else type(e)


class _Binder:
    """Turns paired accesses into :class:`BoundBuffer` s, checking that every access of a
    parameter agrees on the buffer, the axes and the origin."""

    def __init__(self, name: str, ana: Analyzer, zero: dict):
        self.name, self.ana, self.zero = name, ana, zero
        self.bound: dict[Buffer, BoundBuffer] = {}

    def fail(self, d: E.BufferLoad, t: E.BufferLoad, what: str) -> TensorizeError:
        return TensorizeError(
            f"tensorize {self.name}: the block accesses {t} where the intrinsic accesses "
            f"{d}: {what}"
        )

    def add(self, d: E.BufferLoad, t: E.BufferLoad) -> None:
        ana = self.ana
        d_var = [ana.simplify(i) for i in d.indices]
        t0 = [ana.simplify(substitute(i, self.zero)) for i in t.indices]
        t_var = [ana.simplify(i - b) for i, b in zip(t.indices, t0)]
        for i, x in enumerate(d_var):
            if not ana.can_prove_equal(substitute(x, self.zero), 0):
                raise self.fail(d, t, f"its index {i} does not start at 0")
        axes: list[int | None] = []
        used: set[int] = set()
        for i, (x, ext) in enumerate(zip(d_var, d.buffer.static_shape())):
            if ext == 1:
                axes.append(None)
                continue
            hit = next(
                (k for k, y in enumerate(t_var) if k not in used and ana.can_prove_equal(x, y)),
                None,
            )
            if hit is None:
                raise self.fail(d, t, f"no index of the block's access moves like index {i} ({x})")
            axes.append(hit)
            used.add(hit)
        for k, y in enumerate(t_var):
            if k not in used and not ana.can_prove_equal(y, 0):
                raise self.fail(
                    d,
                    t,
                    f"the block's index {k} moves with the loops ({y}), the intrinsic's do not",
                )
        new = BoundBuffer(d.buffer, t.buffer, tuple(t0), tuple(axes))
        old = self.bound.get(d.buffer)
        if old is None:
            self.bound[d.buffer] = new
            return
        if old.buffer is not new.buffer:
            raise self.fail(
                d, t, f"{d.buffer.name} stands for both {old.buffer.name} and {new.buffer.name}"
            )
        if old.axes != new.axes or not all(
            ana.can_prove_equal(a, b) for a, b in zip(old.base, new.base)
        ):
            raise self.fail(d, t, f"another access of {d.buffer.name} binds another region")
