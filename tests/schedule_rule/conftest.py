"""Workloads and checks shared by the schedule-rule tests."""

from __future__ import annotations

import numpy as np
import pytest

from metaschedule import te
from metaschedule.schedule import Schedule, Trace
from metaschedule.space_generator import PostOrderApply
from metaschedule.te import ops
from metaschedule.tir.interpreter import interpret
from metaschedule.tune_context import TuneContext

#: a fixed core count, so that parallel extents and rfactor decisions do not depend on
#: the machine running the tests
TARGET = "llvm -num-cores=2"


class Workloads:
    """Tiny workloads built with the te operator library."""

    @staticmethod
    def matmul(n=8, m=8, k=8):
        a = te.placeholder((n, k), "float32", "A")
        b = te.placeholder((k, m), "float32", "B")
        return te.create_prim_func([a, b, ops.matmul(a, b)])

    @staticmethod
    def conv2d(relu=False):
        """conv2d_nhwc with padding 1 (a PaddedInput block), optionally + bias + relu."""
        x = te.placeholder((1, 6, 6, 4), "float32", "X")
        w = te.placeholder((3, 3, 4, 8), "float32", "W")
        out = ops.conv2d_nhwc(x, w, 1, 1)
        if not relu:
            return te.create_prim_func([x, w, out])
        bias = te.placeholder((8,), "float32", "bias")
        return te.create_prim_func([x, w, bias, ops.relu(ops.bias_add(out, bias))])

    @staticmethod
    def softmax(n=4, m=32):
        x = te.placeholder((n, m), "float32", "X")
        return te.create_prim_func([x, ops.softmax(x)])

    @staticmethod
    def row_sum(n=4, m=64):
        a = te.placeholder((n, m), "float32", "A")
        k = te.reduce_axis((0, m), "k")
        b = te.compute((n,), lambda i: te.sum(a[i, k], axis=k), name="B")
        return te.create_prim_func([a, b])


class Checks:
    """Design spaces from rules, replays, and numbers against the unscheduled function."""

    @staticmethod
    def spaces(func, rules, rand_state=0, target=TARGET):
        space = PostOrderApply(sch_rules=list(rules), postprocs=[], mutator_probs={})
        ctx = TuneContext(func, target=target, space_generator=space, rand_state=rand_state)
        return ctx.generate_design_space()

    @staticmethod
    def kinds(sch):
        return [inst.kind.name for inst in sch.trace.insts]

    @staticmethod
    def decisions(sch):
        """The trace's decisions in order, as a hashable tuple."""
        out = []
        for inst in sch.trace.insts:
            d = sch.trace.decisions.get(inst)
            if d is not None:
                out.append(tuple(d) if isinstance(d, (list, tuple)) else d)
        return tuple(out)

    @staticmethod
    def replay(func, sch, seed, keep_decisions=False):
        """The design space ``sch``'s trace replayed on ``func`` (fresh decisions unless
        ``keep_decisions``)."""
        trace = sch.trace if keep_decisions else Trace(sch.trace.insts, {})
        new = Schedule(func, seed=seed)
        trace.apply_to_schedule(new, remove_postproc=True)
        return new

    @staticmethod
    def inputs(func, seed=0):
        rng = np.random.default_rng(seed)
        return [rng.standard_normal(p.static_shape()).astype(p.dtype) for p in func.params]

    @classmethod
    def reference(cls, func):
        arrays = cls.inputs(func)
        interpret(func, *arrays)
        return arrays[-1]

    @classmethod
    def assert_same_numbers(cls, func, sch, expected=None):
        """``sch`` computes what the unscheduled ``func`` does (reference interpreter)."""
        expected = cls.reference(func) if expected is None else expected
        arrays = cls.inputs(func)
        interpret(sch.mod["main"], *arrays)
        np.testing.assert_allclose(arrays[-1], expected, rtol=1e-5, atol=1e-5)

    @classmethod
    def assert_space_correct(cls, func, spaces, replays=2):
        """Every space, and ``replays`` random points of each, compute the same numbers."""
        expected = cls.reference(func)
        for i, sch in enumerate(spaces):
            cls.assert_same_numbers(func, sch, expected)
            for seed in range(replays):
                cls.assert_same_numbers(func, cls.replay(func, sch, 100 * i + seed), expected)


@pytest.fixture
def wl():
    return Workloads


@pytest.fixture
def ck():
    return Checks
