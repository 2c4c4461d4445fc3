"""Postprocessors: finish or reject the schedules a search strategy samples."""

from .base import Postproc, PyPostproc, create, register_default_postprocs

__all__ = ["Postproc", "PyPostproc", "create", "register_default_postprocs"]
