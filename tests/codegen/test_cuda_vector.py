"""Vectorized loops in CUDA C: float4/float2/half2 accesses where alignment is provable."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import metaschedule as ms
from metaschedule import te
from metaschedule.codegen.cuda_codegen import codegen_cuda
from metaschedule.codegen.cuda_vector import split_lane
from metaschedule.testing.gpu_schedules import vectorized_fetch_matmul
from metaschedule.tir import expr as E
from metaschedule.tir.gpu_emulator import emulate
from metaschedule.tir.transform import GPU_LOWER_PASSES, lower

needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None and not os.environ.get("NVCC"), reason="nvcc is not installed"
)


def _src(sch) -> str:
    return codegen_cuda(lower(sch.mod["main"], GPU_LOWER_PASSES), "cuda -arch=sm_80").code


def _elementwise(n: int, lanes: int, dtype: str = "float32", shift: int = 0):
    """B[i] = A[i + shift] * 2 + 1 on 32 threads, ``lanes`` consecutive elements each."""
    a = te.placeholder((n + shift,), dtype, "A")
    b = te.compute((n,), lambda i: a[i + shift] * 2 + 1, name="B")
    sch = ms.tir.Schedule(te.create_prim_func([a, b]))
    (i,) = sch.get_loops(sch.get_block("B"))
    bx, tx, v = sch.split(i, [None, 32, lanes])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(v)
    return sch


def test_cooperative_fetch_loads_float4_and_computes_the_same():
    sch = vectorized_fetch_matmul(64)
    src = _src(sch)
    assert src.count("*(float4*)(") == 4  # A and B tiles: one load and one store each
    assert "__shared__ __align__(16) float" in src
    rng = np.random.default_rng(1)
    a, b = (rng.random((64, 64), dtype=np.float32) for _ in range(2))
    c = np.zeros((64, 64), np.float32)
    emulate(sch.mod, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


@pytest.mark.parametrize("lanes,vtype", [(2, "float2"), (4, "float4")])
def test_elementwise_vector_body(lanes, vtype):
    sch = _elementwise(256, lanes)
    src = _src(sch)
    assert f"{vtype} vin = *({vtype}*)(A + " in src and f"*({vtype}*)(B + " in src
    a = np.arange(256, dtype=np.float32)
    b = np.zeros(256, np.float32)
    emulate(sch.mod, a, b)
    np.testing.assert_array_equal(b, a * 2 + 1)


def test_half2_and_unaligned_fallback():
    assert "half2" in _src(_elementwise(128, 2, "float16"))
    # A[i + 1]: not a multiple of the lanes from A's base -> scalar code
    src = _src(_elementwise(128, 4, shift=1))
    assert "float4" not in src and "#pragma unroll" in src


def test_lane_analysis():
    v, x = E.Var("v"), E.Var("x")
    ok = split_lane(E.FloorMod(x * 8 + v, E.const(16)), v, 4)
    assert ok is not None and ok.coef == 1 and ok.r == 0 and ok.q == 8
    assert split_lane(E.FloorDiv(x * 4 + v, E.const(16)), v, 4).coef == 0
    assert split_lane(E.FloorMod(x * 2 + v, E.const(16)), v, 4) is None  # may wrap
    assert split_lane(v * v, v, 4) is None


@needs_nvcc
@pytest.mark.compiler
def test_vectorized_sources_compile_with_nvcc():
    from metaschedule.codegen.nvcc import compile_cuda

    for sch in (vectorized_fetch_matmul(64), _elementwise(128, 2, "float16"), _elementwise(64, 4)):
        compile_cuda(_src(sch), "sm_80")


GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "cuda_vectorized_fetch_matmul.cu")


def test_vectorized_fetch_source_matches_the_golden_file():
    body = _src(vectorized_fetch_matmul(64)).split("\n", 1)[1]  # line 1 names the target
    if os.environ.get("MS_UPDATE_GOLDEN"):
        with open(GOLDEN, "w", encoding="utf-8") as f:
            f.write(body)
    with open(GOLDEN, encoding="utf-8") as f:
        assert body == f.read(), "regenerate with MS_UPDATE_GOLDEN=1 if the change is intended"
