"""Dummy builder and runner with deterministic timings, and faulty worker functions.

``DummyBuilder`` compiles nothing: each artifact path names the module's structural hash.
``DummyRunner`` turns that path into run times with a fixed function of the path, so the
same schedule always "runs" equally fast and search strategies and task schedulers can be
tested without a compiler. The worker-side functions at the end are module-level, so that
worker processes can import them, e.g.
``LocalBuilder(f_build="metaschedule.testing.dummy_object.fault_injecting_build")``.
"""

from __future__ import annotations

import ctypes
import hashlib
import time
from collections.abc import Callable
from typing import Any

from ..builder import BuilderInput, BuilderResult, PyBuilder
from ..builder.local_builder import default_build
from ..runner import PyRunner, RunnerFuture, RunnerInput, RunnerResult
from ..tir.structural import structural_hash
from ..utils import derived_object

__all__ = [
    "DummyBuilder",
    "DummyRunner",
    "dummy_run_secs",
    "fault_injecting_build",
    "interval_run_evaluator",
    "with_fault",
]

DUMMY_PREFIX = "dummy://"


@derived_object
class DummyBuilder(PyBuilder):
    """A builder that compiles nothing; ``artifact_path`` is ``"dummy://<structural hash>"``."""

    def build(self, build_inputs: list[BuilderInput]) -> list[BuilderResult]:
        return [
            BuilderResult(f"{DUMMY_PREFIX}{structural_hash(inp.mod)}", None) for inp in build_inputs
        ]


def dummy_run_secs(artifact_path: str) -> list[float]:
    """A fixed run time in [1 ms, 11 ms) derived from the path (three equal repeats)."""
    digest = hashlib.blake2b(artifact_path.encode("utf-8"), digest_size=8).digest()
    fraction = int.from_bytes(digest, "big") / 2**64
    return [1e-3 * (1.0 + 10.0 * fraction)] * 3


@derived_object
class DummyRunner(PyRunner):
    """A runner that measures nothing: run times are ``f_run_secs(artifact_path)``.

    Args:
        f_run_secs: maps an artifact path to run times (default :func:`dummy_run_secs`);
            it may raise to simulate a failed run, which becomes the result's error.
        polls_until_done: how many ``done()`` calls each future answers False before it
            is done, to exercise callers that poll; ``result()`` never waits.
    """

    def __init__(
        self, f_run_secs: Callable[[str], list[float]] | None = None, polls_until_done: int = 0
    ):
        self.f_run_secs = f_run_secs or dummy_run_secs
        self.polls_until_done = polls_until_done
        self.inputs: list[RunnerInput] = []  # everything run, for assertions

    def run(self, runner_inputs: list[RunnerInput]) -> list[RunnerFuture]:
        self.inputs.extend(runner_inputs)
        return [self._future(inp) for inp in runner_inputs]

    def _future(self, inp: RunnerInput) -> RunnerFuture:
        try:
            result = RunnerResult(list(self.f_run_secs(inp.artifact_path)), None)
        except Exception as err:  # noqa: BLE001 - the double reports failures as data
            result = RunnerResult(None, f"DummyRunner: {type(err).__name__}: {err}")
        polls = [self.polls_until_done]

        def done() -> bool:
            if polls[0] > 0:
                polls[0] -= 1
                return False
            return True

        return RunnerFuture(done, lambda: result)


# --------------------------------------------------------------------------- worker-side
FAULT_ATTR = "testing.fault"


def with_fault(func: Any, fault: str) -> Any:
    """``func`` marked so that :func:`fault_injecting_build` fails on it: ``fault`` is
    "crash" (segfault the worker), "hang" (never return) or "raise" (an exception)."""
    if fault not in ("crash", "hang", "raise"):
        raise ValueError(f"fault must be 'crash', 'hang' or 'raise', got {fault!r}")
    return func.with_attr(FAULT_ATTR, fault)


def fault_injecting_build(mod: Any, target: Any, params: Any) -> Any:
    """An f_build that fails as its module's functions are marked by :func:`with_fault`,
    and otherwise builds with the default build."""
    faults = {f.attrs.get(FAULT_ATTR) for f in mod.functions.values()}
    if "crash" in faults:
        ctypes.string_at(0)
    if "hang" in faults:
        while True:
            time.sleep(1)
    if "raise" in faults:
        raise RuntimeError(f"cannot build {list(mod)}: injected failure")
    return default_build(mod, target, params)


def interval_run_evaluator(
    rt_mod: Any, device: str, evaluator_config: Any, repeated_args: Any
) -> list[float]:
    """An f_run_evaluator that times nothing: it sleeps 0.1 s and returns its own
    ``[start, end]`` wall-clock times, so tests can check that measurements never overlap."""
    start = time.time()
    time.sleep(0.1)
    return [start, time.time()]
