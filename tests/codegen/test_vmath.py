"""Vector math (codegen/c_vmath.py): float32 exp, tanh and sigmoid computed on whole
vectors agree with numpy to a few units in the last place over the float range, with
IEEE results at the edges (inf, -inf, NaN, overflow, underflow)."""

from __future__ import annotations

import numpy as np
import pytest

from metaschedule import te, tir
from metaschedule.codegen import build
from metaschedule.target import Target

CPU = Target("llvm -mcpu=x86-64-v4 -num-cores=1")  # AVX-512 (testing.isas)
EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 88.72, 88.73, -103.9, -104.0]
EDGES += [1e-3, -0.6249, 0.6251, 20.0, -20.0, 9.5, -87.5]


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


def _vectorized(op: str, n: int, lanes: int):
    a = te.placeholder((n,), "float32", "A")
    b = te.compute((n,), lambda i: getattr(te, op)(a[i]), name="B")
    sch = tir.Schedule(te.create_prim_func([a, b]))
    (i,) = sch.get_loops(sch.get_block("B"))
    _, inner = sch.split(i, [None, lanes])
    sch.vectorize(inner)
    return build(sch.mod, CPU)


def _reference(op: str, x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore"):
        if op == "sigmoid":
            return (1.0 / (1.0 + np.exp(-x64))).astype(np.float32)
        return getattr(np, op)(x64).astype(np.float32)


@pytest.mark.compiler
@pytest.mark.parametrize("op", ["exp", "tanh", "sigmoid"])
@pytest.mark.parametrize("lanes", [16, 4])
def test_vector_math_matches_numpy_over_the_float_range(op, lanes):
    n = 4096
    lib = _vectorized(op, n, lanes)
    assert f"ms_v{op}_f32x{lanes}" in lib.get_source()  # vector code, not a libm call per lane
    x = np.concatenate(
        [np.linspace(-110, 95, n - len(EDGES), dtype=np.float32), np.array(EDGES, np.float32)]
    )
    y = np.empty_like(x)
    lib(x, y)
    ref = _reference(op, x)
    assert np.array_equal(np.isnan(y), np.isnan(ref))
    inf = np.isinf(ref)
    assert np.array_equal(y[inf], ref[inf])
    normal = np.isfinite(ref) & (np.abs(ref) > np.finfo(np.float32).tiny)
    rel = np.abs(y[normal].astype(np.float64) - ref[normal]) / np.abs(ref[normal])
    assert rel.max() < 4 * np.finfo(np.float32).eps  # a few units in the last place
    tiny = np.isfinite(ref) & ~normal  # subnormal and zero results
    np.testing.assert_allclose(y[tiny], ref[tiny], rtol=0, atol=1e-38)


@pytest.mark.compiler
def test_tanh_saturates_to_exactly_one_and_keeps_its_sign():
    lib = _vectorized("tanh", 16, 16)
    x = np.array([30, -30, 1e4, -1e4, 0.7, -0.7, 5, -5] * 2, np.float32)
    y = np.empty_like(x)
    lib(x, y)
    assert np.all(y[np.abs(x) >= 30] == np.sign(x[np.abs(x) >= 30]))
    np.testing.assert_allclose(y, np.tanh(x), rtol=3e-7)
