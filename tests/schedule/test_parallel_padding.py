"""The case of issue 10: a padding block moved under an imperfect tile loop by
``compute_at`` (bindings ``h0 * 4 + ax0``, not affine) can be parallelized, as in TVM,
and the program still computes the convolution (interpreter and native code)."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from metaschedule import te, tir
from metaschedule.schedule.affine import has_affine_binding
from metaschedule.schedule.error import ScheduleError
from metaschedule.te import ops
from metaschedule.tir.interpreter import interpret


def _conv():
    a = te.placeholder((1, 14, 14, 8), "float32", "A")
    w = te.placeholder((3, 3, 8, 8), "float32", "W")
    return te.create_prim_func([a, w, ops.conv2d_nhwc(a, w, stride=1, padding=1)])


def _reference(a, w):
    win = sliding_window_view(np.pad(a, ((0, 0), (1, 1), (1, 1), (0, 0))), (3, 3), axis=(1, 2))
    return np.tensordot(win, w.transpose(2, 0, 1, 3), axes=([3, 4, 5], [0, 1, 2]))


def _schedule():
    sch = tir.Schedule(_conv())
    conv = sch.get_block("conv2d_nhwc")
    n, h, *_ = sch.get_loops(conv)
    h0, _h1 = sch.split(h, [None, 4])  # 14 = 4 x 4 - 2: an imperfect tile
    pad = sch.get_block("PaddedInput")
    sch.compute_at(pad, h0)
    fused = sch.fuse(n, h0)
    return sch, fused, pad


def _data():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1, 14, 14, 8)).astype("float32")
    w = rng.standard_normal((3, 3, 8, 8)).astype("float32")
    return a, w


def test_parallel_over_non_affine_padding_block():
    sch, fused, _ = _schedule()
    assert not has_affine_binding(sch.state, "main", sch.state.block_realize("main", "PaddedInput"))
    sch.parallel(fused)
    a, w = _data()
    out = np.zeros((1, 14, 14, 8), "float32")
    interpret(sch.mod["main"], a, w, out)
    np.testing.assert_allclose(out, _reference(a, w), rtol=1e-4, atol=1e-4)
    assert "sch.parallel(" in str(sch.trace)


def test_parallel_still_rejects_a_reduction_loop():
    sch = tir.Schedule(_conv())
    *_, rc = sch.get_loops(sch.get_block("conv2d_nhwc"))
    with pytest.raises(ScheduleError, match="reduction"):
        sch.parallel(rc)


@pytest.mark.compiler
def test_parallel_padding_builds_and_runs():
    from metaschedule.codegen import build
    from metaschedule.target import Target

    sch, fused, _ = _schedule()
    sch.parallel(fused)
    lib = build(sch.mod, Target("llvm -num-cores 2"))
    a, w = _data()
    out = np.zeros((1, 14, 14, 8), "float32")
    lib(a, w, out)
    np.testing.assert_allclose(out, _reference(a, w), rtol=1e-4, atol=1e-4)
