"""The postprocessor interface: finish (or reject) a schedule sampled from a design space.

Search strategies run every postprocessor on each schedule they replay; one that returns
False rejects the schedule. The default postprocessors of each target kind are registered
with :func:`register_default_postprocs` by the modules that implement them; until a kind
has registered postprocessors, ``Postproc.create(kind)`` returns an empty list.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from ..schedule_rule.base import _build_defaults, _register

if TYPE_CHECKING:
    from ..schedule import Schedule

__all__ = ["Postproc", "PyPostproc", "create", "register_default_postprocs"]

#: kind -> a function building the default postprocessors, or "module:function"
_DEFAULT_POSTPROCS: dict[str, Callable[[], list[Postproc]] | str] = {}


class Postproc(ABC):
    """Rewrites a sampled schedule in place, or says it cannot be used."""

    def _initialize_with_tune_context(self, context: Any) -> None:
        """Read what the postprocessor needs from the TuneContext. Default: nothing."""

    @abstractmethod
    def apply(self, sch: Schedule) -> bool:
        """Post-process ``sch`` in place; False if the schedule must be discarded."""

    def clone(self) -> Postproc:
        """An independent copy (default: a deep copy)."""
        return copy.deepcopy(self)

    @staticmethod
    def create(kind: Literal["llvm", "cuda", "cuda-tensorcore", "hexagon"]) -> list[Postproc]:
        """The default postprocessors of a target kind (empty until some are registered).

        Raises:
            ValueError: ``kind`` is not one of ``"llvm"``, ``"cuda"``,
                ``"cuda-tensorcore"``, ``"hexagon"``.
        """
        return _build_defaults(_DEFAULT_POSTPROCS, kind, "postprocessor")

    def __str__(self) -> str:
        return type(self).__name__


class PyPostproc(Postproc):
    """The base for postprocessors written by users (TVM's name; no FFI here).

    Subclass it, decorate with ``@derived_object`` and implement :meth:`apply`.
    """


def register_default_postprocs(kind: str, factory: Callable[[], list[Postproc]] | str) -> None:
    """Make ``Postproc.create(kind)`` call ``factory`` (a function, or a "module:function"
    string imported on first use). Replaces an earlier registration."""
    _register(_DEFAULT_POSTPROCS, kind, factory)


create = Postproc.create
