"""Mutators: change one decision of a trace, for evolutionary search."""

from .base import Mutator, PyMutator, create
from .default_mutators import cuda_mutators, llvm_mutators
from .mutate_compute_location import MutateComputeLocation
from .mutate_parallel import MutateParallel
from .mutate_thread_binding import MutateThreadBinding
from .mutate_tile_size import MutateTileSize
from .mutate_unroll import MutateUnroll

__all__ = [
    "MutateComputeLocation",
    "MutateParallel",
    "MutateThreadBinding",
    "MutateTileSize",
    "MutateUnroll",
    "Mutator",
    "PyMutator",
    "create",
    "cuda_mutators",
    "llvm_mutators",
]
