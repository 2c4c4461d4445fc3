"""Vector max/min: one x86 vmaxps/vminps where the compiler targets it, with exactly the
meaning of the scalar code (``a > b ? a : b``): a NaN or an equal lane gives ``b``."""

import numpy as np
import pytest

from metaschedule import te
from metaschedule.codegen import build, c_codegen, codegen_c
from metaschedule.schedule import Schedule
from metaschedule.te import ops
from metaschedule.testing.isas import AVX2, AVX512, SSE2
from metaschedule.tir.transform import lower


@pytest.mark.compiler
@pytest.mark.parametrize("which", ["max", "min"])
@pytest.mark.parametrize("lanes", [4, 8, 16])
def test_vector_max_min_keep_the_scalar_meaning_on_nan_and_signed_zero(which, lanes, monkeypatch):
    # each width as written (c_autovector would widen 4 or 8 lanes with the loop above)
    monkeypatch.setattr(c_codegen, "AUTO_VECTORIZE", False)
    a = te.placeholder((64,), "float32", "a")
    b = te.placeholder((64,), "float32", "b")
    op = ops.maximum if which == "max" else ops.minimum
    func = te.create_prim_func([a, b, op(a, b)])
    sch = Schedule(func)
    (block,) = sch.get_child_blocks(sch.get_block("root"))
    (loop,) = sch.get_loops(block)
    _, inner = sch.split(loop, [None, lanes])
    sch.vectorize(inner)
    target = {4: SSE2, 8: AVX2, 16: AVX512}[lanes]  # an ISA whose register holds them
    code = codegen_c(lower(sch.mod["main"]), target).code
    assert f"ms_{which}_f32x{lanes}" in code
    if lanes * 32 in (128, 256, 512):
        assert f"__builtin_ia32_{which}ps" in code  # behind its #if, with the generic fallback
    rng = np.random.default_rng(0)
    x = rng.standard_normal(64).astype("float32")
    y = rng.standard_normal(64).astype("float32")
    x[:8] = [np.nan, 1.0, np.nan, 0.0, -0.0, 2.0, -np.inf, np.inf]
    y[:8] = [1.0, np.nan, np.nan, -0.0, 0.0, 2.0, np.inf, -np.inf]
    out = np.zeros(64, "float32")
    build(sch.mod, target)(x, y, out)
    want = np.where(x > y, x, y) if which == "max" else np.where(x < y, x, y)
    np.testing.assert_array_equal(out, want)  # NaN positions and zero signs included
    np.testing.assert_array_equal(np.signbit(out), np.signbit(want))
