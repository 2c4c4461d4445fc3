"""Mutators: change one decision of a trace, for evolutionary search."""

from .base import Mutator, PyMutator, create
from .default_mutators import llvm_mutators
from .mutate_compute_location import MutateComputeLocation
from .mutate_parallel import MutateParallel
from .mutate_tile_size import MutateTileSize
from .mutate_unroll import MutateUnroll

__all__ = [
    "MutateComputeLocation",
    "MutateParallel",
    "MutateTileSize",
    "MutateUnroll",
    "Mutator",
    "PyMutator",
    "create",
    "llvm_mutators",
]
