"""The README and docs/*.md stay true: every ```python block runs, every command parses.

Each Python block runs in a fresh interpreter in its own temporary folder (small shapes,
few trials: the pages are written so). A block that must not run is preceded by
``<!-- skip-test: why -->``; one that needs a program or a module that may be missing by
``<!-- requires: NAME ... -->`` (skipped without it). Every ``metaschedule ...`` or
``python -m metaschedule ...`` line of a ```bash/```sh block names a subcommand whose
``--help`` must parse. docs/results/ is a dated record, not run.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
MARK = re.compile(r"<!--\s*(skip-test|requires):?\s*(.*?)\s*-->\s*$")
TIMEOUT_SEC = 240


def _blocks(page: Path) -> list[tuple[str, str, int, str | None]]:
    """(language, code, line, the marker comment right before it) of each fenced block."""
    text = page.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        found.append((m.group(1), m.group(2), line, before if MARK.search(before) else None))
    return found


def _python_blocks():
    for page in PAGES:
        for lang, code, line, mark in _blocks(page):
            if lang == "python":
                rel = page.relative_to(ROOT)
                yield pytest.param(code, mark, id=f"{rel}:{line}")


def _has(name: str) -> bool:
    return shutil.which(name) is not None or importlib.util.find_spec(name) is not None


@pytest.mark.slow
@pytest.mark.compiler
@pytest.mark.parametrize("code, mark", list(_python_blocks()))
def test_python_block_runs(code: str, mark: str | None, tmp_path: Path) -> None:
    if mark:
        kind, arg = MARK.search(mark).groups()
        if kind == "skip-test":
            pytest.skip(f"marked skip-test: {arg}")
        missing = [name for name in arg.split() if not _has(name)]
        if missing:
            pytest.skip(f"needs {', '.join(missing)}")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SEC,
    )
    assert proc.returncode == 0, f"the block failed:\n{code}\n--- stderr\n{proc.stderr[-4000:]}"


def _subcommands() -> set[tuple[str, ...]]:
    """The subcommands named by command lines in ```bash/```sh blocks."""
    named: set[tuple[str, ...]] = set()
    for page in PAGES:
        for lang, code, _, _ in _blocks(page):
            if lang not in ("bash", "sh", "shell", "console"):
                continue
            for line in code.replace("\\\n", " ").splitlines():
                for part in re.split(r"&&|\|\||;|\|", line.split(" #")[0]):
                    words = shlex.split(part.strip().lstrip("$ "), comments=True)
                    while words and "=" in words[0] and not words[0].startswith("-"):
                        words = words[1:]  # VAR=value before the command
                    if words[:1] == ["metaschedule"]:
                        rest = words[1:]
                    elif words[:3] in (
                        ["python", "-m", "metaschedule"],
                        ["python3", "-m", "metaschedule"],
                    ):
                        rest = words[3:]
                    else:
                        continue
                    sub = (
                        tuple(rest[:2]) if rest[:1] == ["db"] and len(rest) > 1 else tuple(rest[:1])
                    )
                    named.add(sub)
    return named


def test_the_pages_name_commands() -> None:
    assert ("demo",) in _subcommands()  # the README's main job
    assert ("tune",) in _subcommands()


@pytest.mark.parametrize("sub", sorted(_subcommands()), ids=" ".join)
def test_command_line_parses(sub: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    from metaschedule.cli import main

    code = main([*sub, "--help"])
    assert code == 0, f"metaschedule {' '.join(sub)} --help: {capsys.readouterr().err}"


def test_blocks_are_found_and_marks_are_few() -> None:
    blocks = list(_python_blocks())
    assert len(blocks) >= 10
    skipped = [p for p in blocks if p.values[1] and "skip-test" in p.values[1]]
    assert len(skipped) <= 3, f"too many skip-test blocks: {[p.id for p in skipped]}"
