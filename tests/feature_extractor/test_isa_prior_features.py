"""The CPU and the analytic prior as features (``extract_isa``, ``extract_prior``)."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

import metaschedule as ms
from metaschedule.arg_info import ArgInfo
from metaschedule.codegen.isa import isa_of
from metaschedule.feature_extractor import PerStoreFeature
from metaschedule.search_strategy import MeasureCandidate
from metaschedule.target import Target
from metaschedule.testing import matmul


def candidate(vectorize: bool):
    sch = ms.tir.Schedule(matmul(32, 32, 32), seed=0)
    i, j, k = sch.get_loops(sch.get_block("C"))
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i, j0, k, j1)
    if vectorize:
        sch.vectorize(j1)
    return MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod))


def slot(fe, row, name):
    return float(row[fe.feature_names.index(name)])


def test_isa_slots_follow_the_target_and_a_recorded_isa():
    fe = PerStoreFeature(extract_isa=True)
    assert fe.feature_vector_length == PerStoreFeature().feature_vector_length + 19
    func = matmul(32, 32, 32)
    avx2 = SimpleNamespace(target=Target("llvm -mcpu=haswell -num-cores 2"), mod=func)
    sse = SimpleNamespace(target=Target("llvm -mcpu=x86-64 -num-cores 1"), mod=func)
    (a,) = fe.extract_from(avx2, [candidate(True)])
    (b,) = fe.extract_from(sse, [candidate(True)])
    assert slot(fe, a[0], "isa_vector_bytes") == pytest.approx(math.log2(33))
    assert slot(fe, b[0], "isa_vector_bytes") == pytest.approx(math.log2(17))
    assert slot(fe, a[0], "isa_fma") == 1 and slot(fe, b[0], "isa_fma") == 0
    assert slot(fe, a[0], "isa_num_cores") == pytest.approx(math.log2(3))
    span = fe.layout.span("isa")
    assert all(np.array_equal(a[0, span], r[span]) for r in a)  # the same on every row
    # a recorded ISA (a corpus part's machine) wins over the target's
    recorded = SimpleNamespace(target=avx2.target, mod=func, isa=isa_of(sse.target))
    (c,) = fe.extract_from(recorded, [candidate(True)])
    names = fe.feature_names[span]
    same = [n for n in names if n != "isa_num_cores"]  # threads still come from the target
    assert [slot(fe, c[0], n) for n in same] == [slot(fe, b[0], n) for n in same]
    assert slot(fe, c[0], "isa_num_cores") == slot(fe, a[0], "isa_num_cores")
    # no target: the host's record
    (d,) = fe.extract_from(SimpleNamespace(target=None, mod=func), [candidate(True)])
    host = isa_of(Target("llvm"))
    assert slot(fe, d[0], "isa_vector_registers") == pytest.approx(
        math.log2(1 + host.vector_registers)
    )


def test_prior_slots_hold_the_priors_estimate():
    fe = PerStoreFeature(extract_prior=True)
    ctx = SimpleNamespace(target=Target("llvm -mcpu=haswell -num-cores 1"), mod=matmul(32, 32, 32))
    vec, scalar = fe.extract_from(ctx, [candidate(True), candidate(False)])
    for x in (vec, scalar):
        assert np.isfinite(x).all()
        span = fe.layout.span("prior")
        assert all(np.array_equal(x[0, span], r[span]) for r in x)
    # the prior rates the vectorized tile faster: fewer estimated ns, more GFLOPS
    assert slot(fe, vec[0], "prior_log_ns") < slot(fe, scalar[0], "prior_log_ns")
    assert slot(fe, vec[0], "prior_log_gflops") > slot(fe, scalar[0], "prior_log_gflops")
    # the cached schedule features are not written into
    again = fe.extract_from(SimpleNamespace(target=ctx.target, mod=ctx.mod), [candidate(True)])
    np.testing.assert_array_equal(again[0], vec)


def test_settings_rebuild_the_same_extractor():
    fe = PerStoreFeature(extract_workload=True, extract_isa=True, extract_prior=True)
    twin = PerStoreFeature(**fe.settings())
    assert twin.feature_names == fe.feature_names
    assert fe.feature_names[-2:] == ["prior_log_ns", "prior_log_gflops"]
