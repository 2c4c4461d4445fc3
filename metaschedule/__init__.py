"""metaschedule: a Python auto-tuner for tensor programs."""

from . import codegen, runtime, te, tir
from .codegen import build
from .target import Target

__version__ = "0.1.0"
