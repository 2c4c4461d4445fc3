"""Load built modules, call them on numpy arrays, time them (TVM's ``tvm.runtime``)."""

from .module import Function, Module, load_module
from .timer import BenchmarkResult

__all__ = ["BenchmarkResult", "Function", "Module", "load_module"]
