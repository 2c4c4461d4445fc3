"""Test doubles and workloads shared by the tests (importable by worker processes).

Re-exported here:

- :func:`run_emulated`, :class:`EmulationError`: run a cross-built kernel under qemu-user.
- :func:`assert_unchanged`: a schedule primitive refuses with a matching message and
  leaves the schedule as it was.
- :func:`build_and_run`, :func:`build_and_check`: build a PrimFunc, call it on copies of
  arrays; check its output against numpy's.
- :func:`matmul`, :func:`matmul_relu`, :func:`matmul_tensors`, :func:`op_matmul`: matmul
  workloads of given sizes; :class:`RandomArrays`: seeded standard-normal inputs.

The other modules (``schedules``, ``hostile``, ``dummy_object``, ...) are imported by name.
"""

from .checks import assert_unchanged, build_and_check, build_and_run
from .emulate import EmulationError, run_emulated
from .workloads import RandomArrays, matmul, matmul_relu, matmul_tensors, op_matmul

__all__ = [
    "EmulationError",
    "RandomArrays",
    "assert_unchanged",
    "build_and_check",
    "build_and_run",
    "matmul",
    "matmul_relu",
    "matmul_tensors",
    "op_matmul",
    "run_emulated",
]
