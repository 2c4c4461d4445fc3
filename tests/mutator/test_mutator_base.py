"""Mutator.create, PyMutator, random states and cloning."""

import numpy as np
import pytest

from metaschedule.mutator import (
    MutateComputeLocation,
    MutateParallel,
    MutateTileSize,
    MutateUnroll,
    Mutator,
    PyMutator,
)
from metaschedule.mutator.base import as_generator
from metaschedule.schedule import Schedule
from metaschedule.testing.tuning_records import matmul
from metaschedule.utils import derived_object


def test_create_gives_tvm_defaults():
    llvm = Mutator.create("llvm")
    assert {type(m): p for m, p in llvm.items()} == {
        MutateTileSize: 0.9,
        MutateComputeLocation: 0.05,
        MutateUnroll: 0.03,
        MutateParallel: 0.02,
    }
    assert next(m for m in llvm if isinstance(m, MutateParallel)).max_jobs_per_core == 16
    assert {type(m) for m in Mutator.create("cpu")} == {type(m) for m in llvm}
    with pytest.raises(ValueError, match="llvm"):  # tensor-core mutators are not built yet
        Mutator.create("cuda-tensorcore")
    with pytest.raises(ValueError, match="llvm"):
        Mutator.create("tpu")


def test_rand_state_forms():
    g = np.random.default_rng(0)
    assert as_generator(g) is g
    assert as_generator(5).integers(1000) == as_generator(5).integers(1000)
    assert isinstance(as_generator(-1), np.random.Generator)
    with pytest.raises(TypeError, match="rand_state"):
        as_generator("seed")
    sch = Schedule(matmul(8), seed=0)
    i = sch.get_loops(sch.get_block("C"))[0]
    sch.split(i, sch.sample_perfect_tile(i, n=3))
    assert MutateTileSize().apply(sch.trace) is not None  # no context: an OS-seeded stream


def test_clone_is_independent():
    m = MutateParallel(max_jobs_per_core=4)
    m._rng = np.random.default_rng(0)
    twin = m.clone()
    assert twin is not m and twin.max_jobs_per_core == 4 and twin._rng is None


def test_py_mutator_must_implement_apply():
    @derived_object
    class Identity(PyMutator):
        def apply(self, trace, rand_state=None):
            return trace

    assert str(Identity()) == "Identity"
    with pytest.raises(TypeError, match="apply"):

        @derived_object
        class Nothing(PyMutator):
            pass
