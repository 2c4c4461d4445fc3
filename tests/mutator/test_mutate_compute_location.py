"""MutateComputeLocation: another legal location for a sampled compute-at."""

import numpy as np
import pytest

from metaschedule import te
from metaschedule.mutator import MutateComputeLocation
from metaschedule.schedule import Schedule
from metaschedule.schedule.primitives.compute_location import compute_location_candidates
from metaschedule.tir.interpreter import interpret
from metaschedule.tune_context import TuneContext


def chain(n=8):
    a = te.placeholder((n, n), "float32", "A")
    b = te.compute((n, n), lambda i, j: a[i, j] * 2.0, name="B")
    c = te.compute((n, n), lambda i, j: b[i, j] + 1.0, name="C")
    return te.create_prim_func([a, c])


def template(func, decision):
    sch = Schedule(func, seed=0)
    b, c = sch.get_block("B"), sch.get_block("C")
    i, _j = sch.get_loops(c)
    sch.split(i, [2, 4])
    sch.compute_at(b, sch.sample_compute_location(b, decision=decision))
    sch.enter_postproc()
    return sch


def location(trace):
    return next(trace.decisions[i] for i in trace.insts if i.kind.name == "SampleComputeLocation")


@pytest.fixture
def mutator():
    m = MutateComputeLocation()
    m._initialize_with_tune_context(TuneContext(chain(), target="cpu", rand_state=0))
    return m


def test_moves_to_every_other_legal_location(mutator):
    func = mutator._mod
    probe = Schedule(func, seed=0)
    c = probe.get_block("C")
    probe.split(probe.get_loops(c)[0], [2, 4])
    fname, realize = probe._block(probe.get_block("B"))
    legal = {d for d, _ in compute_location_candidates(probe.state, fname, realize)}
    assert legal == {-2, -1, 0, 1, 2}
    sch = template(func, 1)
    rng = np.random.default_rng(0)
    a = np.random.default_rng(1).random((8, 8), dtype=np.float32)
    seen = set()
    for _ in range(25):
        new = mutator.apply(sch.trace, rng)
        seen.add(location(new))
        replayed = Schedule(func, seed=2)
        new.apply_to_schedule(replayed, remove_postproc=True)
        assert location(replayed.trace) == location(new)
        out = np.zeros((8, 8), np.float32)
        interpret(replayed.mod["main"], a, out)
        np.testing.assert_allclose(out, a * 2.0 + 1.0)
    assert seen == legal - {1}


def test_no_alternative_gives_none(mutator):
    sch = Schedule(mutator._mod, seed=0)
    sch.sample_compute_location(sch.get_block("C"))  # an output block: only "root"
    assert mutator.apply(sch.trace, 0) is None
    assert mutator.apply(Schedule(mutator._mod).trace, 0) is None


def test_needs_the_workload():
    with pytest.raises(ValueError, match="TuneContext"):
        MutateComputeLocation().apply(template(chain(), 0).trace, 0)
