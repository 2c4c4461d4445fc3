"""``MutateTileSize``: move a factor between two tiles of a SamplePerfectTile decision."""

from __future__ import annotations

import numpy as np

from ..schedule import Instruction, Trace
from ..schedule.primitives.sampling import divisors
from .base import Mutator, annotation_samples, pre_postproc_insts, resample_categorical

__all__ = ["MutateTileSize"]

COOPERATIVE_FETCH = "meta_schedule.cooperative_fetch"


class MutateTileSize(Mutator):
    """Mutates the decision of a ``SamplePerfectTile`` (as TVM's MutateTileSize).

    One tiling with at least two factors and a product above 1 is picked at random; a
    divisor ``d > 1`` of one of its factors ``x`` moves to another position ``y``
    (``x /= d``, ``y *= d``), so the product stays the loop's extent. A move into the
    innermost position keeps it at most the instruction's ``max_innermost_factor``.

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
            if inst.kind.name == "SamplePerfectTile" and _mutable(trace.get_decision(inst))
        ]
        vectorize = annotation_samples(trace, (COOPERATIVE_FETCH,))
        if not tiles and not vectorize:
            return None
        pick = int(rng.integers(len(tiles) + len(vectorize)))
        if pick < len(tiles):
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
