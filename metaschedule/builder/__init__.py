"""Builders: compile IRModules into artifacts that runners load and measure."""

from .base import Builder, BuilderInput, BuilderResult, PyBuilder, create
from .local_builder import LocalBuilder, default_build, default_export

__all__ = [
    "Builder",
    "BuilderInput",
    "BuilderResult",
    "LocalBuilder",
    "PyBuilder",
    "create",
    "default_build",
    "default_export",
]
