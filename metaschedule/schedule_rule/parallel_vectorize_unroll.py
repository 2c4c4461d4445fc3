"""``ParallelizeVectorizeUnroll``: ask the postprocessor to parallelise, vectorise, unroll."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .analysis import is_root, is_spatial_prim_func, num_cores_of, realize_of
from .base import ScheduleRule

if TYPE_CHECKING:
    from ..schedule import BlockRV, Schedule

__all__ = [
    "PARALLEL_KEY",
    "UNROLL_EXPLICIT_KEY",
    "UNROLL_IMPLICIT_KEY",
    "VECTORIZE_KEY",
    "ParallelizeVectorizeUnroll",
]

PARALLEL_KEY = "meta_schedule.parallel"
VECTORIZE_KEY = "meta_schedule.vectorize"
UNROLL_EXPLICIT_KEY = "meta_schedule.unroll_explicit"
UNROLL_IMPLICIT_KEY = "meta_schedule.unroll_implicit"


class ParallelizeVectorizeUnroll(ScheduleRule):
    """Annotate the root block with the limits the RewriteParallelVectorizeUnroll
    postprocessor realises (as TVM's rule):

    * ``meta_schedule.parallel = num_cores * max_jobs_per_core``: fuse and parallelise
      outer spatial loops up to that extent;
    * ``meta_schedule.vectorize = max_vectorize_extent``: fuse and vectorise inner
      spatial loops up to that extent;
    * ``meta_schedule.unroll_explicit`` (or ``_implicit``) = a step sampled uniformly
      from ``unroll_max_steps`` (``sample_categorical``, mutated by MutateUnroll), unless
      every block of the function is spatial.

    Args:
        max_jobs_per_core: parallel jobs per core; -1 disables parallelisation.
        max_vectorize_extent: the largest vectorised extent; -1 disables vectorisation.
        unroll_max_steps: the candidate auto-unroll steps (None or []: no unrolling).
        unroll_explicit: annotate explicit (replicated body) rather than implicit unrolling.

    The core count is the TuneContext target's ``num_cores`` (else its ``num_threads``).
    """

    def __init__(
        self,
        max_jobs_per_core: int = 16,
        max_vectorize_extent: int = 16,
        unroll_max_steps: list[int] | None = None,
        unroll_explicit: bool = True,
    ) -> None:
        for name, v in (
            ("max_jobs_per_core", max_jobs_per_core),
            ("max_vectorize_extent", max_vectorize_extent),
        ):
            if isinstance(v, bool) or not isinstance(v, int) or (v < 1 and v != -1):
                raise ValueError(f"{name} must be a positive int or -1 (disabled), got {v!r}")
        steps = [int(s) for s in unroll_max_steps] if unroll_max_steps else []
        if any(s < 0 for s in steps):
            raise ValueError(f"unroll_max_steps must be non-negative, got {unroll_max_steps!r}")
        self.max_jobs_per_core = max_jobs_per_core
        self.max_vectorize_extent = max_vectorize_extent
        self.unroll_max_steps = steps
        self.unroll_explicit = bool(unroll_explicit)
        self.max_parallel_extent: int | None = None

    def _initialize_with_tune_context(self, context: Any) -> None:
        cores = num_cores_of(context)
        if cores is not None and self.max_jobs_per_core != -1:
            self.max_parallel_extent = cores * self.max_jobs_per_core

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if not is_root(sch, block):
            return [sch]
        if self.max_jobs_per_core != -1:
            if self.max_parallel_extent is None:
                raise ValueError(
                    "ParallelizeVectorizeUnroll needs the target's core count: initialise it "
                    "with a TuneContext that has a target (PostOrderApply does this)"
                )
            sch.annotate(block, PARALLEL_KEY, self.max_parallel_extent)
        if self.max_vectorize_extent != -1:
            sch.annotate(block, VECTORIZE_KEY, self.max_vectorize_extent)
        fname, _ = realize_of(sch, block)
        if self.unroll_max_steps and not is_spatial_prim_func(sch, fname):
            n = len(self.unroll_max_steps)
            step = sch.sample_categorical(self.unroll_max_steps, [1.0 / n] * n)
            key = UNROLL_EXPLICIT_KEY if self.unroll_explicit else UNROLL_IMPLICIT_KEY
            sch.annotate(block, key, step)
        return [sch]

    def __repr__(self) -> str:
        return (
            f"ParallelizeVectorizeUnroll(max_jobs_per_core={self.max_jobs_per_core}, "
            f"max_vectorize_extent={self.max_vectorize_extent}, "
            f"unroll_max_steps={self.unroll_max_steps}, unroll_explicit={self.unroll_explicit})"
        )
