"""The measurement lock: the user's own file, created private, and a bounded wait that
ends in an error result naming the process that holds it."""

import os
import stat
import subprocess
import sys
import textwrap

import pytest

from metaschedule.arg_info import ArgInfo
from metaschedule.builder import BuilderInput, LocalBuilder
from metaschedule.runner import EvaluatorConfig, LocalRunner, RunnerInput
from metaschedule.runner.local_runner import (
    DEFAULT_LOCK_TIMEOUT_SEC,
    MeasurementLockTimeout,
    host_measurement_lock,
    measurement_lock_holder,
    measurement_lock_path,
)
from metaschedule.target import Target
from metaschedule.testing.tuning_records import matmul

FAST = EvaluatorConfig(number=1, repeat=1, min_repeat_ms=0)

HOLDER = textwrap.dedent("""
    import sys, time
    from metaschedule.runner.local_runner import host_measurement_lock
    with host_measurement_lock():
        print("held", flush=True)
        sys.stdin.read()  # until the test closes our stdin
""")


@pytest.fixture
def own_runtime_dir(tmp_path, monkeypatch):
    """A private XDG_RUNTIME_DIR, so these tests neither wait for nor stall real tuners
    (workers and the holder inherit it)."""
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    return folder


@pytest.fixture
def holder(own_runtime_dir):
    """Another process holding the lock; its pid."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "held"
        yield child.pid
    finally:
        child.stdin.close()
        child.wait(timeout=30)


def test_the_lock_lives_in_the_users_runtime_dir(own_runtime_dir):
    path = measurement_lock_path()
    assert path == str(own_runtime_dir / "metaschedule-measure.lock")
    with host_measurement_lock():
        assert measurement_lock_holder() == os.getpid()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_else_a_private_folder_in_tmpdir_named_with_the_uid(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    path = measurement_lock_path()
    assert path == str(tmp_path / f"metaschedule-{os.getuid()}" / "measure.lock")
    with host_measurement_lock():
        pass
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_runtime_dir_others_may_write_is_not_used(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(shared))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    assert not measurement_lock_path().startswith(str(shared))


def test_a_lock_folder_others_may_write_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    folder = tmp_path / f"metaschedule-{os.getuid()}"
    folder.mkdir()
    folder.chmod(0o777)  # as if another user had made it first
    with pytest.raises(PermissionError, match="not a folder of this user"):
        with host_measurement_lock():
            pass
    folder.chmod(0o700)
    (tmp_path / "elsewhere").mkdir()
    folder.rmdir()
    folder.symlink_to(tmp_path / "elsewhere")  # a link in its place
    with pytest.raises(PermissionError):
        with host_measurement_lock():
            pass


def test_a_bounded_wait_names_the_holder_and_the_lock_works_after(holder):
    with pytest.raises(MeasurementLockTimeout, match=f"process {holder}") as info:
        with host_measurement_lock(timeout_sec=0.2):
            pytest.fail("the lock is held by another process")
    assert info.value.holder == holder


def test_after_a_timed_out_wait_the_lock_is_not_kept(own_runtime_dir):
    """The waiter that was given up on gets the lock later and lets it go at once."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout.readline().strip() == "held"
    with pytest.raises(MeasurementLockTimeout):
        with host_measurement_lock(timeout_sec=0.1):
            pass
    child.stdin.close()
    child.wait(timeout=30)
    with host_measurement_lock(timeout_sec=30):  # not held by the abandoned waiter
        pass


@pytest.mark.compiler
def test_a_candidate_that_times_out_on_the_lock_is_an_error_naming_the_holder(holder):
    func = matmul(8)
    with LocalBuilder(max_workers=1, timeout_sec=60) as builder:
        (built,) = builder.build([BuilderInput(func, Target("cpu"))])
    assert built.error_msg is None, built.error_msg
    inp = RunnerInput(built.artifact_path, "cpu", ArgInfo.from_prim_func(func))
    with LocalRunner(evaluator_config=FAST, lock_timeout_sec=0.5) as runner:
        (result,) = (f.result() for f in runner.run([inp]))
    assert result.run_secs is None
    assert "measurement lock" in result.error_msg and f"process {holder}" in result.error_msg


def test_lock_timeout_sec_default_and_checks():
    assert LocalRunner().lock_timeout_sec == DEFAULT_LOCK_TIMEOUT_SEC == 600
    with pytest.raises(ValueError, match="lock_timeout_sec"):
        LocalRunner(lock_timeout_sec=0)
