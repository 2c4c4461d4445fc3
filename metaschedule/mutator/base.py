"""The mutator interface: change one decision of a trace to explore the design space.

Evolutionary search mutates the traces of good schedules and replays them. A mutator
returns a new trace (without its post-processing part) or None when it finds nothing to
change.

Randomness: ``apply(trace, rand_state)`` takes TVM's second argument as a
``numpy.random.Generator`` (the caller's stream, so a search stays reproducible from the
TuneContext's ``rand_state``), an integer seed, or None for the mutator's own generator
(forked from the TuneContext when it is initialised with one).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .. import registry
from ..schedule import Instruction, Schedule, Trace
from ..schedule.rv import RV

if TYPE_CHECKING:
    from ..tir.function import IRModule

__all__ = ["Mutator", "PyMutator", "ReplayMemo", "as_generator", "create"]


def as_generator(
    rand_state: np.random.Generator | int | None, default: np.random.Generator | None = None
) -> np.random.Generator:
    """A Generator from a Generator (itself), a seed (-1: from the OS) or None (``default``,
    else a fresh one from the OS)."""
    if isinstance(rand_state, np.random.Generator):
        return rand_state
    if rand_state is None:
        return default if default is not None else np.random.default_rng()
    if isinstance(rand_state, (int, np.integer)) and not isinstance(rand_state, bool):
        return np.random.default_rng(None if int(rand_state) == -1 else int(rand_state))
    raise TypeError(
        f"rand_state must be a numpy Generator, an int seed or None, got {rand_state!r}"
    )


class Mutator(ABC):
    """Mutates a trace; see the module docstring for ``rand_state``."""

    _rng: np.random.Generator | None = None
    _mod: IRModule | None = None
    _memo: ReplayMemo | None = None

    def _initialize_with_tune_context(self, context: Any) -> None:
        """Keep the workload and fork a random stream from the context."""
        self._mod = getattr(context, "mod", None)
        self._rng = np.random.default_rng(context.fork_seed())

    @abstractmethod
    def apply(
        self, trace: Trace, rand_state: np.random.Generator | int | None = None
    ) -> Trace | None:
        """A mutated copy of ``trace`` (post-processing removed), or None if no mutation
        applies."""

    def clone(self) -> Mutator:
        """An independent copy (its random stream is re-forked at initialisation)."""
        new = copy.copy(self)
        new._rng = None
        new._memo = None
        return new

    def _replay_memo(self) -> ReplayMemo:
        """This mutator's memo of what replays of traces found (:class:`ReplayMemo`)."""
        if self._memo is None:
            self._memo = ReplayMemo()
        return self._memo

    def _generator(self, rand_state: np.random.Generator | int | None) -> np.random.Generator:
        if rand_state is None and self._rng is None:
            self._rng = np.random.default_rng()
        return as_generator(rand_state, self._rng)

    def _workload(self) -> IRModule:
        if self._mod is None:
            raise ValueError(
                f"{type(self).__name__} replays traces on the workload: initialise it with a "
                "TuneContext that has a mod (TuneContext(mod, space_generator=...) does this "
                "for the space generator's mutators)"
            )
        return self._mod

    @staticmethod
    def create(
        kind: Literal["llvm", "cuda", "cuda-tensorcore", "hexagon"] | str,
    ) -> dict[Mutator, float]:
        """The default mutators of a target kind with their probabilities (TVM's).

        Registered today: "llvm" (alias "cpu"), in :mod:`.default_mutators`; the GPU and
        Hexagon lists are not built yet and are an error rather than an empty dict.

        Raises:
            ValueError: an unknown or unbuilt kind (the message lists the known ones).
        """
        return registry.create("mutator", kind)

    def __str__(self) -> str:
        return type(self).__name__


class PyMutator(Mutator):
    """The base for mutators written by users (TVM's name; no FFI here).

    Subclass it, decorate with ``@derived_object`` and implement :meth:`apply`.
    """


create = Mutator.create


# ----------------------------------------------------------------------------- helpers
# shared by the built-in mutators


def replay(mod: IRModule, trace: Trace, seed: int) -> Schedule:
    """``trace`` (without post-processing) replayed on a fresh schedule of ``mod``."""
    sch = Schedule(mod, seed=seed, error_render_level="none")
    trace.apply_to_schedule(sch, remove_postproc=True)
    return sch


def pre_postproc_insts(trace: Trace) -> list[Instruction]:
    """The instructions before the first post-processing marker."""
    out = []
    for inst in trace.insts:
        if inst.kind.is_postproc_marker:
            break
        out.append(inst)
    return out


def annotation_samples(trace: Trace, keys: Sequence[str]) -> list[Instruction]:
    """The SampleCategorical instructions whose output is the value of an ``Annotate``
    with one of ``keys``, each once, in trace order."""
    producer: dict[int, Instruction] = {}
    found: list[Instruction] = []
    for inst in pre_postproc_insts(trace):
        if inst.kind.name == "SampleCategorical":
            producer[id(inst.outputs[0])] = inst
        elif inst.kind.name == "Annotate" and inst.attrs[0] in keys:
            value = inst.inputs[1]
            sample = producer.get(id(value)) if isinstance(value, RV) else None
            if sample is not None and all(s is not sample for s in found):
                found.append(sample)
    return found


def resample_categorical(trace: Trace, inst: Instruction, rng: np.random.Generator) -> Trace | None:
    """``trace`` with the SampleCategorical ``inst`` given another decision, drawn with the
    instruction's probabilities among the other candidates (None if none has mass)."""
    decision = trace.get_decision(inst)
    probs = [float(p) for p in inst.attrs[1]]
    if decision is None or len(probs) < 2:
        return None
    others = [i for i in range(len(probs)) if i != int(decision)]
    mass = np.array([probs[i] for i in others])
    if not mass.sum() > 0:
        return None
    choice = others[int(rng.choice(len(others), p=mass / mass.sum()))]
    return trace.with_decision(inst, choice, remove_postproc=True)


class ReplayMemo:
    """What a mutator found by replaying a trace on the workload, remembered per trace.

    A :class:`~metaschedule.schedule.Trace` is immutable, so a result computed from a
    trace whose sampling instructions all carry their decision (the replay then draws no
    random number: the seed does not matter) is remembered by the trace's identity
    (the trace is kept alive, so its ``id`` stays unique) and the workload's. The search
    mutates the same good parents again and again; each is replayed once. At most
    ``max_size`` traces are kept (then the memo starts afresh).
    """

    def __init__(self, max_size: int = 256) -> None:
        self.max_size = max_size
        self._items: dict[tuple[int, Any], tuple[Trace, IRModule, Any]] = {}

    def get(self, trace: Trace, mod: IRModule, extra: Any, compute: Callable[[], Any]) -> Any:
        """``compute()``, or its result remembered for this trace, workload and ``extra``
        (a hashable value of the other inputs)."""
        key = (id(trace), extra)
        hit = self._items.get(key)
        if hit is not None and hit[0] is trace and hit[1] is mod:
            return hit[2]
        value = compute()
        if self.max_size > 0 and fully_decided(trace):
            if len(self._items) >= self.max_size:
                self._items.clear()
            self._items[key] = (trace, mod, value)
        return value


def fully_decided(trace: Trace) -> bool:
    """Whether every sampling instruction of ``trace`` (before post-processing) has its
    decision: its replay then draws no random number."""
    return all(
        inst in trace.decisions for inst in pre_postproc_insts(trace) if inst.kind.has_decision
    )
