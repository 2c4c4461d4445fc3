"""``PerStoreFeature``: one feature vector per ``BufferStore`` of the lowered program.

In the spirit of Ansor's features (our own formulation). Each candidate's module is
lowered (:func:`metaschedule.tir.transform.lower`: blocks become loops, allocations
are placed and compacted) and walked once. Every ``BufferStore`` gives one row; the
counts are computed symbolically from loop extents and index coefficients, never by
enumerating iterations, so a matmul-sized program takes a few milliseconds.

Slots (see :func:`feature_names` for the exact list). Counts are ``log2(1 + x)``;
one-hot slots are 0/1; the arithmetic-intensity curve is a plain ratio.

Group 1 (57): per-iteration op counts times the trip count of the loops above the
  store: ``float_{mad,addsub,mul,divmod,cmp,math_func,other_func}``, the same seven for
  ``int_``, ``bool_op``, ``select_op`` (a ``x*y + z`` counts one mad; min/max count as
  cmp; index arithmetic counts as int ops). For each of ``vec``/``unroll``/``parallel``
  over the enclosing loops of that kind: ``num`` (how many), ``prod`` (product of
  extents), ``len`` (innermost one's extent) and the position one-hot
  ``pos_{none,inner_spatial,middle_spatial,outer_spatial,inner_reduce,middle_reduce,
  outer_reduce,mixed}`` (spatial: the loop variable indexes the stored element;
  inner/outer: innermost/outermost loop above the store). GPU: ``is_gpu`` and the
  extents bound to ``blockIdx.{x,y,z}``, ``threadIdx.{x,y,z}`` and ``vthread``.
Group 2 (18 per buffer, ``buffers_per_store`` buffers sorted by bytes, zero padded):
  ``acc_type_{read,write,rw}``; ``bytes`` (all accesses over the loop nest),
  ``unique_bytes`` (footprint), ``lines`` (cache-line fetches when consecutive
  iterations of the innermost loop that moves the address share lines),
  ``unique_lines``; ``reuse_type_{loop_multiple_read,serial_multiple_read_write,
  no_reuse}`` (loop reuse: some loop above the store does not move the address, the
  innermost such loop is the reuse loop; serial reuse: the buffer is accessed more than
  once within one iteration of the innermost loop); ``reuse_dis_iter`` (iterations
  between reuses), ``reuse_dis_bytes`` (bytes all buffers of the store touch in
  between), ``reuse_ct``; ``{bytes,unique_bytes,lines,unique_lines}_d_reuse_ct``;
  ``stride`` (elements the flat address moves per iteration of the innermost loop that
  moves it).
Group 3 (``arith_intensity_curve_num_samples``): float ops over bytes touched, sampled
  evenly in ``log2(ops)`` as the loop nest is swept from the innermost loop outwards.
Group 4 (4): if the stored buffer is allocated inside the function: ``alloc_size``
  (bytes), ``alloc_prod`` (size times the trip count outside the allocation),
  ``alloc_outer_prod``, ``alloc_inner_prod`` (trip count inside it).
Group 5 (3): ``outer_prod`` (total trip count), ``num_loops``, ``auto_unroll_max_step``.
Group 6 (18, only with ``extract_workload``): op counts of the unscheduled workload
  (``context.mod``), its number of stores and parameter bytes; the same for every row.

Footprints are exact for affine indices with constant extents and approximate
otherwise (floordiv scales a coefficient, floormod caps a width; other non-affine
terms count as unit coefficients). A store under ``if v == c`` (the lowered form of a
reduction's init) counts loop ``v`` as one iteration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..registry import register
from ..tir import expr as E
from ..tir.dtype import is_float, nbytes
from ..tir.function import IRModule, PrimFunc
from ..tir.op import BINARY_INTRINSICS, UNARY_INTRINSICS
from ..tir.stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    SeqStmt,
    Stmt,
)
from ..tir.transform import lower
from ..tir.transform.affine import affine
from .base import FeatureExtractor

if TYPE_CHECKING:
    from ..search_strategy import MeasureCandidate

__all__ = ["PerStoreFeature", "feature_names"]

_OP_KINDS = ("mad", "addsub", "mul", "divmod", "cmp", "math_func", "other_func")
_OP_NAMES = (
    [f"float_{k}" for k in _OP_KINDS] + [f"int_{k}" for k in _OP_KINDS] + ["bool_op", "select_op"]
)
_POS = ("none", "inner_spatial", "middle_spatial", "outer_spatial", "inner_reduce",
        "middle_reduce", "outer_reduce", "mixed")
_ANN_KINDS = (("vec", ForKind.VECTORIZED), ("unroll", ForKind.UNROLLED),
              ("parallel", ForKind.PARALLEL))
_GPU_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
             "threadIdx.z", "vthread")
_BUF_NAMES = (
    "acc_type_read", "acc_type_write", "acc_type_rw", "bytes", "unique_bytes", "lines",
    "unique_lines", "reuse_type_loop_multiple_read", "reuse_type_serial_multiple_read_write",
    "reuse_type_no_reuse", "reuse_dis_iter", "reuse_dis_bytes", "reuse_ct",
    "bytes_d_reuse_ct", "unique_bytes_d_reuse_ct", "lines_d_reuse_ct",
    "unique_lines_d_reuse_ct", "stride",
)
_ALLOC_NAMES = ("alloc_size", "alloc_prod", "alloc_outer_prod", "alloc_inner_prod")
_OUTER_NAMES = ("outer_prod", "num_loops", "auto_unroll_max_step")
_WORKLOAD_NAMES = tuple(f"workload_{n}" for n in _OP_NAMES) + (
    "workload_num_stores", "workload_param_bytes")
_MATH_OPS = frozenset(UNARY_INTRINSICS) | frozenset(BINARY_INTRINSICS)
_UNROLL_KEYS = ("pragma_auto_unroll_max_step", "meta_schedule.unroll_explicit",
                "meta_schedule.unroll_implicit")


def feature_names(buffers_per_store: int = 5, arith_intensity_curve_num_samples: int = 10,
                  extract_workload: bool = False) -> list[str]:
    """The name of every slot of a feature vector, in order."""
    names = list(_OP_NAMES)
    for prefix, _ in _ANN_KINDS:
        names += [f"{prefix}_num", f"{prefix}_prod", f"{prefix}_len"]
        names += [f"{prefix}_pos_{p}" for p in _POS]
    names += ["is_gpu"] + [f"{t}_len" for t in _GPU_TAGS]
    for b in range(buffers_per_store):
        names += [f"B{b}.{n}" for n in _BUF_NAMES]
    names += [f"arith_intensity_curve_{i}" for i in range(arith_intensity_curve_num_samples)]
    names += list(_ALLOC_NAMES) + list(_OUTER_NAMES)
    if extract_workload:
        names += list(_WORKLOAD_NAMES)
    return names


def _slog(x: float) -> float:
    return math.log2(1.0 + x) if x > 0 else 0.0


# ----------------------------------------------------------------------------- op counting


def _count(e: E.PrimExpr, counts: list[float], loads: list[E.BufferLoad]) -> None:
    """Add ``e``'s operations to ``counts`` (indexed as _OP_NAMES); collect its loads."""
    t = type(e)
    if t is E.Var or t is E.IntImm or t is E.FloatImm or t is E.StringImm:
        return
    if t is E.BufferLoad:
        loads.append(e)
        for i in e.indices:
            _count(i, counts, loads)
        return
    base = 0 if is_float(e.dtype) else 7
    if t is E.Add or t is E.Sub:
        for mul, other in ((e.a, e.b), (e.b, e.a)):
            if type(mul) is E.Mul:
                counts[base] += 1  # mad
                _count(mul.a, counts, loads)
                _count(mul.b, counts, loads)
                _count(other, counts, loads)
                return
        counts[base + 1] += 1
    elif t is E.Mul:
        counts[base + 2] += 1
    elif t is E.Div or t is E.FloorDiv or t is E.FloorMod:
        counts[base + 3] += 1
    elif isinstance(e, E.CmpOp) or t is E.Min or t is E.Max:
        counts[(0 if is_float(e.a.dtype) else 7) + 4] += 1
    elif t is E.And or t is E.Or or t is E.Not:
        counts[14] += 1
    elif t is E.Select:
        counts[15] += 1
        for x in (e.condition, e.true_value, e.false_value):
            _count(x, counts, loads)
        return
    elif t is E.Call:
        counts[base + (5 if e.op in _MATH_OPS else 6)] += 1
        for x in e.args:
            _count(x, counts, loads)
        return
    if t is E.Cast:
        _count(e.value, counts, loads)
    elif t is E.Not:
        _count(e.a, counts, loads)
    elif isinstance(e, E.BinaryOp):
        _count(e.a, counts, loads)
        _count(e.b, counts, loads)


# ----------------------------------------------------------------------------- index forms


@dataclass
class _Lin:
    """An index approximated as ``const + sum plain[j]*v_j + sum min(cap, capped term)``."""

    plain: dict[int, float]
    capped: list[tuple[dict[int, float], float]]
    const: float

    def loops(self) -> set[int]:
        out = set(self.plain)
        for coefs, _ in self.capped:
            out.update(coefs)
        return out

    def coef(self, j: int) -> float:
        return self.plain.get(j, 0.0) + sum(c.get(j, 0.0) for c, _ in self.capped)


def _scaled(lin: _Lin, s: float) -> _Lin:
    return _Lin({j: c * s for j, c in lin.plain.items()},
                [({j: c * s for j, c in co.items()}, cap * abs(s)) for co, cap in lin.capped],
                lin.const * s)


def _added(a: _Lin, b: _Lin) -> _Lin:
    plain = dict(a.plain)
    for j, c in b.plain.items():
        plain[j] = plain.get(j, 0.0) + c
    return _Lin(plain, a.capped + b.capped, a.const + b.const)


def _lin(e: E.PrimExpr, pos: dict[E.Var, int]) -> _Lin:
    """Approximate the integer index ``e`` as a linear form of loop positions."""
    t = type(e)
    if t is E.IntImm:
        return _Lin({}, [], float(e.value))
    if t is E.Var:
        j = pos.get(e)
        return _Lin({} if j is None else {j: 1.0}, [], 0.0)
    if t is E.Cast:
        return _lin(e.value, pos)
    if t is E.Add:
        return _added(_lin(e.a, pos), _lin(e.b, pos))
    if t is E.Sub:
        return _added(_lin(e.a, pos), _scaled(_lin(e.b, pos), -1.0))
    if t is E.Mul:
        a, b = _lin(e.a, pos), _lin(e.b, pos)
        if not b.loops():
            return _scaled(a, b.const)
        if not a.loops():
            return _scaled(b, a.const)
    if (t is E.FloorDiv or t is E.Div) and type(e.b) is E.IntImm and e.b.value > 0:
        a = _scaled(_lin(e.a, pos), 1.0 / e.b.value)
        a.const = math.floor(a.const)
        return a
    if t is E.FloorMod and type(e.b) is E.IntImm and e.b.value > 0:
        a = _lin(e.a, pos)
        coefs = {j: a.coef(j) for j in a.loops()}
        if not coefs:
            return _Lin({}, [], a.const % e.b.value)
        return _Lin({}, [(coefs, float(e.b.value - 1))], 0.0)
    # anything else (min/max/select/indirect loads): unit coefficient per loop inside
    return _Lin({pos[v]: 1.0 for v in _vars_of(e) if v in pos}, [], 0.0)


def _vars_of(e: E.PrimExpr) -> list[E.Var]:
    out: list[E.Var] = []
    stack = [e]
    while stack:
        x = stack.pop()
        if type(x) is E.Var:
            out.append(x)
        elif isinstance(x, E.BufferLoad):
            stack.extend(x.indices)
        elif isinstance(x, E.BinaryOp):
            stack += [x.a, x.b]
        elif isinstance(x, (E.Cast,)):
            stack.append(x.value)
        elif isinstance(x, E.Not):
            stack.append(x.a)
        elif isinstance(x, E.Select):
            stack += [x.condition, x.true_value, x.false_value]
        elif isinstance(x, E.Call):
            stack.extend(x.args)
    return out


# ----------------------------------------------------------------------------- the walk


@dataclass(frozen=True)
class _Loop:
    var: E.Var
    extent: int
    kind: ForKind
    thread: str | None
    unroll_step: int
    node: For


@dataclass
class _Store:
    store: BufferStore
    loops: tuple[_Loop, ...]
    extents: tuple[int, ...]  # effective extents (pinned loops count 1)
    allocs: dict[Any, int]  # buffer -> number of loops outside its Allocate


def _const_int(e: Any, default: int = 1) -> int:
    if isinstance(e, int):
        return e
    if isinstance(e, E.IntImm):
        return e.value
    return default


def _pins(cond: E.PrimExpr, loops: dict[E.Var, _Loop]) -> set[E.Var]:
    """Loop variables fixed to one value by ``cond``.

    Understood: conjunctions of ``v == c``, and ``sum(coef * v) == 0`` with positive
    coefficients over loops starting at 0 (the lowered init of a split reduction).
    """
    if isinstance(cond, E.And):
        return _pins(cond.a, loops) | _pins(cond.b, loops)
    if not isinstance(cond, E.EQ):
        return set()
    for v, c in ((cond.a, cond.b), (cond.b, cond.a)):
        if type(c) is not E.IntImm:
            continue
        if type(v) is E.Var:
            return {v} if v in loops else set()
        if c.value == 0:
            form = affine(v)
            atoms = [(coef, atom) for coef, atom in form.terms.values()]
            if form.const == 0 and atoms and all(
                    coef > 0 and type(atom) is E.Var and atom in loops
                    and _const_int(loops[atom].node.min, -1) == 0 for coef, atom in atoms):
                return {atom for _, atom in atoms}
    return set()


class _Walker:
    def __init__(self) -> None:
        self.loops: list[_Loop] = []
        self.pinned: list[E.Var] = []
        self.allocs: dict[Any, int] = {}
        self.stores: list[_Store] = []

    def walk(self, s: Stmt) -> None:
        t = type(s)
        if t is For:
            ann = s.annotations
            step = max((_const_int(ann.get(k), 0) for k in _UNROLL_KEYS), default=0)
            self.loops.append(_Loop(s.loop_var, max(1, _const_int(s.extent)), s.kind,
                                    s.thread_binding, step, s))
            self.walk(s.body)
            self.loops.pop()
        elif t is SeqStmt:
            for x in s.seq:
                self.walk(x)
        elif t is BufferStore:
            pinned = set(self.pinned)
            ext = tuple(1 if lp.var in pinned else lp.extent for lp in self.loops)
            self.stores.append(_Store(s, tuple(self.loops), ext, dict(self.allocs)))
        elif t is IfThenElse:
            pins = _pins(s.condition, {lp.var: lp for lp in self.loops})
            self.pinned.extend(pins)
            self.walk(s.then_case)
            del self.pinned[len(self.pinned) - len(pins):]
            if s.else_case is not None:
                self.walk(s.else_case)
        elif t is Allocate:
            self.allocs[s.buffer] = len(self.loops)
            self.walk(s.body)
            del self.allocs[s.buffer]
        elif t is BlockRealize:
            self.walk(s.block.body)
        elif t is Block:
            self.walk(s.body)


def _unroll_of_blocks(s: Stmt) -> int:
    """The largest unroll annotation on the blocks of an unlowered body."""
    best = 0
    stack = [s]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is BlockRealize:
            x = x.block
            t = Block
        if t is Block:
            best = max([best] + [_const_int(x.annotations.get(k), 0) for k in _UNROLL_KEYS])
            stack.append(x.body)
            if x.init is not None:
                stack.append(x.init)
        elif t is For or t is Allocate:
            stack.append(x.body)
        elif t is SeqStmt:
            stack.extend(x.seq)
        elif t is IfThenElse:
            stack.append(x.then_case)
            if x.else_case is not None:
                stack.append(x.else_case)
    return best


# ----------------------------------------------------------------------------- buffers


class _BufferStats:
    """Footprints and cache-line counts of one buffer's accesses in one store."""

    def __init__(self, buffer: Any, lins: list[list[_Lin]], reads: int, writes: int,
                 extents: tuple[int, ...], cache_line: int):
        self.buffer = buffer
        self.reads, self.writes = reads, writes
        self.elem = nbytes(buffer.dtype)
        n = len(extents)
        shape = [_const_int(s, 0) for s in buffer.shape]
        numel = math.prod(shape) if all(shape) else math.inf
        row = [1] * len(shape)
        for d in range(len(shape) - 2, -1, -1):
            row[d] = row[d + 1] * max(1, shape[d + 1])
        self.touched = {j for acc in lins for lin in acc for j in lin.loops() if lin.coef(j)}
        flat = [0.0] * n
        for acc in lins[:1]:
            for d, lin in enumerate(acc):
                for j in lin.loops():
                    flat[j] += row[d] * lin.coef(j)
        self.stride, self.stride_loop = 0.0, -1
        for j in range(n - 1, -1, -1):
            if extents[j] > 1 and flat[j] != 0:
                self.stride, self.stride_loop = abs(flat[j]), j
                break
        groups: dict[tuple, list[list[_Lin]]] = {}
        for acc in lins:
            groups.setdefault(tuple(_signature(lin) for lin in acc), []).append(acc)
        # footprint[k]: distinct elements while loops k..n-1 sweep (outer ones fixed)
        self.footprint = [0.0] * (n + 1)
        self.unique_lines = 0.0
        for accs in groups.values():
            fp, ulines = _group_footprint(accs, extents, shape, self.elem, cache_line)
            for k in range(n + 1):
                self.footprint[k] += fp[k]
            self.unique_lines += ulines
        self.footprint = [min(f, numel) for f in self.footprint]
        self.unique_lines = min(self.unique_lines, max(1.0, numel * self.elem / cache_line))
        accesses = reads + writes
        total = math.prod(extents)
        self.bytes = float(total * accesses * self.elem)
        if self.stride_loop < 0:
            self.lines = float(accesses)
        else:
            e = extents[self.stride_loop]
            step = self.stride * self.elem
            per_sweep = min(e, math.ceil(e * step / cache_line)) if step < cache_line else e
            self.lines = float(accesses * math.prod(extents[: self.stride_loop]) * per_sweep)


def _signature(lin: _Lin) -> tuple:
    return (tuple(sorted(lin.plain.items())),
            tuple((tuple(sorted(c.items())), cap) for c, cap in lin.capped))


def _group_footprint(accs: list[list[_Lin]], extents: tuple[int, ...], shape: list[int],
                     elem: int, cache_line: int) -> tuple[list[float], float]:
    """Footprint per level of accesses that differ only by constant offsets; unique lines."""
    n = len(extents)
    first = accs[0]
    ndim = len(first)
    spread = [max(a[d].const for a in accs) - min(a[d].const for a in accs) for d in range(ndim)]
    n_consts = [len({a[d].const for a in accs}) for d in range(ndim)]
    plain_sum = [0.0] * ndim
    capped_sums = [[0.0] * len(first[d].capped) for d in range(ndim)]
    prods = [1.0] * ndim
    loops = [first[d].loops() for d in range(ndim)]
    fp = [0.0] * (n + 1)
    widths = [1.0] * ndim
    distinct = [1.0] * ndim
    for k in range(n, -1, -1):
        if k < n and extents[k] > 1:
            span = extents[k] - 1
            for d in range(ndim):
                lin = first[d]
                c = lin.plain.get(k)
                if c:
                    plain_sum[d] += abs(c) * span
                for i, (coefs, _) in enumerate(lin.capped):
                    c = coefs.get(k)
                    if c:
                        capped_sums[d][i] += abs(c) * span
                if k in loops[d]:
                    prods[d] *= extents[k]
        total = 1.0
        for d in range(ndim):
            w = 1.0 + spread[d] + plain_sum[d] + sum(
                min(cap, s) for (_, cap), s in zip(first[d].capped, capped_sums[d]))
            dist = min(w, prods[d] * n_consts[d])
            if shape[d]:
                dist = min(dist, shape[d])
            widths[d], distinct[d] = w, max(1.0, dist)
            total *= distinct[d]
        fp[k] = total
    if ndim == 0:
        return fp, 1.0
    last = ndim - 1
    rows = fp[0] / distinct[last]
    if shape[last] and widths[last] >= shape[last]:
        ulines = math.ceil(fp[0] * elem / cache_line)
    else:
        ulines = rows * min(distinct[last], math.ceil(widths[last] * elem / cache_line))
    return fp, max(1.0, ulines)


# ----------------------------------------------------------------------------- one store


def _position(j: int, n: int, spatial: bool) -> int:
    if j == n - 1:
        where = 0
    elif j == 0:
        where = 2
    else:
        where = 1
    return 1 + where + (0 if spatial else 3)


class _StoreFeatures:
    """Computes the row of one store; ``serial`` counts accesses per (loop body, buffer)."""

    def __init__(self, extractor: PerStoreFeature, is_gpu: bool, func_unroll: int):
        self.x = extractor
        self.is_gpu = is_gpu
        self.func_unroll = func_unroll

    def row(self, st: _Store, serial: dict[tuple[int, Any], int],
            ops: list[float], loads: list[E.BufferLoad]) -> np.ndarray:
        x = self.x
        out = np.zeros(x.feature_vector_length, dtype=np.float32)
        ext = st.extents
        n = len(ext)
        total = float(math.prod(ext))
        pos = {lp.var: j for j, lp in enumerate(st.loops)}
        store_lin = [_lin(i, pos) for i in st.store.indices]
        stats = self._buffers(st, loads, store_lin, pos)
        # group 1: op counts, annotations, gpu
        out[0:16] = [_slog(c * total) for c in ops]
        store_loops = {j for lin in store_lin for j in lin.loops() if lin.coef(j)}
        i = 16
        for _, kind in _ANN_KINDS:
            js = [j for j, lp in enumerate(st.loops) if lp.kind is kind]
            if js:
                exts = [st.loops[j].extent for j in js]
                out[i:i + 3] = [_slog(len(js)), _slog(math.prod(exts)), _slog(exts[-1])]
                p = {_position(j, n, j in store_loops) for j in js}
                out[i + 3 + (p.pop() if len(p) == 1 else 7)] = 1.0
            else:
                out[i + 3] = 1.0
            i += 11
        out[i] = float(self.is_gpu)
        bound: dict[str, int] = {}
        for lp in st.loops:
            if lp.kind is ForKind.THREAD_BINDING and lp.thread:
                tag = "vthread" if lp.thread.startswith("vthread") else lp.thread
                bound[tag] = bound.get(tag, 1) * lp.extent
        for t, tag in enumerate(_GPU_TAGS):
            out[i + 1 + t] = _slog(bound.get(tag, 0))
        i += 8
        # group 2: buffers, most bytes first
        stats.sort(key=lambda s: (-s.bytes, s.buffer.name))
        body_key = id(st.loops[-1].node) if st.loops else 0
        for s in stats[: x.buffers_per_store]:
            out[i:i + 18] = self._buffer_row(s, stats, ext, serial.get((body_key, s.buffer), 0))
            i += 18
        i = 57 + 18 * x.buffers_per_store
        # group 3: arithmetic intensity curve
        flops = sum(ops[0:7]) + ops[0] or sum(ops[7:14]) + ops[7]
        out[i:i + x.arith_intensity_curve_num_samples] = self._curve(flops, stats, ext)
        i += x.arith_intensity_curve_num_samples
        # group 4: allocation of the stored buffer
        buf = st.store.buffer
        if buf in st.allocs:
            shape = [_const_int(d, 0) for d in buf.shape]
            size = float(math.prod(shape) * nbytes(buf.dtype))
            outer = float(math.prod(ext[: st.allocs[buf]]))
            out[i:i + 4] = [_slog(size), _slog(size * outer), _slog(outer), _slog(total / outer)]
        i += 4
        # group 5: the loop nest
        unroll = max([self.func_unroll] + [lp.unroll_step for lp in st.loops])
        out[i:i + 3] = [_slog(total), _slog(n), _slog(unroll)]
        return out

    def _buffers(self, st: _Store, loads: list[E.BufferLoad], store_lin: list[_Lin],
                 pos: dict[E.Var, int]) -> list[_BufferStats]:
        per: dict[Any, list] = {}  # buffer -> [lins, reads, writes]
        per[st.store.buffer] = [[store_lin], 0, 1]
        for ld in loads:
            entry = per.setdefault(ld.buffer, [[], 0, 0])
            entry[0].append([_lin(i, pos) for i in ld.indices])
            entry[1] += 1
        return [_BufferStats(b, lins, r, w, st.extents, self.x.cache_line_bytes)
                for b, (lins, r, w) in per.items()]

    @staticmethod
    def _buffer_row(s: _BufferStats, stats: list[_BufferStats], ext: tuple[int, ...],
                    serial_count: int) -> list[float]:
        acc = [0.0, 0.0, 0.0]
        acc[2 if s.reads and s.writes else (0 if s.reads else 1)] = 1.0
        reuse = [0.0, 0.0, 0.0]
        dis_iter = dis_bytes = count = 0.0
        loop = next((j for j in range(len(ext) - 1, -1, -1)
                     if ext[j] > 1 and j not in s.touched), None)
        if loop is not None:
            reuse[0] = 1.0
            count = float(ext[loop])
            dis_iter = float(math.prod(ext[loop + 1:]))
            dis_bytes = sum(t.footprint[loop + 1] * t.elem for t in stats)
        elif serial_count > 1:
            reuse[1] = 1.0
            count = float(serial_count - 1)
            dis_iter = 1.0
            dis_bytes = sum((t.reads + t.writes) * t.elem for t in stats)
        else:
            reuse[2] = 1.0
        unique_bytes = s.footprint[0] * s.elem
        div = max(count, 1.0)
        return acc + [_slog(s.bytes), _slog(unique_bytes), _slog(s.lines),
                      _slog(s.unique_lines)] + reuse + [
            _slog(dis_iter), _slog(dis_bytes), _slog(count), _slog(s.bytes / div),
            _slog(unique_bytes / div), _slog(s.lines / div), _slog(s.unique_lines / div),
            _slog(s.stride)]

    def _curve(self, flops: float, stats: list[_BufferStats], ext: tuple[int, ...]) -> list[float]:
        samples = self.x.arith_intensity_curve_num_samples
        if flops <= 0 or samples <= 0:
            return [0.0] * samples
        n = len(ext)
        xs, ys = [], []
        ops = flops
        for k in range(n, -1, -1):  # innermost body first, then one more loop each step
            if k < n:
                ops *= ext[k]
            mem = sum(t.footprint[k] * t.elem for t in stats)
            xs.append(math.log2(1.0 + ops))
            ys.append(ops / mem if mem else 0.0)
        out = []
        for s in range(samples):
            target = xs[-1] * (s + 1) / samples
            idx = next(i for i, v in enumerate(xs) if v >= target - 1e-9)
            if idx == 0 or xs[idx] == xs[idx - 1]:
                out.append(ys[idx])
            else:
                t = (target - xs[idx - 1]) / (xs[idx] - xs[idx - 1])
                out.append(ys[idx - 1] + t * (ys[idx] - ys[idx - 1]))
        return out


# ----------------------------------------------------------------------------- the extractor


@register("feature_extractor", "per-store-feature")
class PerStoreFeature(FeatureExtractor):
    """One feature vector per ``BufferStore`` of each lowered candidate (see the module doc).

    Args:
        buffers_per_store: buffers described per store; more are dropped (fewest bytes
            first), fewer are zero padded.
        arith_intensity_curve_num_samples: samples of the arithmetic-intensity curve.
        cache_line_bytes: cache line size used for the line counts.
        extract_workload: append features of the unscheduled workload (``context.mod``).
    """

    def __init__(self, buffers_per_store: int = 5, arith_intensity_curve_num_samples: int = 10,
                 cache_line_bytes: int = 64, extract_workload: bool = False) -> None:
        for name, value, low in (("buffers_per_store", buffers_per_store, 0),
                                 ("arith_intensity_curve_num_samples",
                                  arith_intensity_curve_num_samples, 0),
                                 ("cache_line_bytes", cache_line_bytes, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"PerStoreFeature: {name} must be an int >= {low}, got {value!r}")
        self.buffers_per_store = buffers_per_store
        self.arith_intensity_curve_num_samples = arith_intensity_curve_num_samples
        self.cache_line_bytes = cache_line_bytes
        self.extract_workload = bool(extract_workload)
        self.feature_names = feature_names(buffers_per_store, arith_intensity_curve_num_samples,
                                           self.extract_workload)
        self._workload_cache: tuple[Any, np.ndarray] | None = None

    @property
    def feature_vector_length(self) -> int:
        """Length of the feature vector."""
        return len(self.feature_names)

    def extract_from(self, context: Any, candidates: list[MeasureCandidate]) -> list[np.ndarray]:
        """One float32 array ``[num_stores, feature_vector_length]`` per candidate."""
        is_gpu = _is_gpu_target(getattr(context, "target", None))
        workload = self._workload_features(context) if self.extract_workload else None
        return [self.extract_mod(c.sch.mod, is_gpu=is_gpu, workload=workload)
                for c in candidates]

    def extract_mod(self, mod: IRModule | PrimFunc, *, is_gpu: bool = False,
                    workload: np.ndarray | None = None) -> np.ndarray:
        """Features of every store of every function of ``mod`` (scheduled, not lowered)."""
        funcs = [mod] if isinstance(mod, PrimFunc) else list(mod.functions.values())
        rows: list[np.ndarray] = []
        for func in funcs:
            lowered = lower(func)
            walker = _Walker()
            walker.walk(lowered.body)
            gpu = is_gpu or any(lp.kind is ForKind.THREAD_BINDING
                                for st in walker.stores for lp in st.loops)
            maker = _StoreFeatures(self, gpu, _unroll_of_blocks(func.body))
            counted = [_count_store(st) for st in walker.stores]
            serial: dict[tuple[int, Any], int] = {}
            for st, (_, loads) in zip(walker.stores, counted):
                key = id(st.loops[-1].node) if st.loops else 0
                for b in [st.store.buffer] + [ld.buffer for ld in loads]:
                    serial[(key, b)] = serial.get((key, b), 0) + 1
            rows += [maker.row(st, serial, ops, loads)
                     for st, (ops, loads) in zip(walker.stores, counted)]
        out = (np.stack(rows) if rows
               else np.zeros((0, self.feature_vector_length), dtype=np.float32))
        if workload is not None and len(out):
            out[:, -len(workload):] = workload
        return out

    def _workload_features(self, context: Any) -> np.ndarray:
        mod = getattr(context, "mod", None)
        if mod is None:
            raise ValueError(
                "PerStoreFeature(extract_workload=True) needs context.mod (the workload); "
                f"got a context without one: {context!r}")
        if self._workload_cache is not None and self._workload_cache[0] is mod:
            return self._workload_cache[1]
        funcs = [mod] if isinstance(mod, PrimFunc) else list(mod.functions.values())
        ops = [0.0] * 16
        num_stores = 0
        param_bytes = 0.0
        for func in funcs:
            walker = _Walker()
            walker.walk(lower(func).body)
            for st in walker.stores:
                counts, _ = _count_store(st)
                total = math.prod(st.extents)
                ops = [a + b * total for a, b in zip(ops, counts)]
            num_stores += len(walker.stores)
            for p in func.params:
                shape = [_const_int(d, 0) for d in p.shape]
                param_bytes += math.prod(shape) * nbytes(p.dtype)
        vec = np.array([_slog(v) for v in ops] + [_slog(num_stores), _slog(param_bytes)],
                       dtype=np.float32)
        self._workload_cache = (mod, vec)
        return vec


def _count_store(st: _Store) -> tuple[list[float], list[E.BufferLoad]]:
    ops = [0.0] * 16
    loads: list[E.BufferLoad] = []
    _count(st.store.value, ops, loads)
    for idx in st.store.indices:
        _count(idx, ops, loads)
    return ops, loads


def _is_gpu_target(target: Any) -> bool:
    if target is None:
        return False
    kind = getattr(target, "kind", target)
    return isinstance(kind, str) and kind.split()[0] in ("cuda", "nvidia", "gpu")
