"""estimate_flops: arithmetic operations per run, from the IR."""

import pytest

from metaschedule import te
from metaschedule.flop_count import estimate_flops
from metaschedule.schedule import Schedule
from metaschedule.te import ops
from metaschedule.testing.tuning_records import matmul, matmul_relu
from metaschedule.tir.function import IRModule


def test_matmul_counts_a_multiply_add_per_point():
    assert estimate_flops(matmul(64)) == 2 * 64**3
    assert estimate_flops(matmul(8, 4, 16)) == 2 * 8 * 4 * 16


def test_fused_ops_add_up():
    # matmul, then a max against zero per output element
    assert estimate_flops(matmul_relu(16)) == 2 * 16**3 + 16 * 16


def test_elementwise_and_copies():
    a = te.placeholder((10, 20), "float32", "A")
    b = te.placeholder((10, 20), "float32", "B")
    assert estimate_flops(te.create_prim_func([a, b, ops.add(a, b)])) == 200
    assert estimate_flops(te.create_prim_func([a, ops.transpose(a, (1, 0))])) == 0
    exp = te.compute((10, 20), lambda i, j: te.exp(a[i, j]) * 2.0, name="E")
    assert estimate_flops(te.create_prim_func([a, exp])) == 2 * 200


def test_index_arithmetic_is_not_counted():
    a = te.placeholder((64,), "float32", "A")
    shifted = te.compute((32,), lambda i: a[i * 2 + 1], name="S")
    assert estimate_flops(te.create_prim_func([a, shifted])) == 0


def test_scheduling_keeps_the_count_and_modules_sum():
    func = matmul(32)
    sch = Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(i, [4, 8])
    sch.reorder(k, j)
    assert estimate_flops(sch.mod) == estimate_flops(func)
    assert estimate_flops(IRModule({"a": matmul(8), "b": matmul(4)})) == 2 * (8**3 + 4**3)


def test_unknown_statements_are_reported():
    from metaschedule.tir.stmt import Stmt

    class Odd(Stmt):
        pass

    with pytest.raises(TypeError, match="Odd"):
        estimate_flops(matmul(4).with_body(Odd()))
