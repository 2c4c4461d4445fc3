"""Sampling primitives: random tile sizes and categorical choices, recorded as decisions."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...tir import IntImm
from ..base import ScheduleBase, atomic
from ..error import ScheduleError
from ..instruction import InstructionKind, register_inst_kind
from ..rv import ExprRV, LoopRV


def prime_factors(n: int) -> list[int]:
    out = []
    d = 2
    while d * d <= n:
        while n % d == 0:
            out.append(d)
            n //= d
        d += 1
    if n > 1:
        out.append(n)
    return out


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


#: draws sample_joint_tile makes before it settles for the one closest to its bounds
JOINT_TILE_TRIES = 1000


def joint_tile_miss(rows: Sequence[Sequence[int]], bounds: Sequence[Sequence[int]]) -> float:
    """How far per-loop tilings ``rows`` are from ``bounds`` (0: within them), in log2."""
    miss = 0.0
    for level, low, high in bounds:
        p = math.prod(r[level] for r in rows)
        if p < low:
            miss += math.log2(low / p)
        elif p > high:
            miss += math.log2(p / high)
    return miss


class SamplingMixin(ScheduleBase):
    def _sample_tile(self, extent: int, n: int, max_innermost_factor: int) -> list[int]:
        """Random factors of ``extent`` (product exact) with a bounded innermost factor."""
        inner_choices = [d for d in divisors(extent) if d <= max(1, max_innermost_factor)]
        inner = inner_choices[self._rand_int(len(inner_choices))]
        factors = [1] * n
        factors[-1] = inner
        if n > 1:
            for p in prime_factors(extent // inner):
                factors[self._rand_int(n - 1)] *= p
        else:
            factors[0] = extent
        return factors

    @atomic
    def sample_perfect_tile(
        self,
        loop: LoopRV,
        n: int,
        max_innermost_factor: int = 16,
        decision: Sequence[int] | None = None,
    ) -> list[ExprRV]:
        """Sample ``n`` factors whose product is the loop's extent.

        The innermost factor is at most ``max_innermost_factor``. With ``decision``
        the factors are taken as given (after checking them).
        """
        fname, node = self._loop(loop)
        if not isinstance(node.extent, IntImm):
            raise ScheduleError(
                f"sample_perfect_tile needs a constant extent, loop "
                f"{node.loop_var.name} has {node.extent}"
            )
        if n < 1:
            raise ScheduleError(f"sample_perfect_tile needs n >= 1, got {n}")
        extent = node.extent.value
        if decision is None:
            factors = self._sample_tile(extent, n, max_innermost_factor)
        else:
            factors = [int(x) for x in decision]
            if len(factors) != n or math.prod(factors) != extent or min(factors) < 1:
                raise ScheduleError(
                    f"decision {factors} is not a perfect tiling of loop {node.loop_var.name} "
                    f"(extent {extent}) into {n} factors"
                )
        outs = [self._new_expr_rv(f) for f in factors]
        self._record("SamplePerfectTile", [loop], [n, max_innermost_factor], outs, list(factors))
        return outs

    @atomic
    def sample_joint_tile(
        self,
        loops: Sequence[LoopRV],
        n: int,
        max_innermost_factor: int = 16,
        bounds: Sequence[Sequence[int]] = (),
        decision: Sequence[int] | None = None,
    ) -> list[ExprRV]:
        """Perfect tilings of several loops at once (ours; TVM samples each loop alone).

        Each loop gets ``n`` factors as :meth:`sample_perfect_tile` draws them, and each
        ``(level, low, high)`` of ``bounds`` asks the product over the loops of their
        factors at position ``level`` to lie in ``[low, high]`` (e.g. the threads of a
        GPU block: the product of the tiles bound to ``threadIdx``). The draw is the
        per-loop distribution conditioned on the bounds (rejection, up to
        :data:`JOINT_TILE_TRIES` draws; if none fits, the one closest to the bounds).
        Returns the factors loop by loop (``n`` per loop); the decision is that flat
        list of ints. A given decision must tile every loop perfectly; the bounds are
        not enforced on it (VerifyGPUCode judges the result, as for any decision).
        """
        loops = list(loops)
        extents = []
        for loop in loops:
            _, node = self._loop(loop)
            if not isinstance(node.extent, IntImm):
                raise ScheduleError(
                    f"sample_joint_tile needs constant extents, loop {node.loop_var.name} has "
                    f"{node.extent}"
                )
            extents.append(node.extent.value)
        if n < 1 or not loops:
            raise ScheduleError(f"sample_joint_tile needs n >= 1 and loops, got n={n}")
        checked = [tuple(int(x) for x in b) for b in bounds]
        for b in checked:
            if len(b) != 3 or not 0 <= b[0] < n:
                raise ScheduleError(f"sample_joint_tile bounds are (level < {n}, low, high): {b}")
        if decision is None:
            factors = self._sample_joint(extents, n, max_innermost_factor, checked)
        else:
            factors = [int(x) for x in decision]
            rows = [factors[i * n : (i + 1) * n] for i in range(len(loops))]
            if (
                len(factors) != n * len(loops)
                or min(factors, default=0) < 1
                or any(math.prod(r) != e for r, e in zip(rows, extents))
            ):
                raise ScheduleError(
                    f"decision {factors} is not a perfect tiling of extents {extents} into "
                    f"{n} factors each"
                )
        outs = [self._new_expr_rv(f) for f in factors]
        attrs = [n, max_innermost_factor, [list(b) for b in checked]]
        self._record("SampleJointTile", loops, attrs, outs, list(factors))
        return outs

    def _sample_joint(
        self, extents: list[int], n: int, max_innermost: int, bounds: list[tuple[int, ...]]
    ) -> list[int]:
        best: list[int] = []
        best_miss = math.inf
        for _ in range(JOINT_TILE_TRIES):
            rows = [self._sample_tile(e, n, max_innermost) for e in extents]
            miss = joint_tile_miss(rows, bounds)
            if miss < best_miss:
                best, best_miss = [f for r in rows for f in r], miss
            if miss == 0:
                break
        return best

    @atomic
    def sample_categorical(
        self,
        candidates: Sequence[int],
        probs: Sequence[float],
        decision: int | None = None,
    ) -> ExprRV:
        """Pick one of ``candidates`` with probabilities ``probs``; the decision is its index."""
        candidates = [int(c) for c in candidates]
        probs = [float(p) for p in probs]
        if not candidates or len(candidates) != len(probs):
            raise ScheduleError(
                f"sample_categorical needs as many probabilities as candidates, got "
                f"{len(candidates)} candidates and {len(probs)} probabilities"
            )
        if any(p < 0 for p in probs) or sum(probs) <= 0:
            raise ScheduleError(f"probabilities must be non-negative with a positive sum: {probs}")
        if decision is None:
            r = self._rand_float() * sum(probs)
            acc = 0.0
            decision = len(probs) - 1
            for i, p in enumerate(probs):
                acc += p
                if r < acc:
                    decision = i
                    break
        decision = int(decision)
        if not 0 <= decision < len(candidates):
            raise ScheduleError(
                f"decision {decision} is out of range for {len(candidates)} candidates"
            )
        out = self._new_expr_rv(candidates[decision])
        self._record("SampleCategorical", [], [candidates, probs], [out], decision)
        return out


register_inst_kind(
    InstructionKind(
        "SamplePerfectTile",
        "sample_perfect_tile",
        inputs=("loop",),
        attrs=("n", "max_innermost_factor"),
        is_pure=True,
        has_decision=True,
        returns_list=True,
    )
)
register_inst_kind(
    InstructionKind(
        "SampleJointTile",
        "sample_joint_tile",
        inputs=("loops[]",),
        attrs=("n", "max_innermost_factor", "bounds"),
        is_pure=True,
        has_decision=True,
        returns_list=True,
    )
)
register_inst_kind(
    InstructionKind(
        "SampleCategorical",
        "sample_categorical",
        attrs=("candidates", "probs"),
        is_pure=True,
        has_decision=True,
    )
)
