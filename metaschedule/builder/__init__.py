"""Builders: compile IRModules into artifacts that runners load and measure."""

from .base import Builder, BuilderInput, BuilderResult, PyBuilder, create
from .dask_builder import DaskBuilder
from .local_builder import LocalBuilder, default_build, default_export

__all__ = [
    "Builder",
    "BuilderInput",
    "BuilderResult",
    "DaskBuilder",
    "LocalBuilder",
    "PyBuilder",
    "create",
    "default_build",
    "default_export",
]
