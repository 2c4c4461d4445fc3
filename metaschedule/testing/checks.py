"""Assertions shared by the tests: a schedule primitive's refusal leaves the schedule as
it was; a built kernel computes what numpy does."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from ..codegen.build import build
from ..runtime.module import Module
from ..schedule import Schedule, ScheduleError
from ..target import Target
from ..tir import IRModule, PrimFunc


def assert_unchanged(sch: Schedule, fn: Callable[[], Any], match: str) -> None:
    """``fn()`` raises a :class:`ScheduleError` whose message ``re.search``-matches
    ``match`` (as ``pytest.raises(match=...)``), and leaves ``sch`` unchanged: the same
    module object, no instruction added to the trace.

    Raises:
        AssertionError: nothing was raised, the message does not match, or ``sch`` changed.
    """
    mod, n = sch.mod, len(sch.trace.insts)
    try:
        fn()
    except ScheduleError as err:
        if not re.search(match, str(err)):
            raise AssertionError(
                f"Regex pattern did not match.\n  Regex: {match!r}\n  Input: {str(err)!r}"
            ) from err
    else:
        raise AssertionError(f"expected a ScheduleError matching {match!r}; nothing was raised")
    assert sch.mod is mod, "the refused primitive replaced the schedule's module"
    assert len(sch.trace.insts) == n, "the refused primitive added an instruction to the trace"


def build_and_run(
    func_or_mod: PrimFunc | IRModule, *arrays: np.ndarray, target: Target | str = "cpu"
) -> tuple[str, list[np.ndarray]]:
    """Build for ``target`` and call the kernel on copies of ``arrays`` (outputs included).

    Returns:
        The generated C source and the arguments after the call (``arrays`` are not
        touched).
    """
    lib = build(func_or_mod, target)
    assert isinstance(lib, Module), f"expected a CPU module, built {type(lib).__name__}"
    args = [a.copy() for a in arrays]
    lib(*args)
    return lib.get_source(), args


def build_and_check(
    func_or_mod: PrimFunc | IRModule,
    inputs: list[np.ndarray],
    expected: np.ndarray,
    *,
    target: Target | str = "cpu",
    rtol: float = 1e-4,
    atol: float = 1e-4,
) -> str:
    """Build, call on ``inputs`` and a zeroed float32 output shaped as ``expected`` (the
    last parameter), and assert the output is ``expected`` within ``rtol`` and ``atol``.

    Returns:
        The generated C source, for checks on what the code generator wrote.
    """
    out = np.zeros(expected.shape, "float32")
    src, args = build_and_run(func_or_mod, *inputs, out, target=target)
    np.testing.assert_allclose(args[-1], expected, rtol=rtol, atol=atol)
    return src
