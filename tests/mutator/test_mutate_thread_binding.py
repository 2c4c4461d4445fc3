"""MutateThreadBinding: the threads per block AutoBind sampled."""

import numpy as np

from metaschedule import te
from metaschedule.mutator import MutateThreadBinding
from metaschedule.mutator.mutate_thread_binding import thread_binding_samples
from metaschedule.schedule import Schedule
from metaschedule.schedule_rule import AutoBind
from metaschedule.tir.interpreter import interpret


def _bound(seed=0):
    a = te.placeholder((64, 64), "float32", "A")
    func = te.create_prim_func([a, te.compute((64, 64), lambda i, j: a[i, j] + 1, name="B")])
    sch = Schedule(func, seed=seed)
    other = sch.sample_categorical([3, 5], [0.5, 0.5])  # a factor of a serial split only
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, other])
    AutoBind(thread_extents=[32, 64, 128]).apply(sch, sch.get_block("B"))
    return func, sch


def _threads(sch):
    return next(
        sch.get(lp).extent.value
        for lp in sch.get_loops(sch.get_block("B"))
        if sch.get(lp).thread_binding == "threadIdx.x"
    )


def test_mutates_only_the_thread_extent_sample():
    func, sch = _bound()
    (sample,) = thread_binding_samples(sch.trace)
    assert list(sample.attrs[0]) == [32, 64, 128]
    before = sch.trace.decisions[sample]
    mutated = MutateThreadBinding().apply(sch.trace, 0)
    assert mutated is not None
    changed = [i for i in mutated.insts if mutated.decisions.get(i) != sch.trace.decisions.get(i)]
    assert changed == [sample] and mutated.decisions[sample] != before
    new = Schedule(func, seed=0)
    mutated.apply_to_schedule(new, remove_postproc=True)
    assert _threads(new) != _threads(sch)
    a = np.random.default_rng(0).random((64, 64), dtype=np.float32)
    b = np.zeros_like(a)
    interpret(new.mod, a, b)
    np.testing.assert_array_equal(b, a + 1)


def test_nothing_to_mutate_without_a_sampled_binding():
    a = te.placeholder((8,), "float32", "A")
    func = te.create_prim_func([a, te.compute((8,), lambda i: a[i] + 1, name="B")])
    sch = Schedule(func)
    AutoBind(thread_extents=[32]).apply(sch, sch.get_block("B"))  # one candidate: no sample
    assert MutateThreadBinding().apply(sch.trace, np.random.default_rng(0)) is None
