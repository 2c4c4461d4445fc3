"""Workers never need the user's main module: scripts without a ``__main__`` guard,
``python -c``, ``python -`` and notebook-style ``exec`` all build, measure and tune."""

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# At top level, no guard; the build function, the initializer and the evaluator are
# defined here (in __main__), so they reach the workers by value.
USER_CODE = textwrap.dedent("""
    import numpy as np
    from metaschedule.arg_info import ArgInfo
    from metaschedule.builder import BuilderInput, LocalBuilder
    from metaschedule.runner import EvaluatorConfig, LocalRunner, RunnerInput
    from metaschedule.runner.local_runner import default_run_evaluator
    from metaschedule.testing.tuning_records import matmul
    from metaschedule.tir_integration import compile_tir, tune_tir

    def my_build(mod, target, params):
        from metaschedule.builder.local_builder import default_build
        return default_build(mod, target, params)

    def my_evaluator(rt_mod, device, config, args):
        return [2 * t for t in default_run_evaluator(rt_mod, device, config, args)]

    FAST = EvaluatorConfig(number=1, repeat=1, min_repeat_ms=0)
    f = matmul(8)
    with LocalBuilder(max_workers=1, f_build=my_build, initializer=lambda: None) as b:
        (built,) = b.build([BuilderInput(f, "cpu")])
    assert built.error_msg is None, built.error_msg
    with LocalRunner(evaluator_config=FAST, f_run_evaluator=my_evaluator) as r:
        (fut,) = r.run([RunnerInput(built.artifact_path, "cpu", ArgInfo.from_prim_func(f))])
        res = fut.result()
    assert res.error_msg is None, res.error_msg

    def template(sch):
        i, j, k = sch.get_loops(sch.get_block("C"))
        sch.split(i, sch.sample_perfect_tile(i, n=2))

    db = tune_tir(f, "cpu", WORK_DIR, 2, num_trials_per_iter=2, space=template,
                  strategy="replay-trace", cost_model="random",
                  runner=LocalRunner(evaluator_config=FAST, f_run_evaluator=my_evaluator))
    assert len(db) >= 2  # the two trials, and the final selection's re-measurements
    compile_tir(db, f, "cpu")
    print("USER-CODE-OK")
""")

NOTEBOOK = (
    "import sys\n"
    "cell = sys.stdin.read()\n"
    "exec(compile(cell, '<ipython-input-1>', 'exec'), {'__name__': '__main__'})\n"
)


def run(args, tmp_path, stdin=None):
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p),
    )
    return subprocess.run(
        [sys.executable, *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
        check=False,
    )


@pytest.mark.compiler
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["script", "dash-c", "stdin", "notebook"])
def test_top_level_code_builds_measures_and_tunes(tmp_path, mode):
    code = f"WORK_DIR = {str(tmp_path / 'work')!r}\n" + USER_CODE
    if mode == "script":
        (tmp_path / "user_script.py").write_text(code)
        proc = run(["user_script.py"], tmp_path)
    elif mode == "dash-c":
        proc = run(["-c", code], tmp_path)
    elif mode == "stdin":
        proc = run(["-"], tmp_path, stdin=code)
    else:
        proc = run(["-c", NOTEBOOK], tmp_path, stdin=code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "USER-CODE-OK" in proc.stdout
    assert "bootstrapping phase" not in proc.stderr and "__main__" not in proc.stderr
