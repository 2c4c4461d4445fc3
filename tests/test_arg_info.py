"""ArgInfo: extraction from PrimFuncs and the JSON round trip."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaschedule.arg_info import ArgInfo, TensorInfo
from metaschedule.testing.tuning_records import matmul
from metaschedule.tir import SUPPORTED_DTYPES, IRModule, PrimFunc, Var, decl_buffer


def test_from_prim_func_lists_every_buffer_parameter():
    infos = ArgInfo.from_prim_func(matmul(4, 6, 8))
    assert infos == [
        TensorInfo("float32", (4, 8)),
        TensorInfo("float32", (8, 6)),
        TensorInfo("float32", (4, 6)),
    ]
    assert ArgInfo.from_entry_func(IRModule({"main": matmul(4)})) == ArgInfo.from_prim_func(
        matmul(4)
    )
    assert ArgInfo.from_entry_func(IRModule({"only": matmul(2)}))[0].shape == (2, 2)


def test_json_layout_and_round_trip():
    info = TensorInfo("int8", (1, 2, 3))
    assert info.as_json() == ["TENSOR", "int8", [1, 2, 3]]
    assert ArgInfo.from_json(["TENSOR", "int8", [1, 2, 3]]) == info
    assert str(info) == 'TensorInfo("int8", [1, 2, 3])'


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(SUPPORTED_DTYPES), st.lists(st.integers(0, 1 << 20), max_size=5))
def test_round_trip_any_tensor(dtype, shape):
    info = TensorInfo(dtype, tuple(shape))
    assert ArgInfo.from_json(info.as_json()) == info


def test_errors_say_what_was_expected():
    with pytest.raises(ValueError, match=r"expected ArgInfo JSON like \['TENSOR'"):
        ArgInfo.from_json(["SCALAR", "int32"])
    with pytest.raises(ValueError, match="TensorInfo JSON"):
        ArgInfo.from_json(["TENSOR", "float32"])
    with pytest.raises(TypeError, match="unsupported dtype"):
        TensorInfo("complex64", (2,))
    with pytest.raises(ValueError, match="non-negative"):
        TensorInfo("float32", (-1,))
    n = Var("n", "int32")
    a = decl_buffer((n,), name="A")
    from metaschedule.tir import Evaluate, const

    func = PrimFunc((a,), Evaluate(const(0)))
    with pytest.raises(ValueError, match="buffer A has a symbolic dimension 0"):
        ArgInfo.from_prim_func(func)
    with pytest.raises(ValueError, match="cannot tell the entry function"):
        ArgInfo.from_entry_func(IRModule({"f": matmul(2), "g": matmul(2)}))
