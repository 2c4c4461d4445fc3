"""Load built modules, call them on numpy arrays, time them (TVM's ``tvm.runtime``)."""

from .cuda_module import CudaModule, CudaUnavailableError, cuda_unavailable_reason
from .module import Function, Module, load_module
from .pack import pack_weights, packed_params
from .timer import BenchmarkResult

__all__ = [
    "BenchmarkResult",
    "CudaModule",
    "CudaUnavailableError",
    "Function",
    "Module",
    "cuda_unavailable_reason",
    "load_module",
    "pack_weights",
    "packed_params",
]
