"""metaschedule: a Python auto-tuner for tensor programs."""

from . import te, tir

__version__ = "0.1.0"
