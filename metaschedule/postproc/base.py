"""The postprocessor interface: finish (or reject) a schedule sampled from a design space.

Search strategies run every postprocessor on each schedule they replay; one that returns
False rejects the schedule. The default postprocessors of each target kind are registered
in :mod:`metaschedule.registry` (family ``"postproc"``, see :mod:`.default_postprocs`);
``Postproc.create(kind)`` of a kind without registered postprocessors is an error, not an
empty list.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from .. import registry

if TYPE_CHECKING:
    from ..schedule import Schedule

__all__ = ["Postproc", "PyPostproc", "create", "register_default_postprocs"]


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
    def create(kind: Literal["llvm", "cuda", "cuda-tensorcore", "hexagon"] | str) -> list[Postproc]:
        """The default postprocessors of a target kind, a fresh list each call.

        Raises:
            ValueError: no postprocessors are registered for ``kind`` ("llvm"/"cpu" are
                today); the message lists the kinds that are.
        """
        return list(registry.create("postproc", kind))

    def __str__(self) -> str:
        return type(self).__name__


class PyPostproc(Postproc):
    """The base for postprocessors written by users (TVM's name; no FFI here).

    Subclass it, decorate with ``@derived_object`` and implement :meth:`apply`.
    """


def register_default_postprocs(kind: str, factory: Callable[[], list[Postproc]] | str) -> None:
    """Make ``Postproc.create(kind)`` call ``factory`` (a function, or a "module:function"
    string imported on first use). Replaces an earlier registration.

    The same as ``registry.register("postproc", kind, factory, replace=True)``.
    """
    registry.register("postproc", kind, registry.lazy(factory), replace=True)


create = Postproc.create
