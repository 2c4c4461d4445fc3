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
