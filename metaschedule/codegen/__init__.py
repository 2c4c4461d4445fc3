"""Code generation: C for the CPU, compiled with the system compiler into a runtime.Module."""

from .build import build
from .c_codegen import CFunction, CodegenError, CSource, codegen_c
from .compiler import BuildError

__all__ = ["BuildError", "CFunction", "CSource", "CodegenError", "build", "codegen_c"]
