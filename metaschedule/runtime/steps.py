"""A sequence of kernel calls run by one C call: a whole model per call from Python.

Every library carries ``__ms_run_steps`` (appended by the build after the timing loop of
:mod:`.timer`, whose function table it reads): it calls the library's kernels in a given
order, each on its own ``void*`` argument array, and stops at the first that fails.
:class:`StepProgram` holds those arrays, prepared once; a run writes nothing but the
addresses that change (a model's inputs) into them and makes one ``ctypes`` call, where a
Python loop over the kernels costs about 0.3 us per kernel.

A library built before the step runner existed (an exported model from an older
version) has no ``__ms_run_steps``: :meth:`StepProgram.of` returns None, and the caller
keeps its Python loop.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

#: The C symbol of the step runner.
SYMBOL = "__ms_run_steps"

STEPS_C = r"""
// ---- metaschedule runtime: a sequence of kernel calls (metaschedule/runtime/steps.py) ----
// Calls ms_kernels[funcs[s]](args[s]) for s = 0 .. count - 1, in order. Returns 0 with
// *failed = -1, or the first nonzero status with *failed = its step (-2: a bad index).
int32_t __ms_run_steps(int32_t count, const int32_t* funcs, void** const* args,
                       int32_t* failed) {
  for (int32_t s = 0; s < count; ++s) {
    int32_t f = funcs[s];
    if (f < 0 || f >= __ms_num_functions) { *failed = s; return -2; }
    int32_t status = ms_kernels[f](args[s]);
    if (status != 0) { *failed = s; return status; }
  }
  *failed = -1;
  return 0;
}
"""


def steps_c_source() -> str:
    """C of ``__ms_run_steps``, to append after the timing loop's function table."""
    return STEPS_C


class StepProgram:
    """Calls of one library's kernels, in order, each on its prepared argument array
    (kept alive here: the caller may rewrite their slots between runs)."""

    def __init__(self, runner: Any, calls: Sequence[tuple[int, ctypes.Array]]) -> None:
        self._runner = runner
        self.count = len(calls)
        self._arrays = [ptrs for _, ptrs in calls]  # the C side holds their addresses
        self._funcs = (ctypes.c_int32 * max(1, self.count))(*(i for i, _ in calls))
        self._args = (ctypes.c_void_p * max(1, self.count))(
            *(ctypes.addressof(p) for p in self._arrays)
        )
        self._failed = ctypes.c_int32(-1)

    @classmethod
    def of(cls, module: Any, calls: Sequence[tuple[Any, ctypes.Array]]) -> StepProgram | None:
        """The program of ``calls`` (kernel :class:`~.module.Function`, its argument
        array) of ``module``; None when its library has no step runner (built by an older
        version) or is not loaded here."""
        lib = getattr(module, "_lib", None)
        runner = getattr(lib, SYMBOL, None) if lib is not None else None
        if runner is None:
            return None
        runner.restype = ctypes.c_int32
        runner.argtypes = [
            ctypes.c_int32,
            ctypes.POINTER(ctypes.c_int32),
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_int32),
        ]
        for fn, _ in calls:
            if fn.module is not module:
                raise ValueError(f"kernel {fn.name} is not a function of {module.path}")
        return cls(runner, [(fn.index, ptrs) for fn, ptrs in calls])

    def run(self) -> tuple[int, int]:
        """Run every call in order: ``(0, -1)``, or the first failing call's status and
        its position."""
        status = self._runner(self.count, self._funcs, self._args, ctypes.byref(self._failed))
        return int(status), int(self._failed.value)
