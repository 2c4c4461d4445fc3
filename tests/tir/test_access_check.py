"""Out-of-bounds accesses: proved statically at create_prim_func / verify, else at run time."""

import numpy as np
import pytest

from metaschedule import te
from metaschedule.schedule import Schedule
from metaschedule.tir import IRVerifyError, verify
from metaschedule.tir.access_check import find_out_of_bounds
from metaschedule.tir.functor import substitute
from metaschedule.tir.interpreter import interpret


def test_shifted_read_past_the_end_is_an_error_naming_tensor_index_and_range():
    b = te.placeholder((16,), name="B")
    c = te.compute((16,), lambda i: b[i + 1], name="C")
    with pytest.raises(IndexError) as err:
        te.create_prim_func([b, c])
    assert "te.compute 'C' reads B[i + 1] with i + 1 in [1, 16], but B has shape (16,)" in str(
        err.value
    )


def test_reduce_axis_longer_than_the_axis_it_reduces_is_an_error():
    a = te.placeholder((16, 16), name="A")
    k = te.reduce_axis((0, 20), name="k")
    c = te.compute((16,), lambda i: te.sum(a[i, k], axis=k), name="C")
    with pytest.raises(IndexError, match=r"A\[i, k\] with k in \[0, 19\], but A has shape"):
        te.create_prim_func([a, c])


def test_negative_index_is_an_error():
    a = te.placeholder((8,), name="A")
    c = te.compute((8,), lambda i: a[i - 1], name="C")
    with pytest.raises(IndexError, match=r"i - 1 in \[-1, 6\]"):
        te.create_prim_func([a, c])


def test_padding_guarded_by_if_then_else_is_not_flagged():
    a = te.placeholder((16,), name="A")
    p = te.compute(
        (18,), lambda i: te.if_then_else(te.all(i >= 1, i < 17), a[i - 1], 0.0), name="P"
    )
    f = te.create_prim_func([a, p])
    verify(f)
    x = np.random.rand(16).astype("float32")
    out = np.zeros(18, "float32")
    interpret(f, x, out)
    np.testing.assert_allclose(out, np.pad(x, 1))


def test_reduction_where_guards_its_source():
    a = te.placeholder((8,), name="A")
    k = te.reduce_axis((0, 10), name="k")
    c = te.compute((1,), lambda i: te.sum(a[k], axis=k, where=k < 8), name="C")
    f = te.create_prim_func([a, c])  # no error: the where clause guards a[k]
    verify(f)
    assert find_out_of_bounds(f) == []
    x = np.arange(1, 9, dtype="float32")
    out = np.zeros(1, "float32")
    interpret(f, x, out)
    assert out[0] == x.sum()  # the 8 guarded steps, the 2 past the end skipped
    # a guard one step too loose lets k = 8 through: proved over the points it lets in
    with pytest.raises(IndexError, match=r"reads A\[k\] with k in \[0, 8\], but A has shape"):
        te.create_prim_func(
            [a, te.compute((1,), lambda i: te.sum(a[k], axis=k, where=k < 9), name="C")]
        )


def test_conditions_on_single_variables_narrow_what_is_checked():
    a = te.placeholder((16,), name="A")

    def padded(cond):
        return te.create_prim_func(
            [a, te.compute((18,), lambda i: te.if_then_else(cond(i), a[i - 1], 0.0), name="P")]
        )

    verify(padded(lambda i: te.all(i >= 1, i < 17)))  # exactly the points inside A
    verify(padded(lambda i: te.all(1 <= i, 17 > i)))  # the constant on either side
    with pytest.raises(IndexError, match=r"i - 1 in \[1, 16\]"):
        padded(lambda i: te.all(i >= 2, i < 18))  # one step too far right
    with pytest.raises(IndexError, match=r"i - 1 in \[-1, 15\]"):
        padded(lambda i: i < 17)  # no lower bound
    # the false side runs where the condition fails: i >= 17 leaves A's 16 elements
    with pytest.raises(IndexError, match=r"i - 1 in \[16, 16\]"):
        te.create_prim_func(
            [a, te.compute((18,), lambda i: te.if_then_else(i < 17, 0.0, a[i - 1]), name="P")]
        )
    # a condition on two variables at once is not understood: left to run time
    b = te.placeholder((8,), name="B")
    c = te.compute((8, 8), lambda i, j: te.if_then_else(i + j < 8, b[i + j], 0.0), name="C")
    f = te.create_prim_func([b, c])
    assert find_out_of_bounds(f) == []
    out = np.zeros((8, 8), "float32")
    x = np.arange(8, dtype="float32")
    interpret(f, x, out)
    i, j = np.indices((8, 8))
    np.testing.assert_array_equal(out, np.where(i + j < 8, x[np.minimum(i + j, 7)], 0.0))


def test_in_bounds_nonlinear_indices_are_accepted():
    a = te.placeholder((4, 4), name="A")
    c = te.compute((16,), lambda i: a[i // 4, i % 4], name="C")
    verify(te.create_prim_func([a, c]))


def test_verify_reports_out_of_bounds_in_a_scheduled_module():
    a = te.placeholder((17,), name="A")
    c = te.compute((16,), lambda i: a[i + 1] * 2.0, name="C")
    f = te.create_prim_func([a, c])
    sch = Schedule(f)
    (i,) = sch.get_loops(sch.get_block("C"))
    sch.split(i, [4, 4])
    verify(sch.mod)
    # swap A for a smaller buffer: the same index now leaves it
    small = te.placeholder((16,), name="A").buffer
    bad = substitute(sch.mod["main"], {}, {f.params[0]: small})
    with pytest.raises(
        IRVerifyError,
        match=r"block 'C' reads A\[v_i \+ 1\] with v_i \+ 1 in "
        r"\[1, 16\], but A has shape \(16,\)",
    ):
        verify(bad)
    assert len(find_out_of_bounds(bad)) == 1


def test_schedule_with_predicate_is_not_flagged():
    a = te.placeholder((10,), name="A")
    c = te.compute((10,), lambda i: a[i] + 1.0, name="C")
    sch = Schedule(te.create_prim_func([a, c]))
    (i,) = sch.get_loops(sch.get_block("C"))
    sch.split(i, [None, 4])  # 3 x 4 > 10: a predicate guards the block
    verify(sch.mod)
    assert find_out_of_bounds(sch.mod["main"]) == []


def test_data_dependent_index_is_checked_by_the_interpreter():
    a = te.placeholder((8,), name="A")
    idx = te.placeholder((4,), "int32", name="I")
    c = te.compute((4,), lambda i: a[idx[i]], name="C")
    f = te.create_prim_func([a, idx, c])  # cannot be judged statically
    verify(f)
    out = np.zeros(4, "float32")
    with pytest.raises(IndexError, match=r"A\[9\] is out of bounds for buffer A of shape \(8,\)"):
        interpret(f, np.zeros(8, "float32"), np.array([0, 1, 9, 2], "int32"), out)
