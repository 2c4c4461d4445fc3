"""The scalar evaluator's intrinsics are the interpreter's (one table), rounded to the dtype."""

import math

import numpy as np
import pytest

from metaschedule.tir.arith.evaluate import call_value
from metaschedule.tir.interpreter import intrinsic_functions
from metaschedule.tir.op import BINARY_INTRINSICS, UNARY_INTRINSICS


@pytest.mark.parametrize("op", UNARY_INTRINSICS)
def test_unary_intrinsics_match_the_interpreter(op):
    expected = float(intrinsic_functions("float64")[op](np.float64(0.7)))
    assert call_value(op, [0.7], "float64") == expected
    assert call_value(op, [0.7], "float32") == float(np.float32(expected))


def test_pow_and_call_errors():
    assert BINARY_INTRINSICS == ("pow",)
    assert call_value("pow", [2.0, 0.5], "float64") == math.sqrt(2.0)
    with pytest.raises(ValueError, match=r"pow\(1 args\); known: .*exp"):
        call_value("pow", [2.0], "float32")
    with pytest.raises(ValueError, match=r"exp\(2 args\)"):
        call_value("exp", [1.0, 2.0], "float32")
    with pytest.raises(ValueError, match=r"cannot evaluate the call nope\(1 args\)"):
        call_value("nope", [1.0], "float32")
