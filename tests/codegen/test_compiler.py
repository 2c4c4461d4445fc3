"""compile_shared(): the content-addressed kernel cache, across processes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap

import pytest

from metaschedule.codegen.compiler import compile_shared

pytestmark = pytest.mark.compiler

SOURCE = "int ms_answer(void) { return 42; }\n"


def counting_cc(tmp_path) -> tuple[str, str]:
    """A $CC that logs each run to a file and waits a little, so that concurrent
    compilations of one source really overlap; returns (command, log path)."""
    log = tmp_path / "cc.log"
    script = tmp_path / "counting-cc"
    script.write_text(
        "#!/bin/sh\n"
        'case "$*" in *--version*) exec cc "$@";; esac\n'
        f'echo "$$" >> "{log}"\n'
        "sleep 0.3\n"
        'exec cc "$@"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script), str(log)


def runs(log: str) -> int:
    return len(open(log).read().split()) if os.path.exists(log) else 0


def call_answer(path: str) -> int:
    import ctypes

    return ctypes.CDLL(path).ms_answer()


def test_same_source_same_artifact_compiled_once(tmp_path, monkeypatch):
    cc, log = counting_cc(tmp_path)
    monkeypatch.setenv("CC", cc)
    cache = str(tmp_path / "kernels")
    first = compile_shared(SOURCE, ["-shared", "-fPIC"], cache)
    second = compile_shared(SOURCE, ["-shared", "-fPIC"], cache)
    assert first == second and call_answer(first) == 42
    assert runs(log) == 1
    other = compile_shared(SOURCE.replace("42", "7"), ["-shared", "-fPIC"], cache)
    assert other != first and call_answer(other) == 7 and runs(log) == 2
    flags = compile_shared(SOURCE, ["-shared", "-fPIC", "-O1"], cache)
    assert flags not in (first, other)  # the flags are part of the key


def test_concurrent_writers_in_processes(tmp_path):
    """Several processes compile one source into one fresh cache at the same time: all
    get the same complete library and no temporary file is left behind."""
    cc, log = counting_cc(tmp_path)
    cache = tmp_path / "kernels"
    child = textwrap.dedent(
        f"""
        from metaschedule.codegen.compiler import compile_shared
        print(compile_shared({SOURCE!r}, ["-shared", "-fPIC"], {str(cache)!r}))
        """
    )
    env = {**os.environ, "CC": cc}
    procs = [
        subprocess.Popen([sys.executable, "-c", child], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    paths = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(paths) == 1
    (path,) = paths
    assert call_answer(path) == 42
    assert [f.name for f in cache.iterdir()] == [os.path.basename(path)]
    assert runs(log) >= 1  # racing writers may each compile; the rename keeps it whole


def test_builder_workers_share_the_cache(tmp_path):
    """A kernel the LocalBuilder's workers built before is not compiled again, even by new
    worker processes (in a fresh interpreter: workers keep the environment their fork
    server started with)."""
    cc, log = counting_cc(tmp_path)
    child = textwrap.dedent(
        """
        from metaschedule import te
        from metaschedule.builder import BuilderInput, LocalBuilder
        from metaschedule.target import Target
        from metaschedule.tir.function import IRModule

        a = te.placeholder((8,), "float32", name="A")
        b = te.compute((8,), lambda i: a[i] * 2.0, name="B")
        mod = IRModule({"main": te.create_prim_func([a, b])})
        for _ in range(2):
            with LocalBuilder(max_workers=1) as builder:  # new worker processes each time
                (result,) = builder.build([BuilderInput(mod, Target("llvm"))])
            assert result.error_msg is None, result.error_msg
        """
    )
    env = {**os.environ, "CC": cc, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    proc = subprocess.run(
        [sys.executable, "-c", child],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert runs(log) == 1
