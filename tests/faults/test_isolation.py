"""Workers start isolated: modules planted in the caller's current folder are never
imported by the processes the package starts (``python -P``, or its 3.10 stand-in)."""

import os
import subprocess
import sys

import cloudpickle
import pytest

from metaschedule.arg_info import ArgInfo
from metaschedule.builder import BuilderInput, LocalBuilder
from metaschedule.runner import EvaluatorConfig, LocalRunner, RunnerInput, rpc_host
from metaschedule.target import Target
from metaschedule.testing.tuning_records import matmul
from metaschedule.worker import isolated_python

FAST = EvaluatorConfig(number=1, repeat=1, min_repeat_ms=0)


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """A current folder with a ``cloudpickle.py`` and a ``numpy/`` that would leave a
    marker file if imported; the marker's path."""
    folder = tmp_path / "untrusted"
    (folder / "numpy").mkdir(parents=True)
    marker = tmp_path / "imported-from-the-current-folder"
    payload = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    (folder / "cloudpickle.py").write_text(payload)
    (folder / "numpy" / "__init__.py").write_text(payload)
    monkeypatch.chdir(folder)
    return marker


@pytest.mark.compiler
def test_build_and_measure_in_a_folder_with_planted_modules(planted):
    func = matmul(8)
    with LocalBuilder(max_workers=1, timeout_sec=60) as builder:
        (built,) = builder.build([BuilderInput(func, Target("cpu"))])
    assert built.error_msg is None, built.error_msg
    with LocalRunner(evaluator_config=FAST) as runner:
        (future,) = runner.run(
            [RunnerInput(built.artifact_path, "cpu", ArgInfo.from_prim_func(func))]
        )
        result = future.result()
    assert result.error_msg is None, result.error_msg
    assert len(result.run_secs) == 1 and result.run_secs[0] > 0
    assert not planted.exists(), planted.read_text()


def test_a_fleet_hosts_child_ignores_planted_modules(planted):
    child = rpc_host._Child()  # started here, in the planted folder, as a Dask worker would
    try:
        reply = child.call(cloudpickle.dumps((os.getcwd, ())), wait_sec=120)
    finally:
        child.close()
    assert reply is not None and cloudpickle.loads(reply) == str(planted.parent / "untrusted")
    assert not planted.exists(), planted.read_text()


@pytest.mark.parametrize("safe_path", [True, False])
def test_isolated_python_leaves_the_current_folder_out(planted, safe_path):
    """Both forms: ``-P`` (3.11+) and deleting ``sys.path[0]`` first (3.10)."""
    code = "import numpy, cloudpickle, sys; print(numpy.__file__)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    done = subprocess.run(
        isolated_python(code=code, safe_path=safe_path),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert "untrusted" not in done.stdout
    assert not planted.exists()
    # without isolation the planted module is what imports: the test can fail
    subprocess.run([sys.executable, "-c", "import numpy"], env=env, timeout=120, check=False)
    assert planted.exists()
