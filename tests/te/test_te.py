"""te: placeholder, compute, reduce_axis, reducers and their error messages."""

import numpy as np
import pytest

from metaschedule import te, tir
from metaschedule.te.tensor import tensor_of_buffer


def test_placeholder_shape_dtype_and_buffer():
    A = te.placeholder((4, np.int64(3), tir.IntImm("int32", 2)), "float16", name="A")
    assert A.shape == (4, 3, 2)
    assert all(type(s) is int for s in A.shape)
    assert A.dtype == "float16" and A.name == "A" and A.ndim == 3
    assert isinstance(A.buffer, tir.Buffer) and A.buffer.name == "A"
    assert A.buffer.static_shape() == (4, 3, 2)
    assert isinstance(A.op, te.PlaceholderOp) and A.op.input_tensors == ()
    assert A.op.output(0) is A
    assert tensor_of_buffer(A.buffer) is A
    assert te.placeholder(5).shape == (5,)


def test_indexing_builds_buffer_loads():
    A = te.placeholder((4, 5), name="A")
    i = tir.Var("i")
    load = A[i, 2]
    assert isinstance(load, tir.BufferLoad) and load.buffer is A.buffer
    assert load.indices[0] is i and load.indices[1].value == 2
    assert A(i, 1).buffer is A.buffer
    with pytest.raises(IndexError, match="2 dimensions"):
        A[i]
    with pytest.raises(TypeError, match="sliced"):
        A[i, 0:2]
    with pytest.raises(TypeError, match="not iterable"):
        list(A)


@pytest.mark.parametrize("dim", [tir.Var("n"), "n"])
def test_symbolic_shape_is_rejected(dim):
    with pytest.raises(ValueError, match="dynamic shapes are not supported yet.*tensor X"):
        te.placeholder((dim, 4), name="X")
    with pytest.raises(ValueError, match="dynamic shapes are not supported yet.*tensor Y"):
        te.compute((4, dim), lambda i, j: i + j, name="Y")


def test_bad_dtype_and_dims():
    with pytest.raises(TypeError, match="float32.*float64|float64.*float32"):
        te.placeholder((4,), "complex64", name="Z")
    with pytest.raises(ValueError, match="positive"):
        te.placeholder((4, 0), name="Z")
    with pytest.raises(ValueError, match="positive"):
        te.placeholder((-1,), name="Z")
    assert te.placeholder((2,), np.float64).dtype == "float64"


def test_compute_axes_named_after_parameters():
    A = te.placeholder((4, 5), name="A")
    B = te.compute(
        (4, 5), lambda row, col: A[row, col] * 2.0, name="B", tag="elemwise", attrs={"k": 1}
    )
    op = B.op
    assert isinstance(op, te.ComputeOp)
    assert [iv.var.name for iv in op.axis] == ["row", "col"]
    assert [int(iv.dom.extent) for iv in op.axis] == [4, 5]
    assert all(iv.iter_type == tir.IterType.DATA_PAR for iv in op.axis)
    assert op.reduce_axis == () and op.input_tensors == (A,)
    assert op.tag == "elemwise" and op.attrs == {"k": 1}
    assert B.dtype == "float32" and B.shape == (4, 5) and B.name == "B"
    assert isinstance(op.body[0], tir.Mul)


def test_compute_varargs_and_tuple_forms():
    A = te.placeholder((2, 3, 4), name="A")
    B = te.compute(A.shape, lambda *idx: A[idx] + 1.0)
    assert [iv.var.name for iv in B.op.axis] == ["i0", "i1", "i2"]
    C = te.compute(A.shape, lambda idx: A[idx])
    assert len(C.op.axis) == 3 and C.op.input_tensors == (A,)
    with pytest.raises(ValueError, match="takes 2 arguments but the shape has 3"):
        te.compute(A.shape, lambda i, j: A[i, j, 0])


def test_compute_dtype_follows_body_and_int_body():
    A = te.placeholder((4,), "int8", name="A")
    B = te.compute((4,), lambda i: te.cast("int32", A[i]) * 3)
    assert B.dtype == "int32"
    C = te.compute((4,), lambda i: i * 2)
    assert C.dtype == "int32" and C.op.input_tensors == ()


def test_input_tensors_deduplicated_in_order():
    A = te.placeholder((4,), name="A")
    B = te.placeholder((4,), name="B")
    C = te.compute((4,), lambda i: B[i] + A[i] * B[i] + A[3 - i])
    assert C.op.input_tensors == (B, A)


def test_reduce_axis_and_sum():
    A = te.placeholder((4, 6), name="A")
    k = te.reduce_axis((1, 6), name="k")
    assert k.iter_type == tir.IterType.COMM_REDUCE
    assert int(k.dom.min) == 1 and int(k.dom.extent) == 5 and k.var.name == "k"
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    red = B.op.body[0]
    assert isinstance(red, tir.Reduce) and B.op.reduce_axis == (k,)
    assert red.source.buffer is A.buffer
    assert isinstance(red.combiner.identity, tir.FloatImm) and red.combiner.identity.value == 0
    with pytest.raises(ValueError, match="empty domain"):
        te.reduce_axis((3, 3))
    with pytest.raises(ValueError, match="dynamic shapes"):
        te.reduce_axis((0, tir.Var("n")))


def test_max_min_identities_and_binary_use():
    A = te.placeholder((4, 6), "int32", name="A")
    k = te.reduce_axis((0, 6), name="k")
    mx = te.max(A[0, k], axis=k)
    mn = te.min(A[0, k], axis=k)
    assert mx.combiner.identity.value == np.iinfo(np.int32).min
    assert mn.combiner.identity.value == np.iinfo(np.int32).max
    i = tir.Var("i")
    assert isinstance(te.max(i, 3), tir.Max) and isinstance(te.min(i, 3), tir.Min)
    F = te.placeholder((4,), name="F")
    assert te.max(F[0], axis=[k]).combiner.identity.value == float("-inf")


def test_where_and_init():
    A = te.placeholder((8,), name="A")
    k = te.reduce_axis((0, 8), name="k")
    r = te.sum(A[k], axis=k, where=k < 4, init=1.5)
    assert isinstance(r.condition, tir.LT)
    assert r.combiner.identity.value == 1.5
    with pytest.raises(TypeError, match="bool"):
        te.sum(A[k], axis=k, where=A[k])


def test_comm_reducer_custom():
    prod = te.comm_reducer(lambda x, y: x * y, lambda t: te.const(1, t), name="prod")
    A = te.placeholder((3, 5), name="A")
    k = te.reduce_axis((0, 5), name="k")
    B = te.compute((3,), lambda i: prod(A[i, k], axis=k))
    red = B.op.body[0]
    assert isinstance(red.combiner.result, tir.Mul) and red.combiner.identity.value == 1.0
    combined = red.combiner(tir.const(2.0), tir.const(3.0))
    assert isinstance(combined, tir.Mul)


def test_nested_reduce_rejected():
    A = te.placeholder((4, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    with pytest.raises(ValueError, match="reduction may only be the whole body"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k) + 1.0)
    with pytest.raises(ValueError, match="cannot reduce a reduction"):
        te.sum(te.sum(A[0, k], axis=k), axis=k)


def test_free_variables_and_foreign_buffers_rejected():
    A = te.placeholder((4,), name="A")
    n = te.var("n")
    with pytest.raises(ValueError, match="variable.*n"):
        te.compute((4,), lambda i: A[i + n])
    k = te.reduce_axis((0, 4), name="k")
    with pytest.raises(ValueError, match="k"):
        te.compute((4,), lambda i: A[k])  # a reduce axis outside a reduction
    buf = tir.decl_buffer((4,), name="raw")
    with pytest.raises(ValueError, match="raw.*not a te tensor"):
        te.compute((4,), lambda i: buf[i])


def test_math_reexports_and_if_then_else():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: te.if_then_else(i > 1, te.exp(A[i]), te.sqrt(A[i])))
    body = B.op.body[0]
    assert isinstance(body, tir.Select)
    assert body.true_value.op == "exp" and body.false_value.op == "sqrt"
    for name in ("log", "rsqrt", "tanh", "erf", "sigmoid", "fabs", "floor", "pow"):
        assert callable(getattr(te, name))
    assert te.const(2.0).dtype == "float32"


def test_rank0_tensor_as_scalar():
    S = te.placeholder((), name="S")
    assert S.shape == () and S.ndim == 0
    A = te.placeholder((3,), name="A")
    B = te.compute((3,), lambda i: A[i] * S.as_expr())
    assert B.op.input_tensors == (A, S)
