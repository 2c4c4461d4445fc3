"""The check every schedule-primitive test runs on the schedule it built.

:func:`check_primitives` asserts what DESIGN.md promises of any accepted primitive
sequence: the module is well formed, it computes what the unscheduled function computes
(by the reference interpreter), and its trace replays to a structurally equal module both
through JSON and through its printed Python form.
"""

from __future__ import annotations

import json

import numpy as np

from .. import tir
from ..schedule import Schedule, Trace
from ..schedule.prepacked import prepacked_args
from ..tir.function import PrimFunc
from ..tir.interpreter import interpret
from ..tir.structural import structural_equal
from ..tir.verify import verify_well_formed

__all__ = ["check_primitives", "random_arguments", "replay_json", "replay_python"]


def random_arguments(func: PrimFunc, seed: int = 0) -> list[np.ndarray]:
    """One standard-normal array per parameter of ``func`` (cast to its dtype)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(p.static_shape()).astype(p.dtype) for p in func.params]


def replay_json(sch: Schedule, func: PrimFunc | tir.IRModule) -> Schedule:
    """``sch``'s trace through a JSON string, applied to a fresh schedule of ``func``."""
    trace = Trace.from_json(json.loads(json.dumps(sch.trace.as_json())))
    fresh = tir.Schedule(func)
    trace.apply_to_schedule(fresh, remove_postproc=False)
    return fresh


def replay_python(sch: Schedule, func: PrimFunc | tir.IRModule) -> Schedule:
    """``sch``'s trace printed as Python and executed on a fresh schedule of ``func``."""
    fresh = tir.Schedule(func)
    exec(str(sch.trace), {"tir": tir, "sch": fresh})
    return fresh


def check_primitives(
    sch: Schedule,
    func: PrimFunc,
    *,
    rtol: float = 1e-5,
    atol: float = 1e-5,
    seed: int = 0,
) -> None:
    """Assert that ``sch`` (built from ``func``) is well formed, computes what ``func``
    computes, and that its trace round-trips through JSON and through Python text.

    The scheduled function runs on the same inputs (pre-packed where it takes a weight in
    another layout) with its last argument (the output) filled with a sentinel, so an
    element it forgets to write is caught.

    Raises:
        AssertionError: naming which of the checks failed.
    """
    verify_well_formed(sch.mod)
    want = random_arguments(func, seed)
    interpret(func, *want)
    got = random_arguments(func, seed)
    got[-1][...] = np.nan if np.issubdtype(got[-1].dtype, np.floating) else 123
    packed = prepacked_args(sch.mod["main"])  # weights the scheduled function takes re-laid out
    interpret(
        sch.mod["main"], *[packed[i].pack(a) if i in packed else a for i, a in enumerate(got)]
    )
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_allclose(
            g, w, rtol=rtol, atol=atol, err_msg=f"argument {i} differs from the unscheduled run"
        )
    for how, replay in (("JSON", replay_json), ("Python", replay_python)):
        fresh = replay(sch, func)
        assert structural_equal(fresh.mod, sch.mod), (
            f"the trace replayed through {how} gives another module:\n"
            f"{sch.trace}\n{fresh.mod}\n!=\n{sch.mod}"
        )
