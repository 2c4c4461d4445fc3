"""``MutateComputeLocation``: move a block to another legal compute-at location."""

from __future__ import annotations

import numpy as np

from ..schedule import Instruction, Schedule, Trace
from ..schedule.primitives.compute_location_candidates import compute_location_candidates
from .base import Mutator

__all__ = ["MutateComputeLocation"]


class MutateComputeLocation(Mutator):
    """Mutates the decision of a ``SampleComputeLocation`` (as TVM's).

    The trace is replayed on the workload (the TuneContext's ``mod``); at each
    ``SampleComputeLocation`` the legal locations of its block are listed at that point
    of the replay (-2 inline, -1 root, i >= 0 a loop, see
    :meth:`~metaschedule.schedule.Schedule.sample_compute_location`). One instruction with
    another legal location is picked uniformly, then one of its other locations. What a
    replay finds is remembered per trace (:class:`~.base.ReplayMemo`).
    """

    def apply(
        self, trace: Trace, rand_state: np.random.Generator | int | None = None
    ) -> Trace | None:
        rng = self._generator(rand_state)
        if not any(inst.kind.name == "SampleComputeLocation" for inst in trace.insts):
            return None
        seed = int(rng.integers(2**31 - 1))
        candidates = self._replay_memo().get(
            trace, self._workload(), None, lambda: self._candidates(trace, seed)
        )
        if not candidates:
            return None
        inst, locations = candidates[int(rng.integers(len(candidates)))]
        return trace.with_decision(
            inst, locations[int(rng.integers(len(locations)))], remove_postproc=True
        )

    def _candidates(self, trace: Trace, seed: int) -> list[tuple[Instruction, list[int]]]:
        sch = Schedule(self._workload(), seed=seed, error_render_level="none")
        found: list[tuple[Instruction, list[int]]] = []

        def provider(inst: Instruction, inputs: list, attrs: list, decision):
            if inst.kind.name == "SampleComputeLocation" and decision is not None:
                fname, realize = sch._block(inputs[0])
                legal = [d for d, _ in compute_location_candidates(sch.state, fname, realize)]
                others = [d for d in legal if d != int(decision)]
                if others:
                    found.append((inst, others))
            return decision

        trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=provider)
        return found
