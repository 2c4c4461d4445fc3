"""Every switch and threshold of the C code generator, as one value that travels.

The code generator's decisions are steered by module constants (``c_accumulate.
JAM_SMALL_TILES``, ``c_codegen.AUTO_VECTORIZE``, ...), each documented where it is read.
:class:`CodegenOptions` gathers all of them into one frozen value: the options in force
in the tuning process are captured with each build request
(:class:`~metaschedule.builder.BuilderInput`) and applied in the builder's worker, a
fresh interpreter that would otherwise build with the defaults::

    opts = CodegenOptions(jam_small_tiles=False)      # the defaults, one switch changed
    with opts.applied():
        lib = ms.build(sch.mod, "llvm")               # or: ms.build(..., options=opts)
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from threading import RLock
from typing import Any

__all__ = ["CodegenOptions"]

#: module (of metaschedule.codegen) -> the switches and thresholds it reads
SWITCHES: dict[str, tuple[str, ...]] = {
    "c_accumulate": (
        "HOIST_INNER_REDUCTIONS",
        "SPLIT_LARGE_TILES",
        "JAM_SMALL_TILES",
        "MIN_SIMD_REDUCTION",
        "STRAIGHT_STEPS",
        "STRAIGHT_STATEMENTS",
        "MIN_STRAIGHT_LANES",
        "SHARE_BROADCASTS",
        "ORDER_UPDATES",
        "MERGE_CONTIGUOUS",
        "FUSE_INIT",
        "MAX_INIT_ELEMENTS",
        "TENSORIZED_TILES",
    ),
    "c_autovector": ("MIN_LANES", "MAX_GATHER_BYTES", "MAX_WIDENED_VECTORS"),
    "c_codegen": (
        "STACK_ALLOC_LIMIT",
        "EXPLICIT_UNROLL_STEPS",
        "EXPLICIT_TILE_STEPS",
        "AUTO_UNROLL_STEPS",
        "AUTO_UNROLL_PIECES",
        "VERSION_GUARDS",
        "AUTO_VECTORIZE",
    ),
    "c_invariant": ("HOIST_INVARIANT_LOADS", "MAX_INVARIANT_SHARE"),
    "c_parallel": ("SHARED_REGIONS",),
    "c_ir": ("UNFUSE_UNROLL",),
    "c_vector": ("EXPLICIT_CHUNKS", "VECTORIZE_OUTPUTS", "MIN_OUTPUT_LANES"),
    "c_versioning": (
        "MIN_GUARDS_PER_TEST",
        "MIN_INVARIANT_GUARDS",
        "MAX_BODY_NODES",
        "MAX_BODY_STEPS",
        "MIN_INTERIOR_SHARE",
    ),
    "c_interior": ("SHARE_POINTS",),
}
#: option name (the constant's, in lower case) -> (module, constant)
_WHERE = {name.lower(): (mod, name) for mod, names in SWITCHES.items() for name in names}
_LOCK = RLock()  # one build's options at a time in a process


def _module(name: str) -> Any:
    return importlib.import_module(f"metaschedule.codegen.{name}")


def _read_all() -> dict[str, Any]:
    return {key: getattr(_module(mod), const) for key, (mod, const) in _WHERE.items()}


@dataclass(frozen=True)
class CodegenOptions:
    """The code generator's switches and thresholds: the defaults, with ``overrides``
    (keyword arguments named as the constants in lower case: ``jam_small_tiles=False``).

    Raises:
        ValueError: an unknown option, or a value of another type than the default's.
    """

    items: tuple[tuple[str, Any], ...]

    def __init__(self, **overrides: Any) -> None:
        values = dict(defaults())
        for key, value in overrides.items():
            if key not in values:
                raise ValueError(
                    f"unknown code generator option {key!r}; known: {', '.join(sorted(values))}"
                )
            default = values[key]
            if isinstance(default, bool) != isinstance(value, bool) or not isinstance(
                value, (int, float)
            ):
                raise ValueError(
                    f"code generator option {key} takes a value like {default!r}, got {value!r}"
                )
            values[key] = value
        object.__setattr__(self, "items", tuple(sorted(values.items())))

    @staticmethod
    def current() -> CodegenOptions:
        """The options in force in this process now (the module constants)."""
        return CodegenOptions(**_read_all())

    def __getitem__(self, key: str) -> Any:
        return dict(self.items)[key]

    def changed(self) -> dict[str, Any]:
        """The options that differ from the defaults."""
        return {k: v for k, v in self.items if defaults()[k] != v}

    @contextmanager
    def applied(self) -> Iterator[CodegenOptions]:
        """Set the module constants to these options for the ``with`` block (then put
        back what was there), holding a process-wide lock so that two threads never
        build with each other's options."""
        with _LOCK:
            saved = _read_all()
            try:
                for key, value in self.items:
                    mod, const = _WHERE[key]
                    setattr(_module(mod), const, value)
                yield self
            finally:
                for key, value in saved.items():
                    mod, const = _WHERE[key]
                    setattr(_module(mod), const, value)

    def __repr__(self) -> str:
        changed = ", ".join(f"{k}={v!r}" for k, v in self.changed().items())
        return f"CodegenOptions({changed})"


_DEFAULTS: dict[str, Any] = {}


def defaults() -> dict[str, Any]:
    """The defaults: the module constants as the package set them, read once, when the
    package has been imported (``metaschedule.codegen`` calls this last; the modules read
    here import this one, so it cannot read them while it is imported itself)."""
    if not _DEFAULTS:
        _DEFAULTS.update(_read_all())
    return _DEFAULTS
