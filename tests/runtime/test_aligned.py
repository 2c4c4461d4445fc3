"""Cache-line aligned arrays (``ms.runtime.empty``/``aligned_copy``), as TVM allocates."""

import numpy as np
import pytest

from metaschedule import runtime
from metaschedule.codegen import build
from metaschedule.runtime.aligned import ALLOC_ALIGNMENT


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "bool", "uint8"])
@pytest.mark.parametrize("shape", [(), 7, (3, 5), (1, 112, 112, 64)])
def test_empty_is_aligned_contiguous_and_of_the_shape(shape, dtype):
    arr = runtime.empty(shape, dtype)
    want = (shape,) if isinstance(shape, int) else shape
    assert arr.shape == want and arr.dtype == np.dtype(dtype)
    assert arr.ctypes.data % ALLOC_ALIGNMENT == 0 and runtime.is_aligned(arr)
    assert arr.flags.c_contiguous and arr.flags.writeable
    arr[...] = 1  # the whole array is usable memory
    assert (arr == 1).all()


def test_other_alignments_and_bad_ones():
    for align in (16, 128, 4096):
        assert runtime.empty((100,), "float32", align).ctypes.data % align == 0
    with pytest.raises(ValueError, match="power of two"):
        runtime.empty((4,), "float32", 48)
    with pytest.raises(ValueError, match="power of two"):
        runtime.is_aligned(np.zeros(4), 0)


def test_aligned_copy_keeps_values_and_is_a_copy():
    src = np.arange(24, dtype=np.float32).reshape(2, 3, 4)[:, ::-1]  # not contiguous
    out = runtime.aligned_copy(src)
    np.testing.assert_array_equal(out, src)
    assert out.flags.c_contiguous and runtime.is_aligned(out)
    out[0, 0, 0] = -1
    assert src[0, 0, 0] != -1
    off = runtime.empty((65,), "float32")[1:]  # 4 bytes past a line
    assert not runtime.is_aligned(off) and runtime.is_aligned(runtime.aligned_copy(off))


@pytest.mark.compiler
def test_kernels_take_aligned_arrays():
    from metaschedule import te

    a = te.placeholder((8, 16), "float32", "a")
    b = te.compute((8, 16), lambda i, j: a[i, j] * 2.0, name="b")
    lib = build(te.create_prim_func([a, b]), "llvm")
    x = runtime.aligned_copy(np.random.default_rng(0).standard_normal((8, 16), dtype=np.float32))
    y = runtime.empty((8, 16), "float32")
    lib(x, y)
    np.testing.assert_array_equal(y, x * 2)
