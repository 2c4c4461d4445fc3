"""The executable: memory planning, profile, export_library / load."""

import numpy as np
import pytest

from metaschedule import graph
from metaschedule import relax_integration as ri
from metaschedule.graph import GraphBuilder
from metaschedule.runtime.aligned import is_aligned


def _chain(n=6):
    """x -> (matmul + relu) x n: every intermediate can reuse a freed buffer."""
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    y = b.input("x", (4, 16))
    for i in range(n):
        w = b.const((rng.standard_normal((16, 16)) * 0.3).astype("float32"), f"w{i}")
        y = b.call("relu", [b.call("matmul", [y, w])])
    y = b.call("reshape", [y], shape=(8, 8))
    return b.finish([y]), rng


@pytest.mark.compiler
def test_memory_plan_reuses_buffers_and_results_are_right():
    f, rng = _chain()
    exe = ri.compile_relax(None, f, "llvm", None)
    # six kernel outputs, a zero-copy reshape; two blocks alternate
    assert len(exe.steps) == 7 and exe.steps[-1].func is None
    assert len(exe.plan.sizes) == 2
    x = rng.standard_normal((4, 16)).astype("float32")
    want = graph.interpret(f, x)[0]
    got = exe(x=x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    got2 = exe(x=x * 2)  # the first result is a copy, not a view of the pool
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(got2, got)


@pytest.mark.compiler
def test_planned_buffers_and_constants_start_on_cache_lines(tmp_path):
    f, rng = _chain(3)
    exe = ri.compile_relax(None, f, "llvm", None)
    loaded = graph.load(exe.export_library(tmp_path / "model.ms"))
    for e in (exe, loaded):
        assert e.constants and all(is_aligned(c) for c in e.constants.values())
        assert e._pool and all(is_aligned(buf) for buf in e._pool)
    x = rng.standard_normal((4, 16)).astype("float32")
    np.testing.assert_allclose(exe(x), graph.interpret(f, x)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.compiler
def test_export_library_and_load_round_trip(tmp_path):
    f, rng = _chain(3)
    exe = ri.compile_relax(None, f, "llvm", None)
    path = exe.export_library(tmp_path / "model.ms")
    loaded = graph.load(path)
    x = rng.standard_normal((4, 16)).astype("float32")
    np.testing.assert_array_equal(loaded(x), exe(x))
    assert loaded.function_names == exe.function_names


@pytest.mark.compiler
def test_profile_reports_every_step():
    f, rng = _chain(2)
    exe = ri.compile_relax(None, f, "llvm", None)
    report = exe.profile(rng.standard_normal((4, 16)).astype("float32"), number=3)
    assert [r.func for r in report][:2] == ["fused_matmul_relu"] * 2
    assert all(r.mean_ms >= 0 for r in report)
    assert abs(sum(r.percent for r in report) - 100) < 1e-6
    assert "fused_matmul_relu" in str(report) and "total" in str(report)


@pytest.mark.compiler
def test_default_schedule_is_parallel_and_vectorized():
    f, _ = _chain(1)
    model = graph.lower_model(f)
    sch = graph.default_schedule(model.funcs["fused_matmul_relu"], "llvm")
    text = sch.mod["main"].script()
    assert "T.parallel" in text and "T.vectorized" in text


def test_prepack_weights_applies_the_functions_index_map():
    import dataclasses

    from metaschedule import te
    from metaschedule.graph.build import prepack_weights
    from metaschedule.graph.lower import Step
    from metaschedule.schedule.index_map import IndexMap

    # a function that wants its weight [8, 6] as [2, 6, 4] (rows split by 4, moved inside)
    a = te.placeholder((3, 8), "float32", "a")
    wp = te.placeholder((2, 6, 4), "float32", "w_packed")
    k = te.reduce_axis((0, 8), "k")
    c = te.compute((3, 6), lambda i, j: te.sum(a[i, k] * wp[k // 4, j, k % 4], axis=k), name="c")
    func = te.create_prim_func([a, wp, c])
    imap = IndexMap.from_func(lambda i, j: (i // 4, j, i % 4))
    packed_arg = {"original_shape": [8, 6], "index_map": imap}
    func = dataclasses.replace(func, attrs={**func.attrs, "prepacked_args": {1: packed_arg}})
    w = np.arange(48, dtype="float32").reshape(8, 6)
    steps, consts = prepack_weights(
        [Step("f", ("x", "w"), "y", ("matmul",))], {"f": func}, {"w": w}
    )
    packed = consts[steps[0].args[1]]
    assert packed.shape == (2, 6, 4)
    np.testing.assert_array_equal(packed, w.reshape(2, 4, 6).transpose(0, 2, 1))
    with pytest.raises(ValueError, match="not take it pre-packed"):
        prepack_weights(
            [Step("f", ("x", "w"), "y", ())], {"f": dataclasses.replace(func, attrs={})}, {"w": w}
        )


@pytest.mark.compiler
def test_inputs_reach_kernels_through_reshapes_and_outputs_are_copies():
    """The prepared calls: an input viewed by a reshape, an input read by two kernels,
    an intermediate that is both an output and read again."""
    rng = np.random.default_rng(1)
    b = GraphBuilder()
    x = b.input("x", (4, 16))
    z = b.input("z", (2, 32))
    w = b.const((rng.standard_normal((16, 16)) * 0.3).astype("float32"), "w")
    zr = b.call("reshape", [z], shape=(4, 16))
    h = b.call("relu", [b.call("matmul", [x, w])])
    y = b.call("add", [b.call("matmul", [zr, w]), h])
    s = b.call("sigmoid", [x])
    f = b.finish([y, h, s])
    exe = ri.compile_relax(None, f, "llvm", None)
    for scale in (1.0, -2.0):  # a second call with other inputs, the same buffers
        xv = (rng.standard_normal((4, 16)) * scale).astype("float32")
        zv = rng.standard_normal((2, 32)).astype("float32")
        got = exe(x=xv, z=zv)
        want = graph.interpret(f, xv, zv)
        for g, r in zip(got, want):
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)
    first = exe(x=xv, z=zv)
    exe(x=xv * 3, z=zv)
    np.testing.assert_allclose(first[0], want[0], rtol=1e-5, atol=1e-6)  # copies
    report = exe.profile(x=xv, z=zv, number=2)
    assert len(report) == len(exe.steps)


@pytest.mark.compiler
def test_wrong_inputs_are_refused_before_any_kernel_runs():
    f, rng = _chain(2)
    exe = ri.compile_relax(None, f, "llvm", None)
    with pytest.raises(ValueError, match="input 'x' must be"):
        exe(x=np.zeros((4, 15), "float32"))
    with pytest.raises(ValueError, match="input 'x' must be"):
        exe(x=np.zeros((4, 16), "float64"))
    x = np.asfortranarray(rng.standard_normal((4, 16)).astype("float32"))
    np.testing.assert_allclose(exe(x=x), graph.interpret(f, x)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.compiler
def test_a_run_is_one_c_call_and_a_library_without_the_step_runner_runs_the_same():
    f, rng = _chain(4)
    exe = ri.compile_relax(None, f, "llvm", None)
    assert exe._program is not None and exe._program.count == 4  # the reshape: no call
    x = rng.standard_normal((4, 16)).astype("float32")
    got = exe(x=x)
    np.testing.assert_allclose(got, graph.interpret(f, x)[0], rtol=1e-5, atol=1e-6)
    calls = []
    real = exe._program.run
    exe._program.run = lambda: calls.append(1) or real()
    exe(x=x)
    assert calls == [1]  # the kernels ran from C, not from the per-kernel loop
    exe._program = None  # a library exported before the step runner
    np.testing.assert_array_equal(exe(x=x), got)
