"""blockize: outer block structure, bindings, regions, numbers, trace round trip, errors."""

import numpy as np
import pytest

from metaschedule import te, tir
from metaschedule.testing import assert_unchanged, matmul, matmul_relu
from metaschedule.testing.primitive_check import check_primitives as check
from metaschedule.tir import IterType

# ----------------------------------------------------------------------------- helpers


def conv():
    data = te.placeholder((1, 6, 6, 4), "float32", "data")
    kernel = te.placeholder((3, 3, 4, 8), "float32", "kernel")
    return te.create_prim_func([data, kernel, te.ops.conv2d_nhwc(data, kernel, padding=1)])


def kinds(block):
    return "".join("S" if iv.iter_type == IterType.DATA_PAR else "R" for iv in block.iter_vars)


def regions(regs):
    return {r.buffer.name: [(str(x.min), str(x.extent)) for x in r.region] for r in regs}


def tiled(func):
    sch = tir.Schedule(func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [2, 4])
    j0, j1 = sch.split(j, [3, 4])
    k0, k1 = sch.split(k, [2, 4])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    return sch, c, (i0, j0, k0, i1, j1, k1)


# ----------------------------------------------------------------------------- loops


def test_blockize_a_matmul_tile():
    func = matmul(8, 12, 8)
    sch, c, (i0, j0, k0, i1, _j1, _k1) = tiled(func)
    o = sch.blockize(i1)
    outer = sch.get(o)
    assert outer.name_hint == "C_o" and kinds(outer) == "SSR"
    assert [iv.dom.extent.value for iv in outer.iter_vars] == [2, 3, 2]
    assert regions(outer.writes) == {"C": [("v_i_o * 4", "4"), ("v_j_o * 4", "4")]}
    assert regions(outer.reads) == {
        "A": [("v_i_o * 4", "4"), ("v_k_o * 4", "4")],
        "B": [("v_k_o * 4", "4"), ("v_j_o * 4", "4")],
    }
    inner = sch.state.block_realize("main", "C")
    assert [str(v) for v in inner.iter_values] == [
        "v_i_o * 4 + i_1",
        "v_j_o * 4 + j_1",
        "v_k_o * 4 + k_1",
    ]
    assert inner.block.init is not None  # runs once, when v_k reaches 0
    assert [sch.get(lp) for lp in sch.get_loops(o)] == [sch.get(x) for x in (i0, j0, k0)]
    assert sch.get(sch.get_loops(c)[0]) is sch.get(i1)  # inner loops keep their LoopRVs
    check(sch, func)


def test_blockize_fused_and_split_loop_without_unit_iters():
    func = matmul(8, 12, 8)
    sch = tir.Schedule(func)
    c = sch.get_block("C")
    i, j, _k = sch.get_loops(c)
    f = sch.fuse(i, j)
    _, f1 = sch.split(f, [None, 4])
    o = sch.blockize(f1, preserve_unit_iters=False)
    assert kinds(sch.get(o)) == "SS"  # the reduction lies wholly inside
    assert [str(v) for v in sch.state.block_realize("main", "C_o").iter_values] == [
        "i_j_fused_0 // 3",
        "i_j_fused_0 % 3",
    ]
    check(sch, func)


@pytest.mark.parametrize(
    "preserve, n_iters, region",
    [
        (True, 3, [("v_i_o * 8", "8"), ("v_j_o * 12", "12")]),
        (False, 0, [("0", "8"), ("0", "12")]),
    ],
)
def test_blockize_the_outermost_loop(preserve, n_iters, region):
    func = matmul(8, 12, 8)
    sch = tir.Schedule(func)
    c = sch.get_block("C")
    o = sch.blockize(sch.get_loops(c)[0], preserve_unit_iters=preserve)
    outer = sch.get(o)
    assert len(outer.iter_vars) == n_iters
    assert all(iv.dom.extent.value == 1 for iv in outer.iter_vars)
    assert regions(outer.writes) == {"C": region}
    check(sch, func)


def test_blockize_with_a_predicate_and_on_conv():
    func = matmul(7, 12, 8)
    sch = tir.Schedule(func)
    c = sch.get_block("C")
    i, _, _ = sch.get_loops(c)
    _i0, i1 = sch.split(i, [None, 4])  # 8 > 7: guarded by a predicate
    sch.blockize(i1)
    assert "<" in str(sch.state.block_realize("main", "C").predicate)
    check(sch, func)
    func = conv()
    sch = tir.Schedule(func)
    b = sch.get_block("conv2d_nhwc")
    loops = sch.get_loops(b)
    co0, co1 = sch.split(loops[3], [2, 4])
    sch.reorder(co0, loops[4], loops[5], loops[6], co1)
    sch.blockize(co1)
    check(sch, func)


@pytest.mark.compiler
def test_blockize_twice_and_build():
    func = matmul(8, 12, 8)
    sch, _c, (_i0, _j0, k0, _i1, j1, _k1) = tiled(func)
    sch.blockize(j1)
    sch.blockize(k0)
    check(sch, func)
    from metaschedule.codegen.build import build

    rng = np.random.default_rng(2)
    a = rng.standard_normal((8, 8)).astype("float32")
    b = rng.standard_normal((8, 12)).astype("float32")
    out = np.zeros((8, 12), "float32")
    build(sch.mod)(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- block lists


def test_blockize_sibling_blocks():
    func = matmul_relu(8, 12, 8, select=True)
    sch = tir.Schedule(func)
    o = sch.blockize([sch.get_block("C"), sch.get_block("D")])
    outer = sch.get(o)
    assert outer.name_hint == "outer_C_D" and outer.iter_vars == ()
    assert set(regions(outer.writes)) == {"C", "D"}
    check(sch, func)


def test_blockize_blocks_under_a_shared_loop():
    func = matmul_relu(8, 12, 8, select=True)
    sch = tir.Schedule(func)
    c, d = sch.get_block("C"), sch.get_block("D")
    i = sch.get_loops(c)[0]
    sch.reverse_compute_at(d, i)
    o = sch.blockize([d, c])
    outer = sch.get(o)
    assert outer.name_hint == "outer_C_D" and kinds(outer) == "S"
    assert regions(outer.writes)["D"] == [("vi", "1"), ("0", "12")]
    check(sch, func)


# ----------------------------------------------------------------------------- errors


def test_blockize_errors():
    sch = tir.Schedule(matmul_relu(8, 12, 8, select=True))
    c, d = sch.get_block("C"), sch.get_block("D")
    i, j, k = sch.get_loops(c)
    sch.reverse_compute_at(d, i)
    assert_unchanged(sch, lambda: sch.blockize(i), r"must hold exactly one block.*\['C', 'D'\]")
    assert_unchanged(sch, lambda: sch.blockize("loop"), "expected a LoopRV or a non-empty list")
    assert_unchanged(sch, lambda: sch.blockize([]), "expected a LoopRV or a non-empty list")
    assert_unchanged(sch, lambda: sch.blockize([c, c]), "must be distinct blocks")
    f = sch.fuse(j, k)
    _, f1 = sch.split(f, [None, 5])  # 5 does not divide k's extent 8
    assert_unchanged(
        sch,
        lambda: sch.blockize(f1),
        "the binding v_j = .* of block 'C' cannot be divided into a part of the "
        "loops above j_k_fused_1",
    )

    A = te.placeholder((4, 6), "float32", "A")
    sch = tir.Schedule(te.create_prim_func([A, te.ops.softmax(A)]))
    b0, b2 = sch.get_block("T_softmax_maxelem"), sch.get_block("T_softmax_expsum")
    assert_unchanged(sch, lambda: sch.blockize([b0, b2]), "must be consecutive children")


def test_blockize_rejects_non_affine_bindings():
    import dataclasses

    from metaschedule.tir.functor import Mutator

    class _Square(Mutator):  # v_i = i * i // 8: not an affine map of the loops
        def visit_BlockRealize(self, r):
            if r.block.name_hint != "C":
                return self.generic_visit(r)
            i = r.iter_values[0]
            return dataclasses.replace(r, iter_values=((i * i) // 8, *r.iter_values[1:]))

    func = matmul(8, 12, 8)
    func = func.with_body(_Square().visit(func.body))
    sch = tir.Schedule(func)
    i = sch.get_loops(sch.get_block("C"))[0]
    assert_unchanged(
        sch, lambda: sch.blockize(i), r"block 'C' has non-affine bindings \[v_i = i \* i // 8, "
    )
