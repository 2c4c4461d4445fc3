"""Test doubles and workloads shared by the tests (importable by worker processes)."""

from .emulate import EmulationError, run_emulated

__all__ = ["EmulationError", "run_emulated"]
