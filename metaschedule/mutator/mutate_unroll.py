"""``MutateUnroll``: resample the auto-unroll step chosen for a block."""

from __future__ import annotations

import numpy as np

from ..schedule import Trace
from .base import Mutator, annotation_samples, resample_categorical

__all__ = ["UNROLL_KEYS", "MutateUnroll"]

UNROLL_KEYS = ("meta_schedule.unroll_explicit", "meta_schedule.unroll_implicit")


class MutateUnroll(Mutator):
    """Mutates the auto-unroll step (as TVM's MutateUnroll).

    The candidates are the ``SampleCategorical`` instructions whose output is the value of
    a ``"meta_schedule.unroll_explicit"`` or ``"meta_schedule.unroll_implicit"``
    annotation. One is picked uniformly; its decision is redrawn among the other
    candidates, weighted by the instruction's probabilities. None if there is no such
    instruction, or the other candidates all have probability 0.
    """

    def apply(
        self, trace: Trace, rand_state: np.random.Generator | int | None = None
    ) -> Trace | None:
        rng = self._generator(rand_state)
        samples = annotation_samples(trace, UNROLL_KEYS)
        if not samples:
            return None
        return resample_categorical(trace, samples[int(rng.integers(len(samples)))], rng)
