"""DaskBuilder: builds on an in-process Dask fleet come back as local artifacts."""

import os

import numpy as np
import pytest

pytest.importorskip("distributed")

from metaschedule.builder import Builder, BuilderInput, DaskBuilder
from metaschedule.builder.base import remove_artifact
from metaschedule.runtime import load_module
from metaschedule.target import Target
from metaschedule.testing import dask_cluster
from metaschedule.testing.dummy_object import with_fault
from metaschedule.testing.faulty_kernels import compile_error_kernel
from metaschedule.testing.tuning_records import matmul

pytestmark = [pytest.mark.compiler]


@pytest.fixture(scope="module")
def config():
    dask_cluster.local_fleet()
    return dask_cluster.rpc_config()


def test_builds_on_the_cluster_into_local_artifacts(config):
    with Builder.create("dask", config, timeout_sec=60) as builder:
        assert isinstance(builder, DaskBuilder)
        ok, bad = builder.build(
            [
                BuilderInput(matmul(16), Target("cpu")),
                BuilderInput(compile_error_kernel(), Target("cpu")),
            ]
        )
    assert ok.error_msg is None and os.path.isfile(ok.artifact_path)
    # named after this process, so a killed tuner's folders are found and removed later
    folder = os.path.basename(os.path.dirname(ok.artifact_path))
    assert folder.startswith(f"metaschedule-build-{os.getpid()}-")
    rng = np.random.default_rng(0)
    a, b = rng.random((16, 16), dtype=np.float32), rng.random((16, 16), dtype=np.float32)
    c = np.zeros((16, 16), np.float32)
    load_module(ok.artifact_path)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    assert bad.artifact_path is None and bad.error_msg.startswith("DaskBuilder: build failed")
    remove_artifact(ok.artifact_path)
    assert not os.path.exists(os.path.dirname(ok.artifact_path))


def test_a_build_that_crashes_or_hangs_fails_alone(config):
    fault = "metaschedule.testing.dummy_object.fault_injecting_build"
    inputs = [
        BuilderInput(with_fault(matmul(8), "crash"), Target("cpu")),
        BuilderInput(with_fault(matmul(8), "hang"), Target("cpu")),
        BuilderInput(matmul(8), Target("cpu")),
    ]
    # 4 s: the good build must finish within it on a loaded machine too
    with DaskBuilder(config, timeout_sec=4, f_build=fault) as builder:
        crashed, hung, ok = builder.build(inputs)
    assert "crashed" in crashed.error_msg and "SIGSEGV" in crashed.error_msg
    assert "timed out after 4" in hung.error_msg
    assert ok.error_msg is None


def test_no_worker_with_the_resources_is_a_clear_error(config):
    with pytest.raises(RuntimeError, match='no Dask worker .* --resources "gpu-farm=1"'):
        DaskBuilder(config, resources={"gpu-farm": 1}).build(
            [BuilderInput(matmul(8), Target("cpu"))]
        )
