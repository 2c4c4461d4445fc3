"""The default mutators of each target kind (TVM's ``Mutator.create`` dicts)."""

from __future__ import annotations

from ..registry import register
from .base import Mutator
from .mutate_compute_location import MutateComputeLocation
from .mutate_parallel import MutateParallel
from .mutate_thread_binding import MutateThreadBinding
from .mutate_tile_size import MutateTileSize
from .mutate_unroll import MutateUnroll

__all__ = ["cuda_mutators", "llvm_mutators"]


@register("mutator", "llvm", aliases=("cpu",))
def llvm_mutators() -> dict[Mutator, float]:
    """TVM's CPU mutators with their probabilities."""
    return {
        MutateTileSize(): 0.9,
        MutateComputeLocation(): 0.05,
        MutateUnroll(): 0.03,
        MutateParallel(max_jobs_per_core=16): 0.02,
    }


@register("mutator", "cuda")
def cuda_mutators() -> dict[Mutator, float]:
    """TVM's CUDA mutators with their probabilities."""
    return {MutateTileSize(): 0.9, MutateUnroll(): 0.08, MutateThreadBinding(): 0.02}
