"""The cuda design space end to end: sampled schedules launch, compute what numpy does in
the GPU emulator, and compile with nvcc."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import metaschedule as ms
from metaschedule import te
from metaschedule.codegen.cuda_codegen import codegen_cuda
from metaschedule.postproc import VerifyGPUCode
from metaschedule.te import ops
from metaschedule.te.ops.reduce import reduce
from metaschedule.testing.gpu_schedules import sample_cuda_schedules
from metaschedule.tir.interpreter import interpret
from metaschedule.tir.transform import GPU_LOWER_PASSES, lower

TARGET = "cuda -arch=sm_80"
needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None and not os.environ.get("NVCC"), reason="nvcc is not installed"
)


def _matmul():
    a = te.placeholder((8, 16), "float32", "A")
    b = te.placeholder((16, 8), "float32", "B")
    return [a, b, ops.matmul(a, b)], lambda x, y: x @ y


def _conv2d():
    x = te.placeholder((1, 4, 4, 4), "float32", "X")
    w = te.placeholder((3, 3, 4, 4), "float32", "W")

    def ref(data, kernel):
        padded = np.pad(data, ((0, 0), (1, 1), (1, 1), (0, 0)))
        out = np.zeros((1, 4, 4, 4), np.float32)
        for r in range(3):
            for s in range(3):
                out += np.einsum("nhwc,cf->nhwf", padded[:, r : r + 4, s : s + 4, :], kernel[r, s])
        return out

    return [x, w, ops.conv2d_nhwc(x, w, 1, 1)], ref


def _softmax():
    x = te.placeholder((4, 64), "float32", "X")

    def ref(data):
        e = np.exp(data - data.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    return [x, ops.softmax(x)], ref


def _layer_norm():
    x = te.placeholder((4, 64), "float32", "X")
    g = te.placeholder((64,), "float32", "G")
    b = te.placeholder((64,), "float32", "Beta")

    def ref(data, gamma, beta):
        mean, var = data.mean(-1, keepdims=True), data.var(-1, keepdims=True)
        return (data - mean) / np.sqrt(var + 1e-5) * gamma + beta

    return [x, g, b, ops.layer_norm(x, g, b)], ref


def _row_sum():
    x = te.placeholder((8, 64), "float32", "X")
    return [x, reduce(x, "sum", [1])], lambda data: data.sum(1)


WORKLOADS = {
    "matmul": _matmul,
    "conv2d": _conv2d,
    "softmax": _softmax,
    "layer_norm": _layer_norm,
    "reduction": _row_sum,
}


def _samples(name: str, n: int, seed: int = 1):
    tensors, ref = WORKLOADS[name]()
    func = te.create_prim_func(tensors)
    schs = sample_cuda_schedules(func, n, TARGET, seed=seed)
    assert len(schs) == n, f"only {len(schs)} of {n} samples of {name} passed the postprocessors"
    return tensors, ref, schs


def _kernels(sch) -> int:
    return len(codegen_cuda(lower(sch.mod["main"], GPU_LOWER_PASSES), TARGET).kernels)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_sampled_schedules_launch_and_compute_what_numpy_does(name):
    tensors, ref, schs = _samples(name, 4)
    rng = np.random.default_rng(0)
    inputs = [rng.random([int(d) for d in t.shape], dtype=np.float32) for t in tensors[:-1]]
    want = ref(*inputs)
    verify = VerifyGPUCode()
    for sch in schs:
        assert verify.apply(sch)
        assert _kernels(sch) >= 1  # everything runs on the GPU: codegen found no host code
        out = np.full([int(d) for d in tensors[-1].shape], np.nan, np.float32)
        interpret(sch.mod, *inputs, out)  # GPU emulation: threads, barriers, race checks
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5, err_msg=str(sch.trace))


def test_reductions_get_cross_thread_and_fused_variants():
    _, _, schs = _samples("softmax", 8)
    sources = [codegen_cuda(lower(s.mod["main"], GPU_LOWER_PASSES), TARGET) for s in schs]
    # some samples reduce a row with many threads (a tree in shared memory) ...
    assert any("_partial[" in src.code for src in sources)
    # ... and some fuse expsum into the normalisation: fewer kernels than blocks
    assert min(len(src.kernels) for src in sources) < 3


def test_matmul_samples_use_shared_tiles_and_local_accumulators():
    _, _, schs = _samples("matmul", 3)
    for sch in schs:
        code = codegen_cuda(lower(sch.mod["main"], GPU_LOWER_PASSES), TARGET).code
        assert "__shared__ __align__(16) float A_shared" in code
        assert "__shared__ __align__(16) float B_shared" in code
        assert "T_matmul_NN_local[" in code and "__syncthreads();" in code


@needs_nvcc
@pytest.mark.compiler
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_sampled_schedules_compile_with_nvcc(name):
    # seed 2: samples nvcc compiles in seconds (a fully unrolled one-thread kernel can take
    # it twenty, which is the search's business, not this test's)
    _, _, schs = _samples(name, 2, seed=2)
    for sch in schs:
        lib = ms.build(sch.mod, TARGET)
        assert lib.resources and all(r["registers"] > 0 for r in lib.resources.values())


@pytest.mark.slow
def test_evolutionary_search_tunes_for_cuda_through_a_runner(tmp_path):
    """tune_tir on the cuda target with a runner that reaches a "GPU" (a test double): the
    evolutionary search mutates GPU traces (thread bindings included), and the best
    schedule runs correctly."""
    from metaschedule.search_strategy import EvolutionarySearch
    from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner

    tensors, ref = WORKLOADS["softmax"]()
    func = te.create_prim_func(tensors)
    db = ms.tune_tir(
        func,
        TARGET,
        str(tmp_path),
        8,
        num_trials_per_iter=4,
        strategy=EvolutionarySearch(population_size=16, init_min_unmeasured=4, genetic_num_iters=2),
        cost_model="random",
        builder=DummyBuilder(),
        runner=DummyRunner(),
        seed=0,
    )
    assert len(db) >= 8  # the trials, then the final selection's re-measurements
    sch = ms.tir_integration.compile_tir(db, func, TARGET)
    assert VerifyGPUCode().apply(sch)
    x = np.random.default_rng(3).random((4, 64), dtype=np.float32)
    out = np.zeros_like(x)
    interpret(sch.mod, x, out)
    np.testing.assert_allclose(out, ref(x), rtol=1e-5)


@needs_nvcc
@pytest.mark.compiler
def test_float16_samples_compile_with_half_types():
    x = te.placeholder((4, 64), "float16", "X")
    (sch,) = sample_cuda_schedules(te.create_prim_func([x, ops.softmax(x)]), 1, TARGET, seed=2)
    lib = ms.build(sch.mod, TARGET)
    assert "#include <cuda_fp16.h>" in lib.source and "_Float16" not in lib.source
    assert "half* __restrict__ X" in lib.source
