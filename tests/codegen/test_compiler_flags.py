"""Which flags the C compiler gets: GCC's costly -O3 loop passes are off, others untouched."""

from __future__ import annotations

import os
import stat

import pytest

from metaschedule.codegen import compiler
from metaschedule.target import Target


def _fake_compiler(tmp_path, name: str, version: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{version}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.mark.parametrize(
    "version, is_gcc",
    [
        ("cc (Debian 12.2.0-14) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.", True),
        ("gcc (GCC) 13.1.1 20230614", True),
        ("Debian clang version 14.0.6\nTarget: x86_64-pc-linux-gnu", False),
        ("Apple clang version 15.0.0 (clang-1500.1.0.2.5)", False),
    ],
)
def test_gcc_only_flags_follow_the_compiler(tmp_path, monkeypatch, version, is_gcc):
    cc = _fake_compiler(tmp_path, f"cc{abs(hash(version))}", version)
    monkeypatch.setenv("CC", cc)
    flags = compiler.compiler_flags(Target("llvm"))
    assert all((f in flags) is is_gcc for f in compiler.GCC_FAST_BUILD_FLAGS)
    assert "-O3" in flags and "-fopenmp" in flags


def test_a_wrapper_command_is_judged_by_its_compiler(tmp_path, monkeypatch):
    """``CC="ccache gcc"``: the compiler is the last word, not the wrapper."""
    gcc = _fake_compiler(tmp_path, "gcc-fake", "gcc (GCC) 13.1.1")
    wrapper = _fake_compiler(tmp_path, "wrap", "a wrapper, version 4")
    monkeypatch.setenv("CC", f"{wrapper} {gcc}")
    assert set(compiler.GCC_FAST_BUILD_FLAGS) <= set(compiler.compiler_flags(Target("llvm")))


def test_a_missing_compiler_gets_no_gcc_flags(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", os.path.join(str(tmp_path), "no-such-cc"))
    flags = compiler.compiler_flags(Target("llvm"))
    assert not set(compiler.GCC_FAST_BUILD_FLAGS) & set(flags)


def _compiler_without(tmp_path, name: str, unknown: str) -> str:
    """A fake GCC that rejects ``-march=<unknown>`` as GCC 12 rejects ``znver5``."""
    path = tmp_path / name
    path.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do\n'
        f'  if [ "$a" = "-march={unknown}" ]; then echo "bad value for -march=" >&2; exit 1; fi\n'
        "done\n"
        "echo 'gcc (GCC) 12.2.0'\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.mark.parametrize(
    "mcpu, host, expected",
    [
        ("znver5", "ZEN5", "-march=native"),  # the host's CPU, unknown to the compiler
        ("znver5", "ZEN4", "-march=x86-64-v4"),  # another CPU: its vector width's level
        ("znver3", "ZEN5", "-march=znver3"),  # known to the compiler: as given
        ("native", "ZEN5", "-march=native"),
    ],
)
def test_a_cpu_the_compiler_does_not_know_is_replaced(tmp_path, monkeypatch, mcpu, host, expected):
    from metaschedule import target as target_mod
    from metaschedule.testing import hosts

    monkeypatch.setenv("CC", _compiler_without(tmp_path, f"gcc12-{mcpu}-{host}", "znver5"))
    monkeypatch.setattr(target_mod, "host_cpu_info", lambda: getattr(hosts, host))
    monkeypatch.setattr(compiler.platform, "machine", lambda: "x86_64")
    assert expected in compiler.compiler_flags(Target(f"llvm -mcpu={mcpu}"))


def test_a_misspelt_cpu_is_a_clear_build_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", _compiler_without(tmp_path, "gcc12-typo", "znvr5"))
    with pytest.raises(compiler.BuildError, match="does not know -march=znvr5"):
        compiler.compiler_flags(Target("llvm -mcpu=znvr5"))


@pytest.mark.compiler
def test_the_hosts_own_cpu_name_builds_and_runs():
    """``{"kind": "llvm", "mcpu": <the host's CPU>}``, as TVM users write a target, builds
    with the system compiler even where it does not know that name."""
    import numpy as np

    from metaschedule import te
    from metaschedule.codegen import build
    from metaschedule.target import host_cpu_info

    name = host_cpu_info().cpu_name
    if name is None:
        pytest.skip("this host's CPU has no LLVM name here")
    a = te.placeholder((64,), "float32", "A")
    b = te.compute((64,), lambda i: a[i] * 2.0, name="B")
    lib = build(te.create_prim_func([a, b]), Target({"kind": "llvm", "mcpu": name}))
    x = np.arange(64, dtype="float32")
    y = np.zeros(64, "float32")
    lib(x, y)
    np.testing.assert_allclose(y, 2 * x)
