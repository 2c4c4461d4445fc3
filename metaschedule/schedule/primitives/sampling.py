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
        "SampleCategorical",
        "sample_categorical",
        attrs=("candidates", "probs"),
        is_pure=True,
        has_decision=True,
    )
)
