"""The README and docs/*.md name only what exists, and their command lines parse
(the dated pages of docs/results/ are a record, not checked)."""

from __future__ import annotations

import importlib
import os
import re
import shlex

import pytest

from metaschedule.cli import build_parser

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _readme() -> str:
    """README.md and the pages of docs/, one text."""
    docs = os.path.join(ROOT, "docs")
    paths = [os.path.join(ROOT, "README.md")]
    paths += sorted(os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))
    texts = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            texts.append(f.read())
    return "\n".join(texts)


def _resolve(dotted: str):
    parts = dotted.split(".")
    obj = importlib.import_module("metaschedule")
    for i, part in enumerate(parts[1:], start=1):
        if hasattr(obj, part):
            obj = getattr(obj, part)
        else:  # a submodule not imported by its package
            obj = importlib.import_module("metaschedule." + ".".join(parts[1 : i + 1]))
    return obj


def test_every_ms_name_in_the_readme_exists():
    names = sorted(set(re.findall(r"\bms(?:\.[A-Za-z_][A-Za-z0-9_]*)+", _readme())))
    assert "ms.cost_model.PyCostModel" in names
    missing = []
    for name in names:
        if name.startswith(("ms.relax_integration", "ms.runner.RPCRunner")):
            continue  # named as not built yet
        try:
            _resolve(name)
        except (ImportError, AttributeError):
            missing.append(name)
    assert not missing, f"README names that do not exist: {missing}"


def test_readme_command_lines_parse():
    parser = build_parser()
    lines = [
        ln.split("#")[0].strip()
        for ln in _readme().splitlines()
        if ln.strip().startswith("metaschedule ")
    ]
    assert len(lines) >= 8
    for line in lines:
        for command in line.split("&&"):
            argv = shlex.split(command)[1:]
            try:
                parser.parse_args(argv)
            except SystemExit as err:  # pragma: no cover - the message names the line
                pytest.fail(f"README command does not parse: {command!r} ({err})")
