"""``build(..., debug=True)``: every access is bounds-checked in the generated C."""

import numpy as np
import pytest

import metaschedule as ms
from metaschedule import te
from metaschedule.schedule import Schedule


def _gather():
    a = te.placeholder((8,), name="A")
    idx = te.placeholder((4,), "int32", name="I")
    c = te.compute((4,), lambda i: a[idx[i]] * 2.0, name="C")
    return te.create_prim_func([a, idx, c])


@pytest.mark.compiler
def test_debug_build_raises_on_a_data_dependent_out_of_bounds_load():
    mod = ms.build(_gather(), "llvm", debug=True)
    a = np.arange(8, dtype="float32")
    out = np.zeros(4, "float32")
    with pytest.raises(
        IndexError,
        match=r"load A\[.*\] reached flat index 9, but buffer A has "
        r"8 elements",
    ):
        mod(a, np.array([0, 3, 9, 1], "int32"), out)
    # the module stays usable: a good call afterwards computes the right values
    mod(a, np.array([0, 3, 5, 1], "int32"), out)
    np.testing.assert_allclose(out, [0, 6, 10, 2])
    assert "ms_checked" in mod.get_source()
    assert "ms_checked" not in ms.build(_gather(), "llvm").get_source()


@pytest.mark.compiler
def test_debug_build_of_a_vectorized_parallel_schedule_computes_the_same():
    a = te.placeholder((64,), name="A")
    c = te.compute((64,), lambda i: a[i] * 3.0, name="C")
    sch = Schedule(te.create_prim_func([a, c]))
    (i,) = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 8])
    sch.parallel(io)
    sch.vectorize(ii)
    mod = ms.build(sch.mod, "llvm", debug=True)
    x = np.random.rand(64).astype("float32")
    out = np.zeros(64, "float32")
    mod(x, out)
    np.testing.assert_allclose(out, x * 3.0, rtol=1e-6)
