"""Cache costs of one store, for the analytic prior: the bytes brought into L1 and L2 per
the outermost loop whose sweep fits (:func:`cache_traffic`), and the L1 set conflicts of
a register tile's operand lines (:func:`set_conflicts`) and of the lines a tile's region
reuses (:func:`region_set_conflicts`).
"""

from __future__ import annotations

import math
from typing import Any

from ...feature_extractor.features.buffers import BufferStats
from ...feature_extractor.features.linear import LinearForm
from ...feature_extractor.features.loop_nest import const_int
from ...tir.dtype import nbytes
from .access import flat_strides
from .machine import Machine

__all__ = ["cache_traffic", "region_set_conflicts", "set_conflicts"]


def cache_traffic(
    stats: list[BufferStats],
    ext: tuple[int, ...],
    m: Machine,
    flats: list[list[float] | None],
    resident: tuple[Any, int] | None = None,
) -> float:
    """Cycles to bring the store's data into L1 from L2, and into L2 from beyond.

    Per cache level: the loops from ``k`` in sweep a working set that fits, so each sweep
    brings its data in once; a buffer the loop right outside (``k - 1``) does not move
    reads the same data on each of that loop's iterations, which stays cached (what one
    iteration touches fits), so it is brought in once per sweep of loop ``k - 1``. A
    buffer whose lines a loop steps by a multiple of many sets (the rows of a 1024-wide
    float matrix: 4 KiB apart) uses only some of the sets: its footprint counts that
    many times over (:func:`_aliasing`). ``resident``: a buffer kept in registers by
    the loops from the given one in (a register tile): no cache holds it there.
    """
    n = len(ext)
    out = 0.0
    levels = (
        (m.l1_bytes, 0, m.l2_bytes_per_cycle),  # L1 conflicts: set_conflicts, per tile
        (m.l2_bytes, m.l2_ways, m.l3_bytes_per_cycle),
    )
    for size, ways, bandwidth in levels:
        sets = size // (64 * ways) if ways else 0

        def held(s: BufferStats, flat: list[float] | None, k: int, sets: int = sets) -> float:
            if resident is not None and s.buffer is resident[0] and k > resident[1]:
                return 0.0
            crowd = _aliasing(flat, ext, k, s.elem, sets) if sets else 1.0
            return s.footprint[k] * s.elem * crowd

        k = n
        while k > 0 and sum(held(s, f, k - 1) for s, f in zip(stats, flats)) <= size:
            k -= 1
        reloads = float(math.prod(ext[:k]))
        # consecutive iterations of loop k - 1 share data (the halo of a window): what
        # the next one adds fits beside what this one holds, so a sweep of the loop brings
        # each distinct byte in once
        slides = (
            k > 0
            and sum(
                held(s, f, k) + s.footprint[k - 1] * s.elem / ext[k - 1]
                for s, f in zip(stats, flats)
            )
            <= size
        )
        nbytes = 0.0
        for s in stats:
            if resident is not None and s.buffer is resident[0] and k > resident[1]:
                continue
            if k > 0 and ((k - 1) not in s.touched or slides):
                whole = min(s.footprint[k - 1], ext[k - 1] * s.footprint[k])
                nbytes += reloads / ext[k - 1] * max(whole * s.elem, 64.0)
            else:
                nbytes += reloads * max(s.footprint[k] * s.elem, 64.0)
        out = max(out, nbytes / bandwidth)
    return out


def _aliasing(
    flat: list[float] | None, ext: tuple[int, ...], k: int, elem: int, sets: int
) -> float:
    """How many times over a buffer's footprint under loops ``k..`` counts in a cache of
    ``sets`` sets of 64-byte lines. A loop stepping ``L`` lines visits only
    ``sets / gcd(L, sets)`` sets; with more iterations than that, its lines crowd them,
    unless the shorter strides of the other loops spread each step over enough lines (a
    whole row of ``A`` read along ``k`` fills every set; 32 columns of ``B`` do not)."""
    if flat is None:
        return 1.0
    worst = 1.0
    for j in range(k, len(ext)):
        step = abs(flat[j]) * elem
        if ext[j] <= 1 or step < 64 or step % 64:
            continue
        g = math.gcd(int(step // 64), sets)
        if ext[j] <= sets // g:
            continue
        span = 1.0 + sum(
            abs(flat[i]) * (ext[i] - 1)
            for i in range(k, len(ext))
            if i != j and 0 < abs(flat[i]) * elem < step
        )
        lines = max(1.0, math.ceil(span * elem / 64))
        worst = max(worst, g / min(float(g), lines))
    return worst


def set_conflicts(
    s: BufferStats, flat: list[float], tile: list[int], ext: tuple[int, ...], m: Machine
) -> float:
    """Cycles per sweep of a register tile lost to L1 set conflicts of one operand.

    The tile's loops that step the operand by whole cache lines put the lines they reach
    into the sets ``line % sets``: a step of ``L`` lines visits ``sets / gcd(L, sets)``
    of them (rows 4 KiB apart on a 32 KiB 8-way L1, e.g. a 1024-wide float matrix: one
    set; rows of a 56 x 64 float image, 14 KiB apart: two). With more lines in a set than
    it has ways, they evict each other between sweeps, and every sweep fetches them again
    from L2.
    """
    sets = max(1, m.l1_bytes // (64 * max(1, m.l1_ways)))
    lines, steps = 1, []
    for j in tile:
        step = abs(flat[j]) * s.elem
        if ext[j] > 1 and step >= 64 and step % 64 == 0:
            lines *= ext[j]
            steps.append((int(step // 64) % sets, ext[j]))
    if lines <= m.l1_ways:
        return 0.0
    if lines <= 4096:  # the sets the lines really fall in
        used = {0}
        for step, n in steps:
            used = {(u + k * step) % sets for u in used for k in range(n)}
        crowd = lines / len(used)
    else:
        crowd = lines / min(sets, math.prod(sets // math.gcd(st, sets) for st, _ in steps))
    if crowd <= m.l1_ways:
        return 0.0
    return lines * 64.0 / m.l2_bytes_per_cycle


def region_set_conflicts(
    accesses: list, region: list[int], ext: tuple[int, ...], m: Machine
) -> float:
    """Cycles per entry into a register tile's region lost to L1 set conflicts of the
    lines the region reuses: the input rows of a window with their halo and the rows of
    the tile it stores (buffers assumed aligned alike modulo the way size).

    A region whose lines fit the L1 by size can still crowd a few sets: a depthwise tile
    of 8 rows 14 KiB apart (the halo makes 10 input rows, and the 8 output rows fall in
    the same two set groups) puts 9 lines in a set of 8 ways; the lines beyond the ways
    come from L2 again on every entry (measured: 8 rows x 16 channels ran 55 us, 4 rows
    or 8 pixels along the row 44 us; charging every line of a crowded set instead ranked
    the 8-row tile below padding computed per tile, which ran 70-120 us). A region too
    large for the L1 streams its data instead (the cache traffic counts it).
    """
    sets = max(1, m.l1_bytes // (64 * max(1, m.l1_ways)))
    limit = 2 * m.l1_bytes // 64  # more distinct lines: the region streams, no reuse
    lines: set[tuple[int, int]] = set()
    for buf, lin in accesses:
        flat = flat_strides(buf, lin, len(ext))
        elem = nbytes(buf.dtype)
        per_line = max(1, 64 // elem)
        offsets = {int(_flat_offset(buf, lin))}
        for j in region:
            step, count = int(flat[j]), ext[j]
            if step == 0:
                continue
            if abs(step) < per_line:  # steps within a line: one offset per line reached
                count = max(1, math.ceil(count * abs(step) / per_line))
                step = per_line if step > 0 else -per_line
            offsets = {o + k * step for o in offsets for k in range(count)}
            if len(offsets) > limit:
                return 0.0
        lines |= {(id(buf), o // per_line) for o in offsets}
        if len(lines) > limit:
            return 0.0
    per_set: dict[int, int] = {}
    for _, line in lines:
        per_set[line % sets] = per_set.get(line % sets, 0) + 1
    excess = sum(c - m.l1_ways for c in per_set.values() if c > m.l1_ways)
    return excess * 64.0 / m.l2_bytes_per_cycle


def _flat_offset(buf: Any, lin: list[LinearForm]) -> float:
    """The row-major element offset of an access with every loop at 0."""
    shape = [const_int(s, 0) for s in buf.shape]
    offset, row = 0.0, 1
    for d in range(len(shape) - 1, -1, -1):
        offset += lin[d].const * row
        row *= max(1, shape[d])
    return offset
