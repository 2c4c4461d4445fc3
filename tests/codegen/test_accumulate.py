"""Register accumulators (codegen/c_accumulate.py): a reduction's output tile kept in
variables across its reduction loops; when the rewrite applies, and numerics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metaschedule import te, tir
from metaschedule.codegen import build, c_accumulate
from metaschedule.codegen.c_accumulate import TileLimits, plan_accumulators
from metaschedule.codegen.c_codegen import FunctionWriter
from metaschedule.codegen.c_helpers import Helpers
from metaschedule.codegen.c_ir import chunks
from metaschedule.codegen.c_straight import update_order
from metaschedule.codegen.isa import isa_of
from metaschedule.codegen.plan import plan_function
from metaschedule.target import Target
from metaschedule.te import ops
from metaschedule.testing import RandomArrays, build_and_run, op_matmul
from metaschedule.tir import Buffer, BufferLoad, BufferStore, For, ForKind, PrimFunc, Var, const
from metaschedule.tir.transform import lower

CPU = Target("llvm -mcpu=x86-64-v4 -num-cores=2")  # AVX-512 (testing.isas)
LIMITS = TileLimits.of(isa_of(CPU))
MAX_ACCUMULATORS, MIN_SPLIT_ACCUMULATORS = LIMITS.max_accumulators, LIMITS.min_split_accumulators
rand = RandomArrays(7)


pytestmark = pytest.mark.usefixtures("session_kernel_cache")


def _register_tiled(m: int, n: int, k: int, cols: int, decompose: bool) -> tir.Schedule:
    """i0 j0 | k | i1 (4) j1 (``cols``, vectorized): a register tile of 4 rows under k,
    the init taken out of the reduction when ``decompose``."""
    sch = tir.Schedule(op_matmul(m, n, k))
    block = sch.get_block("T_matmul_NN")
    i, j, kk = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, cols])
    sch.reorder(i0, j0, kk, i1, j1)
    if decompose:
        sch.decompose_reduction(block, kk)
    sch.vectorize(j1)
    return sch


def _kept(mod) -> str:
    """The register tiles planned for ``mod`` on CPU, in words (``AccumulatorPlan.describe``),
    one per line."""
    plan = plan_function(lower(mod["main"]), CPU)
    return "\n".join(tile.describe() for _, tile in plan.tiles)


# ----------------------------------------------------------------------------- generated C


@pytest.mark.compiler
def test_register_tile_of_a_tiled_matmul_lives_in_vector_variables():
    # 4 rows x 2 vectors of 16 lanes
    sch = _register_tiled(16, 64, 24, 32, decompose=True)
    a, b = rand(16, 24), rand(24, 64)
    src, (_, _, c) = build_and_run(sch.mod, a, b, np.zeros((16, 64), "float32"), target=CPU)
    assert "T_matmul_NN kept in 8 accumulators of 16 lanes across loops k" in _kept(sch.mod)
    # inside the k loop the tile is only in variables: no load or store of the output
    k_loop = src[src.index("for (int32_t k = 0;") :]
    k_loop = k_loop[: k_loop.index("ms_store_f32x16(&T_matmul_NN[")]
    assert "T_matmul_NN[" not in k_loop
    assert "T_matmul_NN_acc_7 = (T_matmul_NN_acc_7 + " in k_loop
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def _vectors_outside_rows(rows: int = 8, vectors: int = 2) -> tuple[tir.Schedule, int]:
    """A matmul whose register tile has its vector loop outside its row loop:
    ``i0 j0 | k | j1 (vectors) i1 (rows) j2 (16, vectorized)``, ``j1`` outermost in ``j``
    (its vectors 32 apart: not merged into the vector loop, see merge_contiguous)."""
    n = 16 * vectors * 2
    sch = tir.Schedule(op_matmul(rows * 2, n, 24))
    block = sch.get_block("T_matmul_NN")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, rows])
    j1, j0, j2 = sch.split(j, [vectors, None, 16])
    sch.reorder(i0, j0, k, j1, i1, j2)
    sch.decompose_reduction(block, k)
    sch.vectorize(j2)
    return sch, n


def _update_order(src: str, name: str = "T_matmul_NN") -> list[int]:
    """The accumulators in the order the reduction loop updates them."""
    import re

    k_loop = src[src.index("for (int32_t k = 0;") :]
    k_loop = k_loop[: k_loop.index(f"ms_store_f32x16(&{name}[")]
    found = re.findall(rf"{name}_acc(?:_(\d+))? = \(", k_loop)
    return [int(x) if x else 0 for x in found]


@pytest.mark.compiler
@pytest.mark.parametrize("order_updates", [True, False])
def test_updates_of_a_tile_are_grouped_by_the_broadcast_they_read(monkeypatch, order_updates):
    # 8 rows x 2 vectors, the vectors outermost: the tile's own order updates vector 0 of
    # every row, then vector 1, holding all 8 broadcasts of A at once; grouped, row by
    # row (both vectors of a row after its one broadcast), the same accumulators
    monkeypatch.setattr(c_accumulate, "ORDER_UPDATES", order_updates)
    sch, n = _vectors_outside_rows()
    a, b = rand(16, 24), rand(24, n)
    src, (_, _, c) = build_and_run(sch.mod, a, b, np.zeros((16, n), "float32"), target=CPU)
    assert "T_matmul_NN kept in 16 accumulators of 16 lanes across loops k" in _kept(sch.mod)
    tile_order = list(range(16))  # accumulator v * 8 + row: the tile's points in order
    grouped = [v * 8 + row for row in range(8) for v in range(2)]
    assert _update_order(src) == (grouped if order_updates else tile_order)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_update_order_keeps_a_tile_whose_order_holds_fewest_operands():
    # rows outermost (one broadcast at a time, both weight vectors held): already grouped
    sch = _register_tiled(16, 64, 24, 32, decompose=False)
    plan = _plan_at(sch, "k")
    assert plan is not None and len(plan.points) == 8
    assert update_order(plan) == plan.points


def test_update_order_groups_the_points_of_one_broadcast():
    sch, _ = _vectors_outside_rows(rows=3, vectors=2)
    plan = _plan_at(sch, "k")
    assert plan is not None and len(plan.points) == 6
    order = update_order(plan)
    assert order == tuple(plan.points[v * 3 + row] for row in range(3) for v in range(2))


def _plan_at(sch: tir.Schedule, loop_name: str):
    """The accumulator plan of the lowered function's loop named ``loop_name``."""
    from metaschedule.tir.functor import Visitor
    from metaschedule.tir.transform import lower

    func = lower(sch.mod["main"])
    found = []

    class _V(Visitor):
        def visit_For(self, s: For) -> None:
            if s.loop_var.name == loop_name:
                found.append(s)
            self.generic_visit(s)

    _V().visit(func.body)
    fw = _writer()
    return plan_accumulators(fw, found[0])


@pytest.mark.compiler
def test_a_vector_tile_not_a_multiple_of_the_native_width_keeps_its_tail_in_registers():
    # j1 = 28 lanes (a 56-wide NCHW row split in two): vectors of 16, 8 and 4 lanes per
    # row of the tile, started from the folded init, none left in memory inside k
    sch = _register_tiled(8, 56, 24, 28, decompose=True)
    sch.vectorize(sch.get_loops(sch.get_block("T_matmul_NN_init"))[-1])
    a, b = rand(8, 24), rand(24, 56)
    src, (_, _, c) = build_and_run(sch.mod, a, b, np.zeros((8, 56), "float32"), target=CPU)
    assert "T_matmul_NN kept in 12 accumulators of 16/8/4 lanes across loops k" in _kept(sch.mod)
    k_loop = src[src.index("for (int32_t k = 0;") :]
    k_loop = k_loop[: k_loop.index("ms_store_f32x")]
    assert "T_matmul_NN[" not in k_loop
    assert "ms_f32x8 T_matmul_NN_acc" in src and "ms_f32x4 T_matmul_NN_acc" in src


@pytest.mark.compiler
@pytest.mark.parametrize("tj", [50, 51])
def test_a_vector_loop_with_a_remainder_keeps_its_tile_in_variables(tj):
    """A vectorized tile loop that is not a multiple of the lanes (TVM's best 1000^3
    matmul: 5 rows x 50 columns) keeps whole vectors, a narrower vector for the
    remainder and a scalar for a last odd element in variables across k, instead of
    loading and storing the output on every update (3x slower)."""
    sch = tir.Schedule(op_matmul(10, 2 * tj, 12))
    block = sch.get_block("T_matmul_NN")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 5])
    j0, j1 = sch.split(j, [None, tj])
    sch.reorder(i0, j0, k, i1, j1)
    sch.decompose_reduction(block, k)
    sch.vectorize(j1)
    a, b = rand(10, 12), rand(12, 2 * tj)
    src, (_, _, c) = build_and_run(sch.mod, a, b, np.zeros((10, 2 * tj), "float32"), target=CPU)
    pieces = chunks(tj, 16)  # 16, 16, 16, 2 (and 1)
    assert [w for _, w in pieces] == [16, 16, 16, 2] + ([1] if tj == 51 else [])
    widths = "16/2/1" if tj == 51 else "16/2"
    kept = f"T_matmul_NN kept in {5 * len(pieces)} accumulators of {widths} lanes across"
    assert kept in _kept(sch.mod)
    assert "ms_f32x2 T_matmul_NN_acc" in src
    if tj == 51:
        assert "float T_matmul_NN_acc" in src  # the odd last element: a scalar
    k_loop = src[src.index("for (int32_t k = 0;") :]
    k_loop = k_loop[: k_loop.index("ms_store_f32x16(&T_matmul_NN[")]
    assert "T_matmul_NN[" not in k_loop  # the tile is not touched in memory inside k
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def _split_j(m: int, tj1: int, tj2: int, n_outer: int = 2, ti: int = 2, k: int = 12):
    """A matmul tiled ``i0 j0 | k | i1 (ti) j1 (tj1) j2 (tj2, vectorized)``."""
    sch = tir.Schedule(op_matmul(m, n_outer * tj1 * tj2, k))
    block = sch.get_block("T_matmul_NN")
    i, j, kk = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, ti])
    j0, j1, j2 = sch.split(j, [None, tj1, tj2])
    sch.reorder(i0, j0, kk, i1, j1, j2)
    sch.decompose_reduction(block, kk)
    sch.vectorize(j2)
    return sch


@pytest.mark.compiler
@pytest.mark.parametrize(
    ("tj1", "tj2", "what"),
    [
        (5, 17, "14 accumulators of 16/4/1 lanes"),  # 85 = 5 x 16 + 4 + 1 per row
        (5, 51, "38 accumulators of 16/8/4/2/1 lanes"),  # mmodd's row: 255 = 15 x 16 + 15
        (4, 2, "2 accumulators of 8 lanes"),  # four 2-lane vectors side by side: one of 8
    ],
)
def test_tile_points_side_by_side_along_the_vector_loop_share_its_vectors(
    tj1, tj2, what, monkeypatch
):
    """``j1`` moves the output by exactly the vector loop's extent, so the ``j1 x j2``
    points of a row are one contiguous run: chunked as one vector loop (85 lanes: 5
    vectors of 16, one of 4 and a scalar) instead of ``j1`` separate ones (5 x (16, 1)),
    as LLVM's SLP vectorizer merges TVM's unrolled copies (MERGE_CONTIGUOUS)."""
    monkeypatch.setattr(c_accumulate, "MERGE_CONTIGUOUS", True)
    sch = _split_j(4, tj1, tj2)
    n = 2 * tj1 * tj2
    a, b = rand(4, 12), rand(12, n)
    src, (_, _, c) = build_and_run(sch.mod, a, b, np.zeros((4, n), "float32"), target=CPU)
    assert f"T_matmul_NN kept in {what} across loops k" in _kept(sch.mod)
    k_loop = src[src.index("for (int32_t k = 0;") :]
    k_loop = k_loop[: k_loop.index("ms_store_f32x")]
    assert "T_matmul_NN[" not in k_loop
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def _side_by_side_nest(extra_read: bool):
    """``for k in 4: for o in 4: for v in vectorized(8): C[8o + v] += X[k, 8o + v]``
    (and ``+ Y[v, o]``, which reads the ``o`` points a column apart, if ``extra_read``)."""
    c, x, y = Buffer("C", (32,)), Buffer("X", (4, 32)), Buffer("Y", (8, 4))
    k, o, v = Var("k", "int32"), Var("o", "int32"), Var("v", "int32")
    value = BufferLoad(c, (o * 8 + v,)) + BufferLoad(x, (k, o * 8 + v))
    if extra_read:
        value = value + BufferLoad(y, (v, o))
    body = BufferStore(c, value, (o * 8 + v,))
    nest = For(v, const(0), const(8), ForKind.VECTORIZED, body)
    nest = For(o, const(0), const(4), ForKind.SERIAL, nest)
    return For(k, const(0), const(4), ForKind.SERIAL, nest)


def test_plan_merges_a_tile_loop_only_when_every_access_runs_side_by_side(monkeypatch):
    monkeypatch.setattr(c_accumulate, "MERGE_CONTIGUOUS", False)
    unmerged = plan_accumulators(_writer(), _side_by_side_nest(extra_read=False))
    assert unmerged is not None and len(unmerged.points) == 4
    monkeypatch.setattr(c_accumulate, "MERGE_CONTIGUOUS", True)
    merged = plan_accumulators(_writer(), _side_by_side_nest(extra_read=False))
    assert merged is not None and [p.extent.value for p in merged.points] == [16, 16]
    # Y[v, o]: the points of o are 8 apart in C and X but 1 apart in Y: kept apart
    apart = plan_accumulators(_writer(), _side_by_side_nest(extra_read=True))
    assert apart is not None and [p.extent.value for p in apart.points] == [8, 8, 8, 8]


@pytest.mark.compiler
def test_reduction_with_its_init_inside_keeps_one_scalar_accumulator():
    # S[i] = sum_k X[i, k], the init as an `if` in the loop (not decomposed), k split in two
    x_t = te.placeholder((8, 40), "float32", "X")
    kk = te.reduce_axis((0, 40), "k")
    s_t = te.compute((8,), lambda i: te.sum(x_t[i, kk], axis=kk), name="S")
    sch = tir.Schedule(te.create_prim_func([x_t, s_t]))
    _, k = sch.get_loops(sch.get_block("S"))
    sch.split(k, [None, 8])
    x = rand(8, 40)
    src, (_, s) = build_and_run(sch.mod, x, np.full(8, np.nan, "float32"), target=CPU)
    assert "S kept in 1 accumulator across loops k_0, k_1" in _kept(sch.mod)
    np.testing.assert_allclose(s, x.sum(axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.compiler
def test_scalar_tile_without_a_vectorized_loop():
    # j1 not vectorized: 2 x 3 scalar accumulators across k
    sch = tir.Schedule(op_matmul(4, 6, 10))
    block = sch.get_block("T_matmul_NN")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 2])
    j0, j1 = sch.split(j, [None, 3])
    sch.reorder(i0, j0, k, i1, j1)
    sch.decompose_reduction(block, k)
    a, b = rand(4, 10), rand(10, 6)
    src, (_, _, c) = build_and_run(sch.mod, a, b, np.zeros((4, 6), "float32"), target=CPU)
    assert "kept in 6 accumulators across loops k" in _kept(sch.mod)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def _batch_matmul_nt(tk: int, k: int = 40) -> tir.Schedule:
    """``Q @ K^T`` (tbg's shape, small) tiled with the reduction innermost: 2 x 3 scalar
    accumulators summed along ``k1`` (``tk`` long), which reads both operands contiguously."""
    q = te.placeholder((2, 6, k), "float32", "Q")
    kt = te.placeholder((2, 6, k), "float32", "K")
    sch = tir.Schedule(te.create_prim_func([q, kt, ops.batch_matmul(q, kt, transpose_b=True)]))
    block = sch.get_child_blocks(sch.get_block("root"))[-1]
    b, i, j, kk = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 2])
    j0, j1 = sch.split(j, [None, 3])
    k0, k1 = sch.split(kk, [None, tk])
    sch.reorder(b, i0, j0, k0, i1, j1, k1)
    sch.decompose_reduction(block, k0)
    return sch


@pytest.mark.compiler
@pytest.mark.parametrize("tk", [8, 20, 40])
def test_a_dot_product_along_a_contiguous_reduction_is_summed_in_vector_lanes(tk):
    sch = _batch_matmul_nt(tk)
    q, kt = rand(2, 6, 40), rand(2, 6, 40)
    src, (_, _, out) = build_and_run(sch.mod, q, kt, np.zeros((2, 6, 6), "float32"), target=CPU)
    assert "summed in vector lanes" in src
    assert "ms_hsum_f32x" in src
    np.testing.assert_allclose(out, q @ kt.transpose(0, 2, 1), rtol=1e-4, atol=1e-4)


@pytest.mark.compiler
def test_a_strided_reduction_is_not_summed_in_vector_lanes():
    # k innermost but A read along k with stride 6: a gather would cost more than it saves
    a_t = te.placeholder((12, 6), "float32", "A")
    k = te.reduce_axis((0, 12), "k")
    s_t = te.compute((6,), lambda i: te.sum(a_t[k, i], axis=k), name="S")
    sch = tir.Schedule(te.create_prim_func([a_t, s_t]))
    a = rand(12, 6)
    src, (_, s) = build_and_run(sch.mod, a, np.zeros(6, "float32"), target=CPU)
    assert "summed in vector lanes" not in src
    np.testing.assert_allclose(s, a.sum(axis=0), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- when it applies


def _writer() -> FunctionWriter:
    return FunctionWriter(PrimFunc((), tir.Evaluate(const(0))), CPU, Helpers(), "f")


def _nest(value_of, tile: int = 2, inner: int | None = None):
    """``for k in 4: for i in tile: [for r in inner:] B[i] = value_of(B, A, i, k, r)``."""
    a = Buffer("A", (70, 4, 3))
    b = Buffer("B", (72,))
    k, i, r = Var("k", "int32"), Var("i", "int32"), Var("r", "int32")
    body = BufferStore(b, value_of(b, a, i, k, r), (i,))
    if inner is not None:
        body = For(r, const(0), const(inner), ForKind.SERIAL, body)
    body = For(i, const(0), const(tile), ForKind.SERIAL, body)
    return For(k, const(0), const(4), ForKind.SERIAL, body)


def _acc(b, a, i, k, r):
    return BufferLoad(b, (i,)) + BufferLoad(a, (i, k, r if isinstance(r, Var) else 0))


def test_plan_applies_to_a_tile_whose_offset_ignores_the_reduction_loop():
    plan = plan_accumulators(_writer(), _nest(lambda b, a, i, k, r: _acc(b, a, i, k, 0)))
    assert plan is not None and len(plan.points) == 2 and plan.lanes == 1
    assert [lp.loop_var.name for lp in plan.region] == ["k"]


def test_plan_refuses_a_read_of_another_element():
    # B[i] = B[i + 1] + A[...]: moving B[i] to a variable would change what B[i + 1] reads
    nest = _nest(lambda b, a, i, k, r: BufferLoad(b, (i + 1,)) + BufferLoad(a, (i, k, 0)))
    assert plan_accumulators(_writer(), nest) is None


def test_plan_hoists_a_reduction_loop_below_the_tile_into_the_region():
    # the r loop below the i loop updates B[i] three times per k: it runs outside the
    # tile points instead (each element keeps its order of updates: k, then r)
    plan = plan_accumulators(_writer(), _nest(_acc, inner=3))
    assert plan is not None and len(plan.points) == 2
    assert [lp.loop_var.name for lp in plan.region] == ["k", "r"]


def test_plan_refuses_a_tile_larger_than_the_register_budget():
    nest = _nest(lambda b, a, i, k, r: _acc(b, a, i, k, 0), tile=MAX_ACCUMULATORS + 1)
    assert plan_accumulators(_writer(), nest) is None


def test_plan_splits_a_tile_too_large_at_its_outer_loop():
    # for k in 4: for o in 9: for i in 8: B[8o + i] += ...: 72 points; o moves outside k
    a, b = Buffer("A", (72, 4)), Buffer("B", (72,))
    k, o, i = Var("k", "int32"), Var("o", "int32"), Var("i", "int32")
    e = o * 8 + i
    body = BufferStore(b, BufferLoad(b, (e,)) + BufferLoad(a, (e, k)), (e,))
    nest = For(i, const(0), const(8), ForKind.SERIAL, body)
    nest = For(
        k, const(0), const(4), ForKind.SERIAL, For(o, const(0), const(9), ForKind.SERIAL, nest)
    )
    plan = plan_accumulators(_writer(), nest)
    assert plan is not None and len(plan.points) == 8
    assert [lp.loop_var.name for lp in plan.outer] == ["o"]
    assert plan_accumulators(_writer(), nest, split=False) is None


def _rows_outside_the_reduction(rows: int, vectors: int) -> tir.Schedule:
    """``i (rows) | j0 (vectors) | k | j1 (16, vectorized)``: a tile of one vector under
    the reduction, its rows and vectors outside it."""
    sch = tir.Schedule(op_matmul(rows, 16 * vectors, 12))
    i, j, k = sch.get_loops(sch.get_block("T_matmul_NN"))
    j0, j1 = sch.split(j, [vectors, 16])
    sch.reorder(i, j0, k, j1)
    sch.vectorize(j1)
    return sch


@pytest.mark.compiler
@pytest.mark.parametrize("jam", [False, True])
def test_tile_loops_above_a_small_tile_are_jammed_into_it(monkeypatch, jam):
    # one accumulator is one chain of dependent multiply-adds; the 4 x 2 tile loops
    # above the reduction jammed in make 8 independent ones
    monkeypatch.setattr(c_accumulate, "JAM_SMALL_TILES", jam)
    sch = _rows_outside_the_reduction(4, 2)
    a, b = rand(4, 12), rand(12, 32)
    src, (_, _, c) = build_and_run(sch.mod, a, b, np.full((4, 32), np.nan, "float32"), target=CPU)
    want = "8 accumulators of 16 lanes" if jam else "1 accumulator of 16 lanes"
    assert f"T_matmul_NN kept in {want} across loops k" in _kept(sch.mod)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_a_jam_stops_at_its_budget_and_only_lifts_small_tiles():
    # 4 rows x 8 vectors: 32 > JAM_ACCUMULATORS at i, 8 at j0
    wide = _rows_outside_the_reduction(4, 8)
    assert _plan_at(wide, "i") is None
    plan = _plan_at(wide, "j_0")
    assert plan is not None and len(plan.points) == 8
    assert [lp.loop_var.name for lp in plan.region] == ["k"]
    # a tile of MIN_SPLIT_ACCUMULATORS vectors under k is left as it is
    sch = tir.Schedule(op_matmul(4, 16 * MIN_SPLIT_ACCUMULATORS, 12))
    i, j, k = sch.get_loops(sch.get_block("T_matmul_NN"))
    j0, j1 = sch.split(j, [MIN_SPLIT_ACCUMULATORS, 16])
    sch.reorder(i, k, j0, j1)
    sch.vectorize(j1)
    assert _plan_at(sch, "i") is None
    assert len(_plan_at(sch, "k").points) == MIN_SPLIT_ACCUMULATORS


def test_plan_does_not_start_at_a_loop_the_offset_uses():
    nest = _nest(lambda b, a, i, k, r: _acc(b, a, i, k, 0))
    assert plan_accumulators(_writer(), nest.body) is None  # the i loop


# ----------------------------------------------------------------------------- property


@pytest.mark.compiler
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    ti=st.sampled_from([1, 2, 3, 6]),
    tj=st.sampled_from([1, 2, 4, 8, 12, 16, 24, 32, 48]),
    tk=st.sampled_from([1, 2, 5]),
    vectorize=st.booleans(),
    unroll=st.sampled_from([0, 16, 64]),
    cache=st.booleans(),
)
def test_tiled_matmuls_compute_the_numpy_result(ti, tj, tk, vectorize, unroll, cache):
    """SSRSRS-style tilings of a 6 x 96 x 10 matmul: the innermost tile ``ti x tj`` under
    the inner reduction loop ``tk``, vectorized or not, unrolled or not, with or without a
    write cache; every one computes numpy's result, with or without accumulators."""
    sch = tir.Schedule(op_matmul(6, 96, 10))
    block = sch.get_block("T_matmul_NN")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, ti])
    j0, j1 = sch.split(j, [None, tj])
    k0, k1 = sch.split(k, [None, tk])
    sch.reorder(i0, j0, k0, k1, i1, j1)
    if cache:
        sch.reverse_compute_at(sch.cache_write(block, 0, "global"), j0)
    sch.decompose_reduction(block, k0)
    if vectorize:
        sch.vectorize(j1)
    if unroll:
        sch.annotate(i0, "pragma_auto_unroll_max_step", unroll)
        sch.annotate(i0, "pragma_unroll_explicit", 1)
    a, b = rand(6, 10), rand(10, 96)
    src, (_, _, c) = build_and_run(sch.mod, a, b, np.zeros((6, 96), "float32"), target=CPU)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    if vectorize:  # vectors of 16 lanes, then halving power-of-two widths (24: 16 + 8)
        n_chunks = len(chunks(tj, 16)) if tj >= 2 else 1
        applies, n_vars, inner = tj >= 2, ti * n_chunks, n_chunks
    else:
        applies, n_vars, inner = True, ti * tj, tj
    # a tile too large is split: the i1 loop outside k0, k1, the j1 tile in variables
    fits = n_vars <= MAX_ACCUMULATORS or MIN_SPLIT_ACCUMULATORS <= inner <= MAX_ACCUMULATORS
    assert ("accumulator" in src) == (applies and fits)


@pytest.mark.compiler
def test_a_tile_too_large_keeps_a_part_in_vector_variables_per_outer_iteration():
    # k | i1 (16) j1 (128, vectorized): 128 vectors; i1 goes outside k, 8 vectors inside
    sch = tir.Schedule(op_matmul(16, 128, 12))
    block = sch.get_block("T_matmul_NN")
    i, j, k = sch.get_loops(block)
    sch.reorder(k, i, j)
    sch.decompose_reduction(block, k)
    sch.vectorize(j)
    a, b = rand(16, 12), rand(12, 128)
    src, (_, _, c) = build_and_run(sch.mod, a, b, np.zeros((16, 128), "float32"), target=CPU)
    assert "T_matmul_NN kept in 8 accumulators of 16 lanes across loops k" in _kept(sch.mod)
    k_loop = src[src.index("for (int32_t k = 0;") :]
    k_loop = k_loop[: k_loop.index("ms_store_f32x16(&T_matmul_NN[")]
    assert "T_matmul_NN[" not in k_loop
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.compiler
def test_register_tile_reaches_over_a_spatial_loop_between_two_reduction_loops():
    # k0 | j1 (2) | k1 (2) | i1 (2) j2 (16, vectorized): TVM's best batch-matmul order;
    # k1 joins the region, so all 2 x 2 vectors stay in variables across k0 and k1
    sch = tir.Schedule(op_matmul(8, 64, 24))
    block = sch.get_block("T_matmul_NN")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 2])
    j0, j1, j2 = sch.split(j, [None, 2, 16])
    k0, k1 = sch.split(k, [None, 2])
    sch.reorder(i0, j0, k0, j1, k1, i1, j2)
    sch.decompose_reduction(block, k0)
    sch.vectorize(j2)
    a, b = rand(8, 24), rand(24, 64)
    src, (_, _, c) = build_and_run(sch.mod, a, b, np.zeros((8, 64), "float32"), target=CPU)
    assert "T_matmul_NN kept in 4 accumulators of 16 lanes across loops k_0, k_1" in _kept(sch.mod)
    k_loop = src[src.index("for (int32_t k_0 = 0;") :]
    k_loop = k_loop[: k_loop.index("ms_store_f32x16(&T_matmul_NN[")]
    assert "T_matmul_NN[" not in k_loop  # the tile is only in variables inside k_0
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.compiler
def test_sampled_nchw_conv_schedules_with_tail_vectors_compute_the_numpy_result():
    """NCHW rows 12 wide: the default space's tiles vectorize 12, 6 or 4 pixels (not a
    multiple of 16 lanes); every sampled schedule computes the reference, and some keep
    their tile in accumulators with a tail of narrower vectors (8 + 4, 4 + 2)."""
    from metaschedule.space_generator import PostOrderApply
    from metaschedule.te.ops.nchw import conv2d_nchw
    from metaschedule.tune_context import TuneContext

    x = te.placeholder((1, 8, 12, 12), "float32", "x")
    w = te.placeholder((8, 8, 3, 3), "float32", "w")
    func = te.create_prim_func([x, w, conv2d_nchw(x, w, pads=(1, 1, 1, 1))])
    args = [rand(1, 8, 12, 12), rand(8, 8, 3, 3), np.zeros((1, 8, 12, 12), "float32")]
    padded = np.pad(args[0], ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(  # numpy's 3x3 convolution, padding 1
        np.einsum("nchw,fc->nfhw", padded[:, :, i : i + 12, j : j + 12], args[1][:, :, i, j])
        for i in range(3)
        for j in range(3)
    )
    ctx = TuneContext(func, target="llvm", space_generator=PostOrderApply(), rand_state=0)
    spaces, post = ctx.generate_design_space(), ctx.space_generator.postprocs
    checked, tails = 0, 0
    for seed in range(1, 60):
        sch = tir.Schedule(ctx.mod, seed=seed, error_render_level="none")
        try:  # the space's instructions with fresh decisions
            tir.Trace(spaces[seed % len(spaces)].trace.insts, {}).apply_to_schedule(
                sch, remove_postproc=True
            )
        except tir.ScheduleError:
            continue
        sch.enter_postproc()
        if not all(p.apply(sch) for p in post):
            continue
        lib = build(sch.mod, CPU)
        got = lib.pack_weights(*[a.copy() for a in args])
        lib(*got)
        np.testing.assert_allclose(got[-1], want, rtol=1e-4, atol=1e-4, err_msg=str(sch.trace))
        checked += 1
        src = lib.get_source()
        tails += "accumulators of 8/4 lanes" in src or "accumulators of 4/2 lanes" in src
        if checked >= 10 and tails:
            break
    assert checked >= 8
    assert tails, "no sampled schedule kept a tile with tail vectors in accumulators"
