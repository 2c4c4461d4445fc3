"""Odd rows: a serial loop over a reduction made vector code
(codegen/c_vector.vectorize_outputs), and loads invariant in the loop around a register
tile made once before it, broadcasts read as vectors and as scalars once per iteration
(codegen/c_invariant.py): when they apply, the generated C, and numerics."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metaschedule import te, tir
from metaschedule.codegen import build, c_accumulate, c_codegen, c_invariant, c_vector
from metaschedule.codegen.c_codegen import FunctionWriter, codegen_c
from metaschedule.codegen.c_helpers import Helpers
from metaschedule.codegen.c_vector import vectorize_outputs
from metaschedule.codegen.plan import plan_function
from metaschedule.target import Target
from metaschedule.te import ops
from metaschedule.testing import RandomArrays, build_and_check
from metaschedule.tir import (
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    PrimFunc,
    Var,
    const,
)
from metaschedule.tir.transform import lower

CPU = Target("llvm -mcpu=x86-64-v4 -num-cores=2")  # AVX-512 (testing.isas)
rand = RandomArrays(11)

pytestmark = pytest.mark.usefixtures("session_kernel_cache")


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


def _kept(mod) -> str:
    """The register tiles planned for ``mod`` on CPU, in words, one per line."""
    plan = plan_function(lower(mod["main"]), CPU)
    return "\n".join(tile.describe() for _, tile in plan.tiles)


def _inputs(shape: tuple[int, int, int]) -> tuple[list[np.ndarray], np.ndarray]:
    """Random ``A`` and ``B`` of a ``(m, k, n)`` matmul, and numpy's product."""
    m, k, n = shape
    a, b = rand(m, k), rand(k, n)
    return [a, b], a @ b


def _loop_body(src: str, header: str) -> str:
    """The source from the loop ``header`` to its closing brace."""
    start = src.index(header)
    depth, i = 0, src.index("{", start)
    while True:
        depth += {"{": 1, "}": -1}.get(src[i], 0)
        if depth == 0:
            return src[start : i + 1]
        i += 1


# ----------------------------------------------------------------------------- generated C


@pytest.mark.compiler
@pytest.mark.parametrize("cache", [False, True])
def test_a_serial_row_of_17_over_an_unrolled_reduction_is_vector_code_with_b_in_registers(
    cache,
):
    """TVM's best mmodd schedule leaves the 17 columns ``j1`` serial around the 7 steps of
    ``k1``: they become a vector of 16 lanes and a scalar kept across ``k1``; the 7 x 17
    panel of ``B`` (7 vectors, 7 scalars) is loaded once per ``k0``, before the row loop,
    and each ``A`` element broadcast once per row, its first lane serving the scalar."""
    sch, shape = _odd_matmul(9, 17, 7, cache=cache)
    src = build_and_check(sch.mod, *_inputs(shape), target=CPU)
    assert "kept in 2 accumulators of 16/1 lanes across loops k_1" in _kept(sch.mod)
    assert "14 loads invariant in loop i, in registers" in src
    assert "7 elements broadcast once per iteration of i" in src
    rows = _loop_body(src, "for (int32_t i = 0;")
    assert "&B[" not in rows and "B[" not in rows  # B only in registers inside the rows
    assert re.search(r"\+ A_bc(_\d+)?\[0\] \* B_inv", rows)  # the scalar column's update


@pytest.mark.compiler
def test_a_tile_with_invariant_loads_is_written_out_past_the_explicit_unroll_limit(monkeypatch):
    """51 columns over 7 steps: 5 accumulators (16/16/16/2/1) x 7 = 35 updates, past
    EXPLICIT_UNROLL_STEPS (a pragma would keep k1 a C loop, B's offsets moving with it);
    written out, B's panel is loaded before the row loop (as many loads as the registers
    left by the accumulators allow)."""
    sch, shape = _odd_matmul(5, 51, 7, unroll=512)
    src = build_and_check(sch.mod, *_inputs(shape), target=CPU)
    assert "kept in 5 accumulators of 16/2/1 lanes across loops k_1" in _kept(sch.mod)
    assert re.search(r"// \d+ loads invariant in loop i, in registers", src)
    monkeypatch.setattr(c_codegen, "EXPLICIT_TILE_STEPS", c_codegen.EXPLICIT_UNROLL_STEPS)
    sch, shape = _odd_matmul(5, 51, 7, unroll=512)
    src = build_and_check(sch.mod, *_inputs(shape), target=CPU)
    assert "invariant in loop i" not in src and "#pragma GCC unroll 7" in src


@pytest.mark.compiler
def test_without_unrolling_the_row_is_still_vector_code_and_b_stays_in_the_loop():
    sch, shape = _odd_matmul(5, 17, 7, unroll=0)
    src = build_and_check(sch.mod, *_inputs(shape), target=CPU)
    assert "kept in 2 accumulators of 16/1 lanes across loops k_1" in _kept(sch.mod)
    assert "invariant in loop" not in src  # k1 is a C loop: B moves with it


@pytest.mark.compiler
def test_switched_off_the_row_stays_scalar(monkeypatch):
    monkeypatch.setattr(c_vector, "VECTORIZE_OUTPUTS", False)
    monkeypatch.setattr(c_invariant, "HOIST_INVARIANT_LOADS", False)
    sch, shape = _odd_matmul(5, 17, 7)
    src = build_and_check(sch.mod, *_inputs(shape), target=CPU)
    assert "kept in 1 accumulator across loops k_1" in _kept(sch.mod)
    assert "invariant in loop" not in src and "_bc" not in src


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


def _rows_program(guard: bool, write_b: bool) -> PrimFunc:
    """``for r in 6: for j (vectorized 16): for k in 3 (unrolled): C[r, j] += A[r, k] *
    B[k, j]``, the update under ``if r > 0`` (``guard``) or followed by a store to ``B``
    (``write_b``)."""
    a, b, c = Buffer("A", (6, 3)), Buffer("B", (3, 16)), Buffer("C", (6, 16))
    r, j, k = Var("r", "int32"), Var("j", "int32"), Var("k", "int32")
    upd = BufferStore(
        c, BufferLoad(c, (r, j)) + BufferLoad(a, (r, k)) * BufferLoad(b, (k, j)), (r, j)
    )
    body = For(
        k,
        const(0),
        const(3),
        ForKind.UNROLLED,
        For(j, const(0), const(16), ForKind.VECTORIZED, upd),
    )
    if write_b:
        body = tir.SeqStmt((body, BufferStore(b, BufferLoad(a, (r, 0)), (r % 3, 0))))
    if guard:
        body = IfThenElse(r > 0, body, None)
    explicit = {"pragma_unroll_explicit": 1}  # k written out: B's offsets are constants
    return PrimFunc((a, b, c), For(r, const(0), const(6), ForKind.SERIAL, body, None, explicit))


@pytest.mark.parametrize(("guard", "write_b"), [(False, False), (True, False), (False, True)])
def test_loads_are_hoisted_only_when_every_iteration_makes_them_and_nothing_writes_them(
    monkeypatch, guard, write_b
):
    # (without the guard and the write, the rows would be jammed into one register tile)
    monkeypatch.setattr(c_accumulate, "JAM_SMALL_TILES", False)
    src = codegen_c(_rows_program(guard, write_b), CPU).code
    hoisted = "3 loads invariant in loop r" in src
    assert hoisted == (not guard and not write_b), src


@pytest.mark.compiler
@pytest.mark.parametrize(("guard", "write_b"), [(False, False), (True, False), (False, True)])
def test_a_program_with_and_without_hoisted_loads_computes_the_same(guard, write_b):
    func = _rows_program(guard, write_b)
    a, b, c = rand(6, 3), rand(3, 16), rand(6, 16)
    ref = [x.copy() for x in (a, b, c)]
    for r in range(6):  # the program, in numpy
        if guard and r == 0:
            continue
        ref[2][r] += ref[0][r] @ ref[1]
        if write_b:
            ref[1][r % 3, 0] = ref[0][r, 0]
    lib = build(func, CPU)
    args = [x.copy() for x in (a, b, c)]
    lib(*args)
    for got, want in zip(args, ref):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


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
    src = build_and_check(sch.mod, *_inputs(shape), target=CPU)
    if tk > 1 and tj >= c_vector.MIN_OUTPUT_LANES and "across loops k_0" not in src:
        assert re.search(r"accumulators? of \d+(/\d+)* lanes across loops k_1", src), src
