"""Resource faults in the measuring layer: no compiler, a failing compiler, a build
that never ends, a kernel that crashes its worker; and bad arguments or an unwritable
work_dir, refused before anything starts."""

import os
import time

import pytest

from metaschedule.builder import BuilderInput, LocalBuilder
from metaschedule.runner import EvaluatorConfig, LocalRunner
from metaschedule.testing.tuning_records import matmul
from metaschedule.tir_integration import tune_tir

FAST = EvaluatorConfig(number=1, repeat=1, min_repeat_ms=0)


def template(sch):
    i, j, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, sch.sample_perfect_tile(i, n=2))
    sch.split(j, sch.sample_perfect_tile(j, n=2))


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty kernel cache, so that every build needs the compiler."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.mark.parametrize(
    "cc, words",
    [
        ("/nonexistent/cc", "cannot run the C compiler '/nonexistent/cc'"),
        ("false", "C compilation failed (exit code 1)"),
    ],
)
def test_a_missing_or_failing_compiler_gives_error_results_and_tuning_goes_on(
    tmp_path, monkeypatch, fresh_cache, cc, words
):
    monkeypatch.setenv("CC", cc)
    with LocalBuilder(max_workers=1) as builder:
        (result,) = builder.build([BuilderInput(matmul(8), "cpu")])
        assert result.artifact_path is None and words in result.error_msg
        db = tune_tir(
            matmul(8),
            "cpu",
            str(tmp_path / "work"),
            8,
            num_trials_per_iter=4,
            space=template,
            strategy="replay-trace",
            cost_model="random",
            builder=builder,
            runner=LocalRunner(evaluator_config=FAST),
        )
    records = db.get_all_tuning_records()
    assert records and not any(r.is_valid for r in records)  # failures, saved as such
    log = (tmp_path / "work" / "logs" / "task_0_main.log").read_text()
    assert words in log


def huge_source_build(mod, target, params):
    """Emit a C file of millions of statements and compile it: a build without end."""
    from metaschedule.codegen.compiler import compile_shared

    body = "".join(f"  x = x * 3 + {i};\n" for i in range(3_000_000))
    compile_shared(f"int f(int x) {{\n{body}  return x;\n}}\n", ["-O2", "-shared", "-fPIC"])


@pytest.mark.compiler
def test_a_build_with_a_huge_source_is_bounded_by_the_timeout(fresh_cache):
    start = time.monotonic()
    with LocalBuilder(max_workers=1, timeout_sec=3, f_build=huge_source_build) as builder:
        (result,) = builder.build([BuilderInput(matmul(8), "cpu")])
        assert "timed out after 3 s" in result.error_msg
        builder.f_build = None
        (ok,) = builder.build([BuilderInput(matmul(8), "cpu")])
    assert ok.error_msg is None
    assert time.monotonic() - start < 90


def crash_every_other_run(rt_mod, device, config, args):
    """Segfault (like a kernel writing far out of bounds) on every other call."""
    import ctypes

    from metaschedule.runner.local_runner import default_run_evaluator

    calls = int(os.environ.get("_TEST_RUNS", "0")) + 1
    os.environ["_TEST_RUNS"] = str(calls)
    if calls % 2 == 0:
        ctypes.string_at(0)  # SIGSEGV in this worker
    return default_run_evaluator(rt_mod, device, config, args)


@pytest.mark.compiler
@pytest.mark.slow
def test_kernels_that_crash_their_worker_do_not_corrupt_the_tuner(tmp_path):
    runner = LocalRunner(evaluator_config=FAST, f_run_evaluator=crash_every_other_run)
    with runner:
        db = tune_tir(
            matmul(16),
            "cpu",
            str(tmp_path),
            8,
            num_trials_per_iter=4,
            space=template,
            strategy="replay-trace",
            cost_model="random",
            runner=runner,
            measure_callbacks="default",
        )
    records = db.get_all_tuning_records()
    assert len(records) >= 8  # the trials, then the final selection's re-measurements
    assert any(r.is_valid for r in records)
    log = (tmp_path / "logs" / "task_0_main.log").read_text()
    assert "worker died: signal SIGSEGV" in log


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"max_trials_global": 0}, "max_trials_global"),
        ({"max_trials_global": -3}, "max_trials_global"),
        ({"num_trials_per_iter": 0}, "num_trials_per_iter"),
        ({"max_trials_per_task": 0}, "max_trials_per_task"),
        ({"strategy": "evolutionry"}, "strategy"),
        ({"space": "post-order"}, "space"),
        ({"cost_model": "xgboost"}, "cost_model"),
        ({"task_scheduler": "fifo"}, "task_scheduler"),
        ({"measure_callbacks": "all"}, "measure_callbacks"),
        ({"num_tuning_cores": "many"}, "num_tuning_cores"),
    ],
)
def test_bad_arguments_are_refused_before_anything_starts(tmp_path, kwargs, name):
    kwargs = {"max_trials_global": 4, **kwargs}
    work_dir = tmp_path / "work"
    with pytest.raises(ValueError, match=name):
        tune_tir(matmul(8), "cpu", str(work_dir), kwargs.pop("max_trials_global"), **kwargs)
    assert not work_dir.exists()  # nothing was created


def test_an_unwritable_work_dir_is_refused_before_tuning(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(OSError, match="cannot write to work_dir"):
        tune_tir(matmul(8), "cpu", str(blocker / "work"), 4)
    if os.geteuid() != 0:  # root writes through permissions
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        with pytest.raises(PermissionError, match="cannot write to work_dir"):
            tune_tir(matmul(8), "cpu", str(ro), 4)


def test_a_full_disk_is_refused_before_tuning(tmp_path, monkeypatch):
    import shutil

    from metaschedule import tune

    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(tune.shutil, "disk_usage", lambda path: usage._replace(free=1 << 20))
    with pytest.raises(OSError, match="only 1 MiB free"):
        tune_tir(matmul(8), "cpu", str(tmp_path), 4)
    assert not (tmp_path / "database_tuning_record.json").exists()
