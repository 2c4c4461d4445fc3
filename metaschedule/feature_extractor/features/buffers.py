"""Footprints, cache lines and reuse of the buffers one store touches (the ``B*`` groups)."""

from __future__ import annotations

import math
from typing import Any

from ...tir.dtype import nbytes
from .layout import BUF_NAMES
from .linear import LinearForm
from .loop_nest import const_int

__all__ = ["BufferStats", "buffer_row", "slog"]


def slog(x: float) -> float:
    """``log2(1 + x)``, 0 for x <= 0: how counts enter a feature vector."""
    return math.log2(1.0 + x) if x > 0 else 0.0


class BufferStats:
    """Footprints and cache-line counts of one buffer's accesses in one store."""

    def __init__(
        self,
        buffer: Any,
        lins: list[list[LinearForm]],
        reads: int,
        writes: int,
        extents: tuple[int, ...],
        cache_line: int,
    ):
        self.buffer = buffer
        self.reads, self.writes = reads, writes
        self.elem = nbytes(buffer.dtype)
        n = len(extents)
        shape = [const_int(s, 0) for s in buffer.shape]
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
        groups: dict[tuple, list[list[LinearForm]]] = {}
        for acc in lins:
            groups.setdefault(tuple(lin.signature() for lin in acc), []).append(acc)
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


def _group_footprint(
    accs: list[list[LinearForm]],
    extents: tuple[int, ...],
    shape: list[int],
    elem: int,
    cache_line: int,
) -> tuple[list[float], float]:
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
    total = 0.0
    for k in range(n, -1, -1):
        moved = k == n  # a loop that widens some dimension (else: the level below's total)
        if k < n and extents[k] > 1:
            span = extents[k] - 1
            for d in range(ndim):
                lin = first[d]
                c = lin.plain.get(k)
                if c:
                    plain_sum[d] += abs(c) * span
                    moved = True
                for i, (coefs, _) in enumerate(lin.capped):
                    c = coefs.get(k)
                    if c:
                        capped_sums[d][i] += abs(c) * span
                        moved = True
                if k in loops[d]:
                    prods[d] *= extents[k]
                    moved = True
        if not moved:
            fp[k] = total
            continue
        total = 1.0
        for d in range(ndim):
            w = (
                1.0
                + spread[d]
                + plain_sum[d]
                + sum(min(cap, s) for (_, cap), s in zip(first[d].capped, capped_sums[d]))
            )
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


def buffer_row(
    s: BufferStats, stats: list[BufferStats], ext: tuple[int, ...], serial_count: int
) -> list[float]:
    """The ``BUF_NAMES`` slots of buffer ``s`` among all buffers ``stats`` of the store.

    Loop reuse: some loop above the store does not move the address (the innermost such
    loop is the reuse loop); serial reuse: the buffer is accessed more than once within
    one iteration of the innermost loop (``serial_count``).
    """
    acc = [0.0, 0.0, 0.0]
    acc[2 if s.reads and s.writes else (0 if s.reads else 1)] = 1.0
    reuse = [0.0, 0.0, 0.0]
    dis_iter = dis_bytes = count = 0.0
    loop = next((j for j in range(len(ext) - 1, -1, -1) if ext[j] > 1 and j not in s.touched), None)
    if loop is not None:
        reuse[0] = 1.0
        count = float(ext[loop])
        dis_iter = float(math.prod(ext[loop + 1 :]))
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
    out = (
        acc
        + [slog(s.bytes), slog(unique_bytes), slog(s.lines), slog(s.unique_lines)]
        + reuse
        + [
            slog(dis_iter),
            slog(dis_bytes),
            slog(count),
            slog(s.bytes / div),
            slog(unique_bytes / div),
            slog(s.lines / div),
            slog(s.unique_lines / div),
            slog(s.stride),
        ]
    )
    assert len(out) == len(BUF_NAMES)
    return out
