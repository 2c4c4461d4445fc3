"""Load built modules, call them on numpy arrays, time them (TVM's ``tvm.runtime``)."""

from .aligned import ALLOC_ALIGNMENT, aligned_copy, empty, is_aligned
from .cuda_module import CudaModule, CudaUnavailableError, cuda_unavailable_reason
from .module import Function, Module, UnsupportedIsaError, load_module
from .pack import pack_weights, packed_params
from .timer import BenchmarkResult

__all__ = [
    "UnsupportedIsaError",
    "ALLOC_ALIGNMENT",
    "BenchmarkResult",
    "CudaModule",
    "CudaUnavailableError",
    "Function",
    "Module",
    "aligned_copy",
    "cuda_unavailable_reason",
    "empty",
    "is_aligned",
    "load_module",
    "pack_weights",
    "packed_params",
]
