"""rfactor and decompose_reduction: structure, numbers, trace round trip, errors."""

import numpy as np
import pytest

from metaschedule import te, tir
from metaschedule.testing import assert_unchanged, matmul, matmul_relu
from metaschedule.testing.primitive_check import check_primitives as check
from metaschedule.tir import IterType

# ----------------------------------------------------------------------------- helpers


def softmax():
    A = te.placeholder((3, 10), "float32", "A")
    return te.create_prim_func([A, te.ops.softmax(A)])


def kinds(block):
    return "".join("S" if iv.iter_type == IterType.DATA_PAR else "R" for iv in block.iter_vars)


# ----------------------------------------------------------------------------- rfactor


@pytest.mark.parametrize(
    "axis, shape",
    [(0, [4, 6, 5]), (1, [6, 4, 5]), (2, [6, 5, 4]), (-1, [6, 5, 4]), (-3, [4, 6, 5])],
)
def test_rfactor_matmul(axis, shape):
    func = matmul(6, 5, 8)
    sch = tir.Schedule(func)
    c = sch.get_block("C")
    _, _, k = sch.get_loops(c)
    _, k1 = sch.split(k, [2, 4])
    rf = sch.rfactor(k1, axis)
    rf_block, wb = sch.get(rf), sch.get(c)
    assert rf_block.name_hint == "C_rf" and wb.name_hint == "C"
    (w,) = rf_block.writes
    assert w.buffer.name == "C_rf" and [s.value for s in w.buffer.shape] == shape
    assert kinds(rf_block) == "SSSR" and kinds(wb) == "RSS"
    assert [sch.get(lp).extent.value for lp in sch.get_loops(c)] == [6, 5, 4]
    assert [sch.get(lp).extent.value for lp in sch.get_loops(rf)] == [6, 5, 2, 4]
    check(sch, func)


def test_rfactor_outer_split_part_with_a_predicate():
    func = matmul(6, 5, 10)
    sch = tir.Schedule(func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    k0, _ = sch.split(k, [None, 4])  # 3 * 4 > 10: a predicate guards the block
    sch.reorder(k0, i, j)
    sch.rfactor(k0, 0)
    check(sch, func)


@pytest.mark.parametrize("name", ["T_softmax_maxelem", "T_softmax_expsum"])
def test_rfactor_softmax_max_and_sum(name):
    func = softmax()
    sch = tir.Schedule(func)
    b = sch.get_block(name)
    _, k = sch.get_loops(b)
    k0, _k1 = sch.split(k, [5, 2])
    sch.rfactor(k0, 1)
    check(sch, func)


def test_rfactor_and_decompose_on_conv():
    data = te.placeholder((1, 4, 4, 4), "float32", "data")
    kernel = te.placeholder((3, 3, 4, 2), "float32", "kernel")
    func = te.create_prim_func([data, kernel, te.ops.conv2d_nhwc(data, kernel, padding=1)])
    sch = tir.Schedule(func)
    conv = sch.get_block("conv2d_nhwc")
    loops = sch.get_loops(conv)
    rf = sch.rfactor(loops[5], 4)  # rx
    assert [s.value for s in sch.get(rf).writes[0].buffer.shape] == [1, 4, 4, 2, 3]
    sch.decompose_reduction(rf, sch.get_loops(rf)[4])
    check(sch, func)


@pytest.mark.compiler
def test_rfactor_min_product_and_build():
    for red in (te.min, te.comm_reducer(lambda x, y: x * y, lambda t: tir.const(1.0, t))):
        func = matmul(6, 5, 4, reducer=red)
        sch = tir.Schedule(func)
        c = sch.get_block("C")
        sch.rfactor(sch.get_loops(c)[2], 0)
        check(sch, func)
    from metaschedule.codegen.build import build

    func = matmul(6, 5, 8)
    sch = tir.Schedule(func)
    c = sch.get_block("C")
    _, k1 = sch.split(sch.get_loops(c)[2], [2, 4])
    sch.rfactor(k1, 2)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 8)).astype("float32")
    b = rng.standard_normal((8, 5)).astype("float32")
    out = np.zeros((6, 5), "float32")
    build(sch.mod)(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


def test_rfactor_errors():
    sch = tir.Schedule(matmul_relu(6, 5, 8, select=True))
    c, d = sch.get_block("C"), sch.get_block("D")
    i, j, k = sch.get_loops(c)
    assert_unchanged(
        sch, lambda: sch.rfactor(i, 0), "loop i is bound to a data-parallel iter var of block 'C'"
    )
    assert_unchanged(sch, lambda: sch.rfactor(k, 3), r"factor_axis 3 is out of range \[-3, 2\]")
    di = sch.get_loops(d)[0]
    assert_unchanged(sch, lambda: sch.rfactor(di, 0), "block 'D' is not a reduction block")
    jk = sch.fuse(j, k)
    assert_unchanged(sch, lambda: sch.rfactor(jk, 0), "data-parallel")
    sch = tir.Schedule(matmul_relu(6, 5, 8, select=True))
    c, d = sch.get_block("C"), sch.get_block("D")
    i, j, k = sch.get_loops(c)
    sch.reverse_compute_at(d, i)
    assert_unchanged(sch, lambda: sch.rfactor(i, 0), r"must hold exactly one block.*\['C', 'D'\]")
    u = sch.add_unit_loop(c)
    assert_unchanged(sch, lambda: sch.rfactor(u, 0), "loop u is not bound to any reduction")


def test_rfactor_rejects_unrecognised_reducers():
    wrong_init = te.comm_reducer(lambda x, y: x + y, lambda t: tir.const(1.0, t))
    sch = tir.Schedule(matmul(6, 5, 8, reducer=wrong_init))
    k = sch.get_loops(sch.get_block("C"))[2]
    assert_unchanged(
        sch,
        lambda: sch.rfactor(k, 0),
        r"block 'C' is a sum but its init stores T.float32\(1\), not the identity",
    )
    not_comm = te.comm_reducer(lambda x, y: x * 2.0 + y, lambda t: tir.const(0.0, t))
    sch = tir.Schedule(matmul(6, 5, 8, reducer=not_comm))
    k = sch.get_loops(sch.get_block("C"))[2]
    assert_unchanged(sch, lambda: sch.rfactor(k, 0), "does not combine C")


# ----------------------------------------------------------------------------- decompose


@pytest.mark.parametrize("at", [0, 1, 2])
def test_decompose_reduction_matmul(at):
    func = matmul(6, 5, 8)
    sch = tir.Schedule(func)
    c = sch.get_block("C")
    loops = sch.get_loops(c)
    init = sch.decompose_reduction(c, loops[at])
    ib = sch.get(init)
    assert ib.name_hint == "C_init" and sch.get(c).init is None
    assert kinds(ib) == "SS" and ib.reads == ()
    init_loops = [sch.get(lp).loop_var.name for lp in sch.get_loops(init)]
    assert init_loops == ["i", "j"][:at] + ["i_init", "j_init"][at:]
    assert [sch.get(lp) for lp in sch.get_loops(c)] == [sch.get(lp) for lp in loops]
    check(sch, func)


def test_decompose_reduction_below_tiles_with_a_predicate():
    func = matmul(7, 5, 8)
    sch = tir.Schedule(func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 3])  # 9 > 7: predicate
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, j, k0, i1, k1)
    init = sch.decompose_reduction(c, k0)
    assert [sch.get(lp).loop_var.name for lp in sch.get_loops(init)] == ["i_0", "j", "i_1_init"]
    assert "<" in str(sch.state.block_realize("main", "C_init").predicate)
    check(sch, func)


def test_decompose_reduction_softmax():
    func = softmax()
    sch = tir.Schedule(func)
    for name in ("T_softmax_maxelem", "T_softmax_expsum"):
        b = sch.get_block(name)
        sch.decompose_reduction(b, sch.get_loops(b)[1])
    check(sch, func)


def test_decompose_reduction_errors():
    sch = tir.Schedule(matmul_relu(6, 5, 8, select=True))
    c, d = sch.get_block("C"), sch.get_block("D")
    i, j, k = sch.get_loops(c)
    di = sch.get_loops(d)[0]
    assert_unchanged(
        sch, lambda: sch.decompose_reduction(c, di), "loop i is not an ancestor of block 'C'"
    )
    assert_unchanged(
        sch, lambda: sch.decompose_reduction(d, di), "block 'D' is not a reduction block"
    )
    k0, k1 = sch.split(k, [2, 4])
    assert_unchanged(
        sch,
        lambda: sch.decompose_reduction(c, k1),
        "loop k_0, above loop k_1, feeds a reduction iter var of block 'C'",
    )
    jk = sch.fuse(j, k0)
    assert_unchanged(
        sch,
        lambda: sch.decompose_reduction(c, jk),
        "feeds both data-parallel and reduction iter vars",
    )
    sch = tir.Schedule(matmul(6, 5, 8))
    c = sch.get_block("C")
    i = sch.get_loops(c)[0]
    sch.decompose_reduction(c, i)
    assert_unchanged(sch, lambda: sch.decompose_reduction(c, i), "it has no init statement")
