"""runtime.Module: calling, argument checks, export/load, the C timing loop."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from metaschedule import runtime, te, tir
from metaschedule.codegen import build
from metaschedule.runtime import BenchmarkResult, load_module

pytestmark = pytest.mark.compiler
RNG = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


def axpy(n: int = 64, alpha: float = 2.0):
    X = te.placeholder((n,), name="X")
    Y = te.placeholder((n,), name="Y")
    Z = te.compute((n,), lambda i: X[i] * alpha + Y[i], name="Z")
    return te.create_prim_func([X, Y, Z])


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return build(axpy(), cache_dir=str(tmp_path_factory.mktemp("kernels")))


def arrays(n: int = 64):
    return (
        RNG.standard_normal(n).astype("float32"),
        RNG.standard_normal(n).astype("float32"),
        np.zeros(n, "float32"),
    )


def test_call_main_by_default_and_by_name(lib):
    x, y, z = arrays()
    lib(x, y, z)
    np.testing.assert_allclose(z, 2 * x + y, rtol=1e-6)
    z[:] = 0
    lib["main"](x, y, z)
    np.testing.assert_allclose(z, 2 * x + y, rtol=1e-6)
    assert lib.function_names == ["main"] and "main" in lib
    assert lib["main"].param_names == ["X", "Y", "Z"]
    assert "int32_t main_kernel(void** args)" in lib.get_source()
    with pytest.raises(KeyError, match="no function 'nope'.*main"):
        lib["nope"]


def test_argument_checks_name_the_parameter(lib):
    x, y, z = arrays()
    with pytest.raises(TypeError, match=r"main takes 3 arrays \(X, Y, Z\), got 2"):
        lib(x, y)
    with pytest.raises(TypeError, match="parameter Y of main expects a numpy.ndarray, got list"):
        lib(x, list(y), z)
    with pytest.raises(TypeError, match="parameter X of main expects dtype float32, got float64"):
        lib(x.astype("float64"), y, z)
    with pytest.raises(ValueError, match=r"parameter Z of main expects shape \(64,\), got \(32,\)"):
        lib(x, y, z[:32])
    with pytest.raises(ValueError, match="parameter Y of main must be C-contiguous"):
        lib(x, np.zeros(128, "float32")[::2], z)
    z.flags.writeable = False
    with pytest.raises(
        ValueError, match="parameter Z of main is written by the kernel but the array is read-only"
    ):
        lib(x, y, z)
    x.flags.writeable = False  # inputs may be read-only
    z2 = np.zeros(64, "float32")
    lib(x, y, z2)
    with pytest.raises(
        ValueError, match="parameter Z of main is written but shares memory with parameter Y"
    ):
        lib(x, z2, z2)


def test_export_and_load_in_a_fresh_process(lib, tmp_path):
    path = lib.export_library(tmp_path / "axpy.so")
    assert os.path.exists(path) and not [p for p in os.listdir(tmp_path) if p.startswith(".")]
    script = textwrap.dedent(f"""
        import numpy as np
        from metaschedule.runtime import load_module
        m = load_module({str(path)!r})
        x = np.arange(64, dtype="float32"); y = np.ones(64, "float32"); z = np.zeros(64, "float32")
        m(x, y, z)
        print(float(z.sum()), m.target.kind, "main_kernel" in m.get_source())
    """)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "fresh-cache")}
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(float(2 * np.arange(64).sum() + 64)), "cpu", "True"]


def test_load_module_sees_a_replaced_library(tmp_path):
    path = tmp_path / "k.so"
    build(axpy(alpha=2.0)).export_library(path)
    first = load_module(path)
    build(axpy(alpha=3.0)).export_library(path)  # same path, new contents
    second = load_module(path)
    x, y, z = arrays()
    first(x, y, z)
    np.testing.assert_allclose(z, 2 * x + y, rtol=1e-6)
    second(x, y, z)
    np.testing.assert_allclose(z, 3 * x + y, rtol=1e-6)


def test_load_module_rewrites_a_changed_copy_in_the_cache(tmp_path):
    """The copy a replaced library is loaded from is named by its content hash; a copy
    whose bytes no longer match that name is written again before it is loaded."""
    path = tmp_path / "k.so"
    build(axpy(alpha=2.0)).export_library(path)
    load_module(path)
    build(axpy(alpha=4.0)).export_library(path)
    copy = load_module(path).path
    assert copy != str(path)
    (tmp_path / "planted").write_bytes(b"planted")
    os.replace(tmp_path / "planted", copy)  # a new file: the loaded one stays mapped
    assert load_module(path).path == copy
    assert open(copy, "rb").read() == path.read_bytes()


def test_load_module_rejects_foreign_libraries(tmp_path):
    import ctypes.util

    libm = ctypes.util.find_library("m")
    if libm is None or not os.path.exists(libm):
        libm = "/lib/x86_64-linux-gnu/libm.so.6"
    if not os.path.exists(libm):
        pytest.skip("no libm to load")
    with pytest.raises(ValueError, match="not a metaschedule library"):
        load_module(libm)


def test_time_evaluator_returns_per_repeat_means(lib):
    x, y, z = arrays()
    timer = lib.time_evaluator("main", number=5, repeat=4)
    res = timer(x, y, z)
    assert isinstance(res, BenchmarkResult) and len(res.results) == 4
    assert all(0 < r < 0.01 for r in res.results)
    assert res.min <= res.median <= res.max and res.min <= res.mean <= res.max
    np.testing.assert_allclose(z, 2 * x + y, rtol=1e-6)  # the kernel really ran
    with pytest.raises(TypeError, match="parameter X"):
        timer(x.astype("float64"), y, z)
    with pytest.raises(ValueError, match="repeat must be an int >= 1"):
        lib.time_evaluator("main", repeat=0)


def test_min_repeat_ms_grows_number(lib):
    x, y, z = arrays()
    start = time.perf_counter()
    res = lib.time_evaluator("main", number=1, repeat=2, min_repeat_ms=30)(x, y, z)
    elapsed = time.perf_counter() - start
    assert elapsed >= 0.06  # each repeat ran until it lasted 30 ms
    assert res.max < 0.001  # ... yet reports the mean time of one call


def test_a_short_repeat_goes_on_instead_of_starting_again(tmp_path):
    """Every call made for a repeat is timed in it: a repeat that falls short of
    ``min_repeat_ms`` continues rather than being thrown away and redone, so the calls
    made (counted by the kernel itself) are exactly the calls the result reports."""
    C = tir.Buffer("C", (1,))
    counter = build(
        tir.PrimFunc((C,), tir.BufferStore(C, C[0] + 1.0, (tir.const(0),))),
        cache_dir=str(tmp_path),
    )
    for warmup, probes in ((0, 0), (2, 3)):
        count = np.zeros(1, "float32")  # stays exact: a few ms of calls is < 2**24 of them
        res = counter.time_evaluator(
            "main", number=1, repeat=1, min_repeat_ms=5, warmup=warmup, num_probes=probes
        )(count)
        # number=1 (or the probes' estimate) falls short of 5 ms: the repeat went on
        assert res.number > 1000
        assert count[0] == warmup + probes + res.number


def test_cache_flush_times_each_call_alone(lib):
    x, y, z = arrays()
    res = lib.time_evaluator("main", number=1, repeat=2, enable_cpu_cache_flush=True)(x, y, z)
    assert len(res.results) == 2 and all(0 < r < 0.01 for r in res.results)


def test_benchmark_result_statistics():
    r = BenchmarkResult((3.0, 1.0, 2.0))
    assert (r.mean, r.median, r.min, r.max) == (2.0, 2.0, 1.0, 3.0)
    assert r.std == pytest.approx(np.std([3.0, 1.0, 2.0]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.mean = 0.0
    with pytest.raises(ValueError, match="at least one"):
        BenchmarkResult(())
    assert "ms" in str(r) and runtime.Module is type(build(axpy(8)))


def test_max_total_ms_bounds_the_timing(lib):
    """However many repeats are asked for, the timed part stops at the budget."""
    x, y, z = arrays()
    start = time.perf_counter()
    res = lib.time_evaluator("main", number=1, repeat=1000, min_repeat_ms=20, max_total_ms=100)(
        x, y, z
    )
    elapsed = time.perf_counter() - start
    assert elapsed < 10.0  # unbounded: 1000 repeats of 20 ms = 20 s
    assert 1 <= len(res.results) < 1000 and res.number > 1  # sized by the probes
    assert all(0 < r < 0.001 for r in res.results)


def test_warmup_and_probes_are_checked(lib):
    with pytest.raises(ValueError, match="num_probes must be an int >= 0"):
        lib.time_evaluator("main", num_probes=-1)
    x, y, z = arrays()
    res = lib.time_evaluator("main", number=2, repeat=3, warmup=0, num_probes=0)(x, y, z)
    assert len(res.results) == 3 and res.number == 2  # min_repeat_ms=0: number as given


def test_host_load_reports_other_processes():
    from metaschedule.runtime.timer import HostLoad

    before = HostLoad.now()
    sum(i * i for i in range(200_000))  # our own work is not "others"
    load = before.until(HostLoad.now())
    assert set(load) == {"loadavg_1m", "others_cores", "wall_secs"}
    assert load["wall_secs"] > 0
    if load["others_cores"] is not None:
        assert 0 <= load["others_cores"] <= (os.cpu_count() or 1) + 0.5
