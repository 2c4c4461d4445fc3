"""compile_shared(): the content-addressed kernel cache, across processes; its folder is
private and its libraries' hashes are checked; the compiler is bounded by a deadline."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time

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
    name = os.path.basename(path)
    assert sorted(f.name for f in cache.iterdir()) == [name, f"{name}.sha256"]
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


# ----------------------------------------------------------------------------- the deadline


def _dead(pid: int) -> bool:
    """Whether ``pid`` is gone or a zombie (killed, not yet reaped by its new parent)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


def hanging_cc(tmp_path) -> tuple[str, str]:
    """A $CC that answers the flag probes at once and hangs on a real compile in a child
    process (as a driver waits for cc1); returns (command, file of the child's pid)."""
    pid_file = tmp_path / "child.pid"
    script = tmp_path / "hanging-cc"
    script.write_text(
        '#!/bin/sh\ncase "$*" in *--version*|*" -E "*) exit 0;; esac\n'
        f"sleep 60 &\necho $! > {pid_file}\nwait\n"
    )
    script.chmod(0o755)
    return str(script), str(pid_file)


def _await_death(pid: int) -> None:
    for _ in range(100):
        if _dead(pid):
            return
        time.sleep(0.05)
    pytest.fail(f"the compiler's child {pid} outlived the deadline")


def test_a_hung_compiler_is_killed_with_its_children_at_the_deadline(tmp_path, monkeypatch):
    """``ms.build(..., timeout_sec=1)``: a compiler that never returns is a BuildError
    naming the deadline, and the processes it started die with it."""
    from metaschedule import te
    from metaschedule.codegen import BuildError, build

    cc, pid_file = hanging_cc(tmp_path)
    monkeypatch.setenv("CC", cc)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    a = te.placeholder((8,), "float32", "A")
    func = te.create_prim_func([a, te.compute((8,), lambda i: a[i] + 1.0, name="B")])
    start = time.monotonic()
    with pytest.raises(BuildError, match="timed out after 1 s"):
        build(func, "llvm", timeout_sec=1)
    assert time.monotonic() - start < 30
    _await_death(int(open(pid_file).read()))
    assert os.listdir(tmp_path / "cache" / "metaschedule" / "kernels") == []  # nothing left


def test_the_builders_timeout_bounds_the_compiler(tmp_path):
    """A LocalBuilder's ``timeout_sec`` reaches the compiler: the hung compile is an error
    result, and the compiler's child is gone however the deadline struck (the compiler's
    own, or the worker killed with its process group)."""
    cc, pid_file = hanging_cc(tmp_path)
    child = textwrap.dedent(
        """
        from metaschedule import te
        from metaschedule.builder import BuilderInput, LocalBuilder
        from metaschedule.target import Target
        from metaschedule.tir.function import IRModule

        a = te.placeholder((8,), "float32", name="A")
        mod = IRModule({"main": te.create_prim_func([a, te.compute((8,), lambda i: a[i] * 3.0)])})
        with LocalBuilder(max_workers=1, timeout_sec=2) as builder:
            (result,) = builder.build([BuilderInput(mod, Target("llvm"))])
        print(result.error_msg)
        """
    )
    env = {**os.environ, "CC": cc, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    proc = subprocess.run(
        [sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "timed out after 2" in proc.stdout
    _await_death(int(open(pid_file).read()))


# ----------------------------------------------------------------------------- the cache


def test_the_cache_folder_is_private(tmp_path, monkeypatch):
    from metaschedule.runtime.module import kernel_cache_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    path = kernel_cache_dir()
    assert path == str(tmp_path / "xdg" / "metaschedule" / "kernels")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(compile_shared(SOURCE, ["-shared", "-fPIC"])).st_mode) & 0o100


def test_a_cache_folder_of_another_user_is_refused(tmp_path, monkeypatch, caplog):
    """A cache folder owned by someone else (who could plant libraries this process then
    loads) is refused with a warning; a private temporary folder takes its place."""
    from metaschedule.runtime import module

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    theirs = module.kernel_cache_dir()  # ours for now
    module._private_substitute.cache_clear()
    monkeypatch.setattr(os, "getuid", lambda: os.stat(theirs).st_uid + 1)  # now: theirs
    with caplog.at_level("WARNING", logger="metaschedule.runtime.module"):
        mine = module.kernel_cache_dir()
        path = compile_shared(SOURCE, ["-shared", "-fPIC"])
    try:
        assert mine != theirs and os.path.dirname(path) == mine
        assert stat.S_IMODE(os.stat(mine).st_mode) == 0o700
        assert f"the kernel cache {theirs} belongs to another user" in caplog.text
        assert caplog.text.count("belongs to another user") == 1  # once per process
        assert os.listdir(theirs) == []
        assert call_answer(path) == 42
    finally:
        shutil.rmtree(mine, ignore_errors=True)
        module._private_substitute.cache_clear()


def test_a_cache_folder_others_can_write_is_made_private(tmp_path, caplog):
    """A cache folder of ours that others could write to is tightened to 0700, and the
    libraries found there (anyone could have planted them) are built again."""
    cache = str(tmp_path / "kernels")
    path = compile_shared(SOURCE, ["-shared", "-fPIC"], cache)
    os.chmod(cache, 0o777)
    with open(path, "wb") as f:  # planted, with a matching hash
        f.write(b"not a library")
    with open(path + ".sha256", "w") as f:
        f.write(hashlib.sha256(b"not a library").hexdigest())
    with caplog.at_level("WARNING", logger="metaschedule.runtime.module"):
        again = compile_shared(SOURCE, ["-shared", "-fPIC"], cache)
    assert again == path
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    assert "was writable by other users" in caplog.text
    assert call_answer(again) == 42


def test_a_tampered_library_is_rebuilt(tmp_path, monkeypatch, caplog):
    cc, log = counting_cc(tmp_path)
    monkeypatch.setenv("CC", cc)
    cache = str(tmp_path / "kernels")
    path = compile_shared(SOURCE, ["-shared", "-fPIC"], cache)
    good = open(path, "rb").read()
    assert open(path + ".sha256").read().strip() == hashlib.sha256(good).hexdigest()
    other = compile_shared(SOURCE.replace("42", "666"), ["-shared", "-fPIC"], cache)
    shutil.copyfile(other, path)  # a library that loads, computing something else
    with caplog.at_level("WARNING", logger="metaschedule.codegen.compiler"):
        again = compile_shared(SOURCE, ["-shared", "-fPIC"], cache)
    assert again == path and runs(log) == 3
    assert "does not match its recorded sha256" in caplog.text
    assert open(path, "rb").read() == good  # the tamper is gone (builds are reproducible)


def test_a_library_without_its_hash_is_rebuilt(tmp_path, monkeypatch, caplog):
    cc, log = counting_cc(tmp_path)
    monkeypatch.setenv("CC", cc)
    cache = str(tmp_path / "kernels")
    path = compile_shared(SOURCE, ["-shared", "-fPIC"], cache)
    os.unlink(path + ".sha256")
    with caplog.at_level("WARNING"):
        assert compile_shared(SOURCE, ["-shared", "-fPIC"], cache) == path
    assert runs(log) == 2 and os.path.exists(path + ".sha256")
    assert "sha256" not in caplog.text  # a hash not written yet is no tamper
