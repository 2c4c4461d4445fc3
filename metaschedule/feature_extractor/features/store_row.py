"""One store's feature row, filled group by group through the :class:`Layout`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...tir import expr as E
from ...tir.dtype import nbytes
from ...tir.stmt import ForKind
from .buffers import BufferStats, buffer_row, slog
from .layout import ANN_KINDS, GPU_TAGS, POS, Layout
from .linear import LinearForm
from .loop_nest import Store, const_int

__all__ = ["StoreFeatures", "position"]

_MIXED = POS.index("mixed")


def position(j: int, n: int, spatial: bool) -> int:
    """The ``POS`` index of loop ``j`` of ``n`` (inner/middle/outer, spatial or reduce)."""
    if j == n - 1:
        where = 0
    elif j == 0:
        where = 2
    else:
        where = 1
    return 1 + where + (0 if spatial else 3)


class StoreFeatures:
    """Computes the row of one store; ``serial`` counts accesses per (loop body, buffer)."""

    def __init__(
        self,
        layout: Layout,
        *,
        buffers_per_store: int,
        curve_samples: int,
        cache_line: int,
        is_gpu: bool,
        func_unroll: int,
    ):
        self.layout = layout
        self.buffers_per_store = buffers_per_store
        self.curve_samples = curve_samples
        self.cache_line = cache_line
        self.is_gpu = is_gpu
        self.func_unroll = func_unroll

    def row(
        self,
        st: Store,
        serial: dict[tuple[int, Any], int],
        ops: list[float],
        loads: list[E.BufferLoad],
    ) -> np.ndarray:
        lay = self.layout
        out = np.zeros(len(lay), dtype=np.float32)
        ext = st.extents
        n = len(ext)
        total = float(math.prod(ext))
        pos = {lp.var: j for j, lp in enumerate(st.loops)}
        store_lin = [LinearForm.of(i, pos) for i in st.store.indices]
        stats = self._buffers(st, loads, store_lin, pos)
        out[lay.span("ops")] = [slog(c * total) for c in ops]
        store_loops = {j for lin in store_lin for j in lin.loops() if lin.coef(j)}
        for prefix, kind in ANN_KINDS:
            group = np.zeros(3 + len(POS), dtype=np.float32)
            js = [j for j, lp in enumerate(st.loops) if lp.kind is kind]
            if js:
                exts = [st.loops[j].extent for j in js]
                group[:3] = [slog(len(js)), slog(math.prod(exts)), slog(exts[-1])]
                p = {position(j, n, j in store_loops) for j in js}
                group[3 + (p.pop() if len(p) == 1 else _MIXED)] = 1.0
            else:
                group[3] = 1.0  # pos_none
            out[lay.span(prefix)] = group
        bound: dict[str, int] = {}
        for lp in st.loops:
            if lp.kind is ForKind.THREAD_BINDING and lp.thread:
                tag = "vthread" if lp.thread.startswith("vthread") else lp.thread
                bound[tag] = bound.get(tag, 1) * lp.extent
        out[lay.span("gpu")] = [float(self.is_gpu)] + [slog(bound.get(t, 0)) for t in GPU_TAGS]
        stats.sort(key=lambda s: (-s.bytes, s.buffer.name))  # most bytes first
        body_key = id(st.loops[-1].node) if st.loops else 0
        for b, s in enumerate(stats[: self.buffers_per_store]):
            count = serial.get((body_key, s.buffer), 0)
            out[lay.span(f"B{b}")] = buffer_row(s, stats, ext, count)
        flops = sum(ops[0:7]) + ops[0] or sum(ops[7:14]) + ops[7]  # a mad is two ops
        out[lay.span("curve")] = self._curve(flops, stats, ext)
        buf = st.store.buffer
        if buf in st.allocs:  # the stored buffer is allocated inside the function
            shape = [const_int(d, 0) for d in buf.shape]
            size = float(math.prod(shape) * nbytes(buf.dtype))
            outer = float(math.prod(ext[: st.allocs[buf]]))
            out[lay.span("alloc")] = [
                slog(size),
                slog(size * outer),
                slog(outer),
                slog(total / outer),
            ]
        unroll = max([self.func_unroll] + [lp.unroll_step for lp in st.loops])
        out[lay.span("outer")] = [slog(total), slog(n), slog(unroll)]
        return out

    def _buffers(
        self,
        st: Store,
        loads: list[E.BufferLoad],
        store_lin: list[LinearForm],
        pos: dict[E.Var, int],
    ) -> list[BufferStats]:
        per: dict[Any, list] = {}  # buffer -> [lins, reads, writes]
        per[st.store.buffer] = [[store_lin], 0, 1]
        for ld in loads:
            entry = per.setdefault(ld.buffer, [[], 0, 0])
            entry[0].append([LinearForm.of(i, pos) for i in ld.indices])
            entry[1] += 1
        return [
            BufferStats(b, lins, r, w, st.extents, self.cache_line)
            for b, (lins, r, w) in per.items()
        ]

    def _curve(self, flops: float, stats: list[BufferStats], ext: tuple[int, ...]) -> list[float]:
        """Float ops over bytes touched, sampled evenly in ``log2(ops)`` as the loop nest
        is swept from the innermost loop outwards."""
        samples = self.curve_samples
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
