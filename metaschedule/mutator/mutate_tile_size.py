"""``MutateTileSize``: move a factor between two tiles of a SamplePerfectTile (or
SampleJointTile) decision."""

from __future__ import annotations

import numpy as np

from ..schedule import Instruction, Trace
from ..schedule.primitives.sampling import divisors, joint_tile_miss
from .base import Mutator, annotation_samples, pre_postproc_insts, resample_categorical

__all__ = ["MutateTileSize"]

COOPERATIVE_FETCH = "meta_schedule.cooperative_fetch"


class MutateTileSize(Mutator):
    """Mutates the decision of a ``SamplePerfectTile`` (as TVM's MutateTileSize).

    One tiling with at least two factors and a product above 1 is picked at random; a
    divisor ``d > 1`` of one of its factors ``x`` moves to another position ``y``
    (``x /= d``, ``y *= d``), so the product stays the loop's extent. A move into the
    innermost position keeps it at most the instruction's ``max_innermost_factor``.

    A ``SampleJointTile`` decision (several loops tiled together under bounds on the
    products of some levels, e.g. GPU threads per block) gets the same kind of move in
    one of its loops, among the moves that keep the products within the bounds.

    As in TVM, the ``SampleCategorical`` decisions of GPU cooperative-fetch vector widths
    (values of ``"meta_schedule.cooperative_fetch"`` annotations) are mutated too.
    """

    def apply(
        self, trace: Trace, rand_state: np.random.Generator | int | None = None
    ) -> Trace | None:
        rng = self._generator(rand_state)
        tiles = [
            inst
            for inst in pre_postproc_insts(trace)
            if inst.kind.name in ("SamplePerfectTile", "SampleJointTile")
            and _mutable(trace.get_decision(inst))
        ]
        vectorize = annotation_samples(trace, (COOPERATIVE_FETCH,))
        if not tiles and not vectorize:
            return None
        pick = int(rng.integers(len(tiles) + len(vectorize)))
        if pick < len(tiles):
            if tiles[pick].kind.name == "SampleJointTile":
                return _mutate_joint(trace, tiles[pick], rng)
            return _mutate_tiles(trace, tiles[pick], rng)
        return resample_categorical(trace, vectorize[pick - len(tiles)], rng)


def _mutable(decision) -> bool:
    if decision is None or len(decision) < 2:
        return False
    return int(np.prod([int(x) for x in decision])) >= 2


def _mutate_tiles(trace: Trace, inst: Instruction, rng: np.random.Generator) -> Trace | None:
    tiles = [int(x) for x in trace.get_decision(inst)]
    n = len(tiles)
    max_innermost = int(inst.attrs[1])

    def factors(x: int, y: int) -> list[int]:
        out = divisors(tiles[x])[1:]  # every divisor > 1
        if y == n - 1:
            out = [d for d in out if d * tiles[y] <= max_innermost]
        return out

    # TVM draws (x, y) uniformly and redraws when nothing may move from x to y; picking
    # uniformly among the pairs that allow a move is the same distribution, without retries.
    pairs = [(x, y) for x in range(n) if tiles[x] > 1 for y in range(n) if y != x and factors(x, y)]
    if not pairs:
        return None
    x, y = pairs[int(rng.integers(len(pairs)))]
    choices = factors(x, y)
    d = choices[int(rng.integers(len(choices)))]
    new = list(tiles)
    new[x] //= d
    new[y] *= d
    return trace.with_decision(inst, new, remove_postproc=True)


def _mutate_joint(trace: Trace, inst: Instruction, rng: np.random.Generator) -> Trace | None:
    flat = [int(x) for x in trace.get_decision(inst)]
    n, max_innermost, bounds = int(inst.attrs[0]), int(inst.attrs[1]), inst.attrs[2]
    rows = [flat[i : i + n] for i in range(0, len(flat), n)]
    allowed = joint_tile_miss(rows, bounds)  # a decision outside the bounds may not drift
    moves = []
    for r, tiles in enumerate(rows):
        for x in range(n):
            for d in divisors(tiles[x])[1:]:
                for y in range(n):
                    if y == x or (y == n - 1 and tiles[y] * d > max_innermost):
                        continue
                    new = [list(row) for row in rows]
                    new[r][x] //= d
                    new[r][y] *= d
                    if joint_tile_miss(new, bounds) <= allowed:
                        moves.append(new)
    if not moves:
        return None
    new = moves[int(rng.integers(len(moves)))]
    return trace.with_decision(inst, [f for row in new for f in row], remove_postproc=True)
