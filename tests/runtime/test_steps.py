"""The step runner: a library's kernels called in order by one C call."""

import ctypes

import numpy as np
import pytest

import metaschedule as ms
from metaschedule import te
from metaschedule.runtime.steps import StepProgram
from metaschedule.tir.function import IRModule


def _two_kernels():
    """``scale`` (B = A * 3) and ``gather`` (C = B[I] + 1): the second reads the first's
    output, so the order of the calls shows in the result."""
    a = te.placeholder((8,), name="A")
    b = te.compute((8,), lambda i: a[i] * 3.0, name="B")
    b_in = te.placeholder((8,), name="B")
    idx = te.placeholder((4,), "int32", name="I")
    c = te.compute((4,), lambda i: b_in[idx[i]] + 1.0, name="C")
    return IRModule(
        {
            "scale": te.create_prim_func([a, b]),
            "gather": te.create_prim_func([b_in, idx, c]),
        }
    )


@pytest.mark.compiler
def test_the_calls_run_in_order_and_the_first_failure_stops_the_rest():
    lib = ms.build(_two_kernels(), "llvm", debug=True)  # bounds-checked: a bad index fails
    scale, gather = lib["scale"], lib["gather"]
    a = np.arange(8, dtype="float32")
    b, c, c2 = np.zeros(8, "float32"), np.zeros(4, "float32"), np.zeros(4, "float32")
    idx = np.array([7, 0, 2, 5], "int32")
    calls = [
        (scale, scale.pack_args((a, b))),
        (gather, gather.pack_args((b, idx, c))),
        (gather, gather.pack_args((b, idx, c2))),
    ]
    program = StepProgram.of(lib, calls)
    assert program is not None and program.count == 3
    assert program.run() == (0, -1)
    np.testing.assert_array_equal(b, a * 3)
    np.testing.assert_array_equal(c, a[idx] * 3 + 1)
    np.testing.assert_array_equal(c2, c)

    # the second call's index goes out of bounds: it fails, the third does not run
    idx[:] = [0, 1, 9, 2]
    c2[:] = -1
    status, failed = program.run()
    assert status != 0 and failed == 1
    np.testing.assert_array_equal(c2, -1)

    # a slot rewritten between runs is what the next run reads
    idx[:] = [1, 1, 1, 1]
    a2 = np.full(8, 2.0, "float32")
    calls[0][1][0] = a2.ctypes.data
    assert program.run() == (0, -1)
    np.testing.assert_array_equal(c, np.full(4, 7.0))


@pytest.mark.compiler
def test_only_a_libraries_own_kernels_and_an_old_library_has_no_program():
    lib, other = ms.build(_two_kernels(), "llvm"), ms.build(_two_kernels(), "llvm")
    a, b = np.ones(8, "float32"), np.zeros(8, "float32")
    with pytest.raises(ValueError, match="is not a function of"):
        StepProgram.of(lib, [(other["scale"], other["scale"].pack_args((a, b)))])

    class OldLibrary:  # a library without __ms_run_steps (built by an older version)
        _lib = type("CDLL", (), {})()

    assert StepProgram.of(OldLibrary(), []) is None
    assert isinstance(lib._lib.__ms_run_steps, ctypes._CFuncPtr)
