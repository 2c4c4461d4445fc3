"""The space generator interface: turn a workload into design spaces.

A design space is a Schedule whose trace contains sampling instructions; replaying the
trace with other decisions gives other points of the space. A space generator also owns
the schedule rules, postprocessors and mutator probabilities of its tuning task; with
``"from-target"`` they are the defaults of the TuneContext's target, filled in when the
generator is initialised with the context.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Union

import numpy as np

from .. import registry
from ..mutator import Mutator
from ..postproc import Postproc
from ..schedule import Schedule
from ..schedule_rule import ScheduleRule

if TYPE_CHECKING:
    from ..target import Target
    from ..tir.function import IRModule

__all__ = [
    "PySpaceGenerator",
    "ScheduleFnType",
    "SpaceGenerator",
    "create",
    "rule_kind_from_target",
]

ScheduleFnType = Callable[[Schedule], Schedule | list[Schedule] | None]
_Kind = Literal["llvm", "cuda", "cuda-tensorcore", "hexagon", "from-target"]
ScheduleRuleType = list[ScheduleRule] | _Kind
PostprocType = list[Postproc] | _Kind
MutatorProbType = dict[Mutator, float] | _Kind


def rule_kind_from_target(target: Target) -> str:
    """The kind of default rules for ``target``: "llvm" for cpu, "cuda" for cuda."""
    kinds = {"cpu": "llvm", "cuda": "cuda"}
    if target.kind not in kinds:
        raise ValueError(
            f"no default schedule rules for target kind {target.kind!r}; known: {', '.join(kinds)}"
        )
    return kinds[target.kind]


class SpaceGenerator(ABC):
    """Generates design spaces; holds the rules, postprocessors and mutators of a task.

    Args:
        sch_rules: schedule rules, a kind ("llvm", ...) for its defaults, or "from-target".
        postprocs: postprocessors, a kind, or "from-target".
        mutator_probs: mutators with their probabilities, a kind, or "from-target".

    With "from-target" and a context without a target, the lists are empty.
    """

    ScheduleFnType = ScheduleFnType
    SpaceGeneratorType = Union[
        "SpaceGenerator", ScheduleFnType, Literal["post-order-apply", "union"]
    ]

    # None until known ("from-target" before initialisation); class defaults so that user
    # subclasses that skip ``super().__init__`` still work.
    sch_rules: list[ScheduleRule] | None = None
    postprocs: list[Postproc] | None = None
    mutator_probs: dict[Mutator, float] | None = None
    _rng: np.random.Generator | None = None

    def __init__(
        self,
        sch_rules: ScheduleRuleType = "from-target",
        postprocs: PostprocType = "from-target",
        mutator_probs: MutatorProbType = "from-target",
    ) -> None:
        self.sch_rules = _normalize(sch_rules, ScheduleRule, "sch_rules")
        self.postprocs = _normalize(postprocs, Postproc, "postprocs")
        self.mutator_probs = _normalize_probs(mutator_probs)

    def _initialize_with_tune_context(self, context: Any) -> None:
        """Fill "from-target" parts from the context's target, initialise them, and fork
        this generator's random stream from the context."""
        target = getattr(context, "target", None)
        kind = rule_kind_from_target(target) if target is not None else None
        if self.sch_rules is None:
            self.sch_rules = ScheduleRule.create(kind) if kind else []
        if self.postprocs is None:
            self.postprocs = Postproc.create(kind) if kind else []
        if self.mutator_probs is None:
            self.mutator_probs = Mutator.create(kind) if kind else {}
        for part in [*self.sch_rules, *self.postprocs, *self.mutator_probs]:
            part._initialize_with_tune_context(context)
        self._rng = np.random.default_rng(context.fork_seed())

    @abstractmethod
    def generate_design_space(self, mod: IRModule) -> list[Schedule]:
        """The design spaces of ``mod``: schedules whose traces hold sampling decisions."""

    def clone(self) -> SpaceGenerator:
        """An independent copy: rules, postprocessors and mutators cloned; the random
        stream is forked again when the copy is initialised."""
        new = copy.copy(self)
        if self.sch_rules is not None:
            new.sch_rules = [r.clone() for r in self.sch_rules]
        if self.postprocs is not None:
            new.postprocs = [p.clone() for p in self.postprocs]
        if self.mutator_probs is not None:
            new.mutator_probs = {m.clone(): p for m, p in self.mutator_probs.items()}
        new._rng = None
        return new

    def _fresh_schedule(self, mod: IRModule) -> Schedule:
        """A schedule of ``mod`` seeded from this generator's stream."""
        if self._rng is None:  # used without a TuneContext
            self._rng = np.random.default_rng()
        return Schedule(mod, seed=int(self._rng.integers(2**31 - 1)))

    @staticmethod
    def create(
        kind: Literal["post-order-apply", "union"] | str | ScheduleFnType = "post-order-apply",
        *args: Any,
        **kwargs: Any,
    ) -> SpaceGenerator:
        """Create a space generator: "post-order-apply", "union" (or another registered
        kind, see :mod:`metaschedule.registry`), or a schedule function (a
        :class:`ScheduleFn`, registered as "schedule-fn").

        Raises:
            ValueError: an unknown kind (the message lists the known ones).
        """
        if callable(kind):
            return registry.create("space_generator", "schedule-fn", kind, *args, **kwargs)
        return registry.create("space_generator", kind, *args, **kwargs)

    def __str__(self) -> str:
        return type(self).__name__


class PySpaceGenerator(SpaceGenerator):
    """The base for space generators written by users (TVM's name; no FFI here).

    Subclass it, decorate with ``@derived_object`` and implement
    :meth:`generate_design_space`.
    """


create = SpaceGenerator.create


def _normalize(value: Any, cls: type, what: str) -> list | None:
    if isinstance(value, str):
        if value == "from-target":
            return None
        return cls.create(value)
    if isinstance(value, (list, tuple)):
        bad = [x for x in value if not isinstance(x, cls)]
        if bad:
            raise TypeError(f"{what} must hold {cls.__name__} objects, got {bad[0]!r}")
        return list(value)
    raise TypeError(
        f"{what} must be a list of {cls.__name__}, a kind or 'from-target', got {value!r}"
    )


def _normalize_probs(value: Any) -> dict[Mutator, float] | None:
    if isinstance(value, str):
        if value == "from-target":
            return None
        return Mutator.create(value)
    if isinstance(value, dict):
        out = {}
        for m, p in value.items():
            if not isinstance(m, Mutator):
                raise TypeError(f"mutator_probs keys must be Mutators, got {m!r}")
            if not float(p) >= 0:
                raise ValueError(f"mutator probability of {m} must be >= 0, got {p!r}")
            out[m] = float(p)
        return out
    raise TypeError(
        f"mutator_probs must be a dict of Mutator to probability, a kind or "
        f"'from-target', got {value!r}"
    )
