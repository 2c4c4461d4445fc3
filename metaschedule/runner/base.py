"""The runner interface: measure built artifacts, asynchronously.

``Runner.run`` returns one :class:`RunnerFuture` per input at once; the caller polls
``done()`` or blocks on ``result()`` per candidate, so building the next batch overlaps
measuring this one and no batch barrier leaves workers idle (seed PR #7877).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import registry
from ..arg_info import ArgInfo

__all__ = [
    "PyRunner",
    "PyRunnerFuture",
    "Runner",
    "RunnerFuture",
    "RunnerInput",
    "RunnerResult",
    "create",
]


@dataclass(frozen=True, eq=False)
class RunnerInput:
    """What to measure: a built artifact, the device type it runs on, its arguments."""

    artifact_path: str
    device_type: str
    args_info: list[ArgInfo]

    def __post_init__(self):
        object.__setattr__(self, "args_info", list(self.args_info))


@dataclass(frozen=True)
class RunnerResult:
    """The outcome of one measurement: run times in seconds, or an error message.

    Exactly one of the two is given. ``run_secs`` holds one number per repeat (and per
    allocated argument set). ``info`` (ours, optional) records how the times were taken:
    the measurement protocol and the host load seen meanwhile (see ``LocalRunner``).
    """

    run_secs: list[float] | None
    error_msg: str | None
    info: dict | None = field(default=None, compare=False)

    def __post_init__(self):
        if (self.run_secs is None) == (self.error_msg is None):
            raise ValueError(
                "a RunnerResult has exactly one of run_secs and error_msg, got "
                f"run_secs={self.run_secs!r}, error_msg={self.error_msg!r}"
            )
        if self.run_secs is not None:
            object.__setattr__(self, "run_secs", [float(s) for s in self.run_secs])


class RunnerFuture:
    """A handle on a measurement in flight, built from two functions.

    Args:
        f_done: returns whether the result is ready.
        f_result: returns the :class:`RunnerResult`, waiting for it if needed.
    """

    def __init__(
        self, f_done: Callable[[], bool], f_result: Callable[[], RunnerResult] | None = None
    ):
        self._f_done = f_done
        self._f_result = f_result

    def done(self) -> bool:
        """Whether the measurement has finished."""
        return bool(self._f_done())

    def result(self) -> RunnerResult:
        """The measurement's result; blocks until it is ready."""
        if self._f_result is None:
            raise NotImplementedError("this RunnerFuture was created without an f_result")
        return self._f_result()


class PyRunnerFuture(RunnerFuture, ABC):
    """The base for runner futures written in Python: implement ``done`` and ``result``."""

    def __init__(self):
        super().__init__(self.done, self.result)

    @abstractmethod
    def done(self) -> bool:
        """Whether the measurement has finished."""

    @abstractmethod
    def result(self) -> RunnerResult:
        """The measurement's result; blocks until it is ready."""


class Runner(ABC):
    """The abstract runner interface."""

    @abstractmethod
    def run(self, runner_inputs: list[RunnerInput]) -> list[RunnerFuture]:
        """Start measuring every input; return one future per input, in order, at once."""

    @staticmethod
    def create(kind: Literal["local", "rpc"] | str = "local", *args: Any, **kwargs: Any) -> Runner:
        """Create a runner of a registered kind ("local", "rpc"; see :mod:`metaschedule.registry`).

        Raises:
            ValueError: an unknown kind (the message lists the known ones).
        """
        return registry.create("runner", kind, *args, **kwargs)


class PyRunner(Runner):
    """The base for runners written in Python: subclass it and implement ``run``.

    Decorate subclasses with ``@ms.derived_object`` as in TVM.
    """


create = Runner.create
