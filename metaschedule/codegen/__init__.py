"""Code generation: C for the CPU, compiled with the system compiler into a runtime.Module."""

from .build import build
from .c_codegen import CFunction, CodegenError, CSource, codegen_c
from .compiler import BuildError
from .isa import CpuIsa, isa_of
from .options import CodegenOptions, defaults

__all__ = [
    "BuildError",
    "CFunction",
    "CSource",
    "CodegenError",
    "CodegenOptions",
    "CpuIsa",
    "build",
    "codegen_c",
    "isa_of",
]

defaults()  # the switches' defaults, read once every module that holds one is loaded
del defaults
