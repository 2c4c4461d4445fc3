"""Odd rows: a serial loop over a reduction made vector code
(codegen/c_vector.vectorize_outputs): when it applies, the generated C, and numerics."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metaschedule import te, tir
from metaschedule.codegen import build, c_vector
from metaschedule.codegen.c_codegen import FunctionWriter
from metaschedule.codegen.c_helpers import Helpers
from metaschedule.codegen.c_vector import vectorize_outputs
from metaschedule.target import Target
from metaschedule.te import ops
from metaschedule.tir import (
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    ForKind,
    PrimFunc,
    Var,
    const,
)

CPU = Target({"kind": "cpu", "num_cores": 2, "vector_width": 64})
RNG = np.random.default_rng(11)

pytestmark = pytest.mark.usefixtures("session_kernel_cache")


def rand(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def _odd_matmul(m: int, tj: int, tk: int, *, n_outer=2, k_outer=3, unroll=64, cache=False):
    """TVM's best structure for a 127 x 511 x 255 matmul, smaller: ``j0 | k0 | i | j1
    (tj, left serial) | k1 (tk)``, the nest under ``j0`` unrolled up to ``unroll`` steps."""
    a = te.placeholder((m, k_outer * tk), "float32", "A")
    b = te.placeholder((k_outer * tk, n_outer * tj), "float32", "B")
    sch = tir.Schedule(te.create_prim_func([a, b, ops.matmul(a, b)]))
    block = sch.get_block("T_matmul_NN")
    i, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, [None, tj])
    k0, k1 = sch.split(k, [None, tk])
    sch.reorder(j0, k0, i, j1, k1)
    if cache:
        sch.reverse_compute_at(sch.cache_write(block, 0, "global"), j0)
    sch.decompose_reduction(block, k0)
    if unroll:
        sch.annotate(j0, "pragma_auto_unroll_max_step", unroll)
        sch.annotate(j0, "pragma_unroll_explicit", 1)
    return sch, (m, k_outer * tk, n_outer * tj)


def _run(sch, shape):
    m, k, n = shape
    a, b = rand(m, k), rand(k, n)
    lib = build(sch.mod, CPU)
    c = np.zeros((m, n), "float32")
    lib(a, b, c)
    return lib.get_source(), c, a @ b


# ----------------------------------------------------------------------------- generated C


@pytest.mark.compiler
def test_without_unrolling_the_row_is_still_vector_code():
    sch, shape = _odd_matmul(5, 17, 7, unroll=0)
    src, c, ref = _run(sch, shape)
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4)
    assert "kept in 2 accumulators of 16/1 lanes across loops k_1" in src


@pytest.mark.compiler
def test_switched_off_the_row_stays_scalar(monkeypatch):
    monkeypatch.setattr(c_vector, "VECTORIZE_OUTPUTS", False)
    sch, shape = _odd_matmul(5, 17, 7)
    src, c, ref = _run(sch, shape)
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4)
    assert "kept in 1 accumulator across loops k_1" in src


# ----------------------------------------------------------------------------- when it applies


def _writer() -> FunctionWriter:
    return FunctionWriter(PrimFunc((), tir.Evaluate(const(0))), CPU, Helpers(), "f")


def _nest(store_index=None, b_index=None, spatial_below: int = 1, reduce: int = 4):
    """``for j in 8: for i in spatial_below: for k in reduce: C[i, j] += A[k] * B[k, j]``
    (the store's and B's indices replaceable)."""
    c, a, b = Buffer("C", (4, 16)), Buffer("A", (8,)), Buffer("B", (8, 32))
    j, i, k = Var("j", "int32"), Var("i", "int32"), Var("k", "int32")
    cidx = store_index(i, j) if store_index else (i, j)
    bidx = b_index(k, j) if b_index else (k, j)
    value = BufferLoad(c, cidx) + BufferLoad(a, (k,)) * BufferLoad(b, bidx)
    nest = For(k, const(0), const(reduce), ForKind.SERIAL, BufferStore(c, value, cidx))
    nest = For(i, const(0), const(spatial_below), ForKind.SERIAL, nest)
    return For(j, const(0), const(8), ForKind.SERIAL, nest)


def test_vectorize_outputs_takes_the_innermost_spatial_loop_over_a_reduction():
    out = vectorize_outputs(_writer(), _nest())
    assert out is not None
    assert [lp.kind for lp in (out, out.body, out.body.body)] == [
        ForKind.SERIAL,
        ForKind.SERIAL,
        ForKind.VECTORIZED,
    ]
    assert out.body.body.loop_var.name == "j" and out.body.loop_var.name == "k"


@pytest.mark.parametrize(
    "nest",
    [
        _nest(spatial_below=2),  # i (2) below j: j is not the innermost spatial loop
        _nest(reduce=1),  # no reduction below j
        _nest(b_index=lambda k, j: (k, j * 2)),  # B two elements apart per lane
        _nest(store_index=lambda i, j: (j // 2, i)),  # C not unit-stride in j
    ],
)
def test_vectorize_outputs_leaves_other_nests_alone(nest):
    assert vectorize_outputs(_writer(), nest) is None


def test_vectorize_outputs_leaves_a_nest_that_reads_another_output_alone():
    c, a = Buffer("C", (16,)), Buffer("A", (8,))
    j, k = Var("j", "int32"), Var("k", "int32")
    value = BufferLoad(c, (j,)) + BufferLoad(c, (j + 1,)) * BufferLoad(a, (k,))
    nest = For(k, const(0), const(4), ForKind.SERIAL, BufferStore(c, value, (j,)))
    assert vectorize_outputs(_writer(), For(j, const(0), const(8), ForKind.SERIAL, nest)) is None


# ----------------------------------------------------------------------------- property


@pytest.mark.compiler
@settings(
    max_examples=14,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    m=st.integers(1, 7),
    tj=st.sampled_from([3, 4, 5, 7, 9, 15, 17, 20, 33, 51]),
    tk=st.sampled_from([1, 2, 3, 7]),
    n_outer=st.integers(1, 2),
    unroll=st.sampled_from([0, 16, 64]),
    cache=st.booleans(),
)
def test_odd_rows_over_a_reduction_compute_the_numpy_result(m, tj, tk, n_outer, unroll, cache):
    """Odd extents of the serial row ``j1`` and of the reduction ``k1`` under it, unrolled
    or not, with or without a write cache: numpy's result, and vector code for the row
    whenever a reduction loop is under it (unless a tile across ``k0`` took the rows)."""
    sch, shape = _odd_matmul(m, tj, tk, n_outer=n_outer, unroll=unroll, cache=cache)
    src, c, ref = _run(sch, shape)
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4)
    if tk > 1 and tj >= c_vector.MIN_OUTPUT_LANES and "across loops k_0" not in src:
        assert re.search(r"accumulators? of \d+(/\d+)* lanes across loops k_1", src), src
