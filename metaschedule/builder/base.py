"""The builder interface: compile candidate modules into loadable artifacts."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .. import registry
from ..codegen.options import CodegenOptions
from ..tir.function import IRModule, as_module

if TYPE_CHECKING:
    from ..target import Target

__all__ = ["Builder", "BuilderInput", "BuilderResult", "PyBuilder", "create", "remove_artifact"]


@dataclass(frozen=True, eq=False)
class BuilderInput:
    """What to build: a module (a PrimFunc becomes ``main``), a target, optional params,
    and the code generator's options.

    ``params`` maps parameter names to numpy arrays to bind as constants; the default
    build of a TIR module has nothing to bind and ignores them. ``codegen_options``
    (default: those in force where the input is made,
    :meth:`~metaschedule.codegen.options.CodegenOptions.current`) are applied in the
    builder's worker, a fresh interpreter that would otherwise build with the defaults.
    """

    mod: IRModule
    target: Target
    params: dict[str, Any] | None = None
    codegen_options: CodegenOptions = field(default_factory=CodegenOptions.current)

    def __post_init__(self):
        object.__setattr__(self, "mod", as_module(self.mod))


@dataclass(frozen=True)
class BuilderResult:
    """The outcome of one build: the artifact's path, or an error message saying why not."""

    artifact_path: str | None
    error_msg: str | None

    def __post_init__(self):
        if (self.artifact_path is None) == (self.error_msg is None):
            raise ValueError(
                "a BuilderResult has exactly one of artifact_path and error_msg, got "
                f"artifact_path={self.artifact_path!r}, error_msg={self.error_msg!r}"
            )


class Builder(ABC):
    """The abstract builder interface."""

    @abstractmethod
    def build(self, build_inputs: list[BuilderInput]) -> list[BuilderResult]:
        """Build every input; one result per input, in order. Failures are results too."""

    @staticmethod
    def create(
        kind: Literal["local", "dask"] | str = "local", *args: Any, **kwargs: Any
    ) -> Builder:
        """Create a builder of a registered kind ("local", "dask"; see
        :mod:`metaschedule.registry`).

        Raises:
            ValueError: an unknown kind (the message lists the known ones).
        """
        return registry.create("builder", kind, *args, **kwargs)


class PyBuilder(Builder):
    """The base for builders written in Python: subclass it and implement ``build``.

    Decorate subclasses with ``@ms.derived_object`` as in TVM (here it checks that
    ``build`` is implemented).
    """


create = Builder.create


def remove_artifact(path: str | None) -> None:
    """Remove a built artifact (a file; anything else is left alone) and its folder when
    that is left empty. Errors are ignored: the file may be gone already or not ours."""
    if not path or not os.path.isfile(path):
        return
    try:
        os.remove(path)
        os.rmdir(os.path.dirname(path) or ".")
    except OSError:
        pass
