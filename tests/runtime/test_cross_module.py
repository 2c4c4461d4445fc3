"""runtime.cross_module: reading a library's embedded metadata and source from its ELF
bytes, without loading it (how a CrossModule of another architecture is read)."""

from __future__ import annotations

import json

import pytest

from metaschedule import te
from metaschedule.codegen import build
from metaschedule.codegen.isa import host_arch
from metaschedule.runtime.cross_module import elf_arch, read_elf_string
from metaschedule.runtime.module import METADATA_SYMBOL, SOURCE_SYMBOL


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.mark.compiler
def test_the_elf_reader_finds_what_the_loader_finds():
    a = te.placeholder((16,), "float32", name="A")
    lib = build(te.create_prim_func([a, te.compute((16,), lambda i: a[i] - 1.0, name="B")]))
    data = open(lib.path, "rb").read()
    assert elf_arch(data) == host_arch()
    assert json.loads(read_elf_string(data, METADATA_SYMBOL)) == lib.metadata
    assert read_elf_string(data, SOURCE_SYMBOL) == lib.get_source()
    assert read_elf_string(data, "no_such_symbol") is None


def test_bytes_that_are_no_elf_file_are_refused():
    assert elf_arch(b"#!/bin/sh\n") is None
    with pytest.raises(ValueError, match="not a 64-bit little-endian ELF file"):
        read_elf_string(b"{}", METADATA_SYMBOL)
    truncated = b"\x7fELF\x02\x01" + bytes(14) + b"\xff" * 48  # section table out of range
    with pytest.raises(ValueError, match="truncated or malformed"):
        read_elf_string(truncated, METADATA_SYMBOL)
