"""``MutateThreadBinding``: resample the threads per block that AutoBind chose."""

from __future__ import annotations

import numpy as np

from ..schedule import Trace
from ..schedule.instruction import Instruction
from ..schedule.rv import RV
from .base import Mutator, pre_postproc_insts, resample_categorical

__all__ = ["MutateThreadBinding", "thread_binding_samples"]


class MutateThreadBinding(Mutator):
    """Mutates the extent of a thread binding (as TVM's MutateThreadBinding).

    The candidates are the ``SampleCategorical`` instructions whose output is a factor of
    a ``Split`` whose loop at that position is then bound to ``threadIdx.x`` (what
    AutoBind records). One is picked uniformly and its decision redrawn among the other
    candidates, weighted by the instruction's probabilities. None if there is none.
    """

    def apply(
        self, trace: Trace, rand_state: np.random.Generator | int | None = None
    ) -> Trace | None:
        rng = self._generator(rand_state)
        samples = thread_binding_samples(trace)
        if not samples:
            return None
        return resample_categorical(trace, samples[int(rng.integers(len(samples)))], rng)


def thread_binding_samples(trace: Trace) -> list[Instruction]:
    """SampleCategorical instructions that set the extent of a ``threadIdx.x`` loop."""
    sampled: dict[int, Instruction] = {}  # id(ExprRV) -> its SampleCategorical
    split_of: dict[int, Instruction] = {}  # id(LoopRV) -> the sample that sized it
    found: list[Instruction] = []
    for inst in pre_postproc_insts(trace):
        name = inst.kind.name
        if name == "SampleCategorical":
            sampled[id(inst.outputs[0])] = inst
        elif name == "Split":
            for factor, loop in zip(inst.inputs[1:], inst.outputs):
                if isinstance(factor, RV) and id(factor) in sampled:
                    split_of[id(loop)] = sampled[id(factor)]
        elif name == "Bind" and inst.attrs[0] == "threadIdx.x":
            sample = split_of.get(id(inst.inputs[0]))
            if sample is not None and all(s is not sample for s in found):
                found.append(sample)
    return found
