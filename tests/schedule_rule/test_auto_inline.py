"""AutoInline: which blocks are inlined, and that inlining keeps the numbers."""

import pytest

from metaschedule import te
from metaschedule.schedule import Schedule
from metaschedule.schedule_rule import AutoInline
from metaschedule.tir import op

LLVM = {
    "into_producer": False,
    "into_consumer": True,
    "inline_const_tensor": True,
    "disallow_if_then_else": True,
    "require_injective": True,
    "require_ordered": True,
    "disallow_op": ["tir.exp"],
}


def rule(**overrides):
    return AutoInline(**{**LLVM, **overrides})


def blocks(sch):
    from metaschedule.tir import BlockRealize
    from metaschedule.tir.functor import post_order_visit

    out = []
    post_order_visit(
        sch.mod["main"].body,
        lambda n: out.append(n.block.name_hint) if isinstance(n, BlockRealize) else None,
    )
    return [b for b in out if b != "root"]


def then_row_sum(make_b, n=4, name="B"):
    """``C[i] = sum_k B[i, k]`` after a producer ``B = make_b(A)`` (a reduction, so the
    function is not all spatial and the strict conditions apply)."""
    a = te.placeholder((n, n), "float32", "A")
    b = te.compute((n, n), lambda i, j: make_b(a, i, j), name=name)
    k = te.reduce_axis((0, n), "k")
    c = te.compute((n,), lambda i: te.sum(b[i, k], axis=k), name="C")
    return te.create_prim_func([a, c])


def test_elementwise_chain_is_inlined_into_its_consumer(ck):
    a = te.placeholder((8, 8), "float32", "A")
    b = te.compute((8, 8), lambda i, j: a[i, j] * 2.0, name="B")
    c = te.compute((8, 8), lambda i, j: b[i, j] + 1.0, name="C")
    d = te.compute((8, 8), lambda i, j: op.max(c[i, j], 0.0), name="D")
    func = te.create_prim_func([a, d])
    (sch,) = ck.spaces(func, [rule()])
    assert blocks(sch) == ["D"]
    assert ck.kinds(sch).count("ComputeInline") == 2
    ck.assert_same_numbers(func, sch)


def test_matmul_epilogue_is_inlined_but_not_the_reduction(ck, wl):
    func = wl.conv2d(relu=True)
    (sch,) = ck.spaces(func, [rule()])
    # T_add (bias) goes into T_relu; the padding has a Select; conv is a reduction
    assert blocks(sch) == ["PaddedInput", "conv2d_nhwc", "T_relu"]
    ck.assert_same_numbers(func, sch)


@pytest.mark.parametrize("strict, kept", [(True, True), (False, False)])
def test_disallowed_op_keeps_the_block(ck, strict, kept):
    func = then_row_sum(lambda a, i, j: op.exp(a[i, j]))
    (sch,) = ck.spaces(func, [rule(disallow_op=["tir.exp"] if strict else None)])
    assert ("B" in blocks(sch)) is kept
    ck.assert_same_numbers(func, sch)


def test_plain_intrinsic_names_are_accepted(ck):
    func = then_row_sum(lambda a, i, j: op.exp(a[i, j]))
    (sch,) = ck.spaces(func, [rule(disallow_op=["exp"])])
    assert "B" in blocks(sch)


@pytest.mark.parametrize("strict, kept", [(True, True), (False, False)])
def test_branching_block_is_kept_when_disallowed(ck, strict, kept):
    func = then_row_sum(lambda a, i, j: op.if_then_else(a[i, j] > 0.0, a[i, j], 0.0))
    (sch,) = ck.spaces(func, [rule(disallow_if_then_else=strict)])
    assert ("B" in blocks(sch)) is kept
    ck.assert_same_numbers(func, sch)


@pytest.mark.parametrize("strict, kept", [(True, True), (False, False)])
def test_transposing_read_is_not_ordered(ck, strict, kept):
    func = then_row_sum(lambda a, i, j: a[j, i] * 2.0)
    (sch,) = ck.spaces(func, [rule(require_ordered=strict)])
    assert ("B" in blocks(sch)) is kept
    ck.assert_same_numbers(func, sch)


@pytest.mark.parametrize("strict, kept", [(True, True), (False, False)])
def test_diagonal_read_is_not_injective(ck, strict, kept):
    func = then_row_sum(lambda a, i, j: a[i, i] * 2.0)  # B[i, j] reads A[i, i]
    (sch,) = ck.spaces(func, [rule(require_injective=strict)])
    assert ("B" in blocks(sch)) is kept
    ck.assert_same_numbers(func, sch)


@pytest.mark.parametrize("const_tensor, kept", [(True, False), (False, True)])
def test_constant_tensor_is_inlined_despite_its_branch(ck, const_tensor, kept):
    a = te.placeholder((4, 4), "float32", "A")
    b = te.compute((4, 4), lambda i, j: op.if_then_else(i > j, 1.0, 0.0), name="B")
    k = te.reduce_axis((0, 4), "k")
    c = te.compute((4,), lambda i: te.sum(a[i, k] * b[i, k], axis=k), name="C")
    func = te.create_prim_func([a, c])
    (sch,) = ck.spaces(func, [rule(inline_const_tensor=const_tensor)])
    assert ("B" in blocks(sch)) is kept
    ck.assert_same_numbers(func, sch)


def test_all_spatial_function_ignores_the_strict_conditions(ck):
    a = te.placeholder((8,), "float32", "A")
    b = te.compute((8,), lambda i: op.exp(a[i]), name="B")
    c = te.compute((8,), lambda i: b[i] + 1.0, name="C")
    func = te.create_prim_func([a, c])
    (sch,) = ck.spaces(func, [rule()])
    assert blocks(sch) == ["C"]
    ck.assert_same_numbers(func, sch)


def test_into_producer_reverse_inlines_a_consumer(ck):
    a = te.placeholder((8,), "float32", "A")
    b = te.compute((8,), lambda i: a[i] * 2.0, name="B")
    c = te.compute((8,), lambda i: b[i] + 1.0, name="C")
    func = te.create_prim_func([a, c])
    (sch,) = ck.spaces(func, [rule(into_producer=True, into_consumer=False)])
    assert "ReverseComputeInline" in ck.kinds(sch)
    assert blocks(sch) == ["B"]
    ck.assert_same_numbers(func, sch)


def test_no_consumer_or_reduction_producer_means_no_inlining(ck, wl):
    func = wl.matmul()
    (sch,) = ck.spaces(func, [rule(into_producer=True)])
    assert ck.kinds(sch) == ["GetBlock", "GetBlock"]  # the lookups only


def test_applied_directly_to_the_root_block_does_nothing():
    func = then_row_sum(lambda a, i, j: a[i, j] * 2.0)
    sch = Schedule(func)
    root = sch.get_block("root")
    assert rule().apply(sch, root) == [sch]
    assert [i.kind.name for i in sch.trace.insts] == ["GetBlock"]


def test_bad_disallow_op():
    with pytest.raises(TypeError, match="disallow_op"):
        rule(disallow_op=[1])
