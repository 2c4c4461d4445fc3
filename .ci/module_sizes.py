"""The per-module size check of .ci/lint: no module of metaschedule/ over LIMIT lines,
except those in .ci/module_size_allowlist.txt, which may not grow past their listed count.

Run from the repository root: ``python3 .ci/module_sizes.py``; exit 1 on a violation.
"""

from __future__ import annotations

import sys
from pathlib import Path

LIMIT = 600
ROOT = Path(__file__).resolve().parent.parent
ALLOWLIST = ROOT / ".ci" / "module_size_allowlist.txt"


def allowed() -> dict[str, int]:
    caps = {}
    for line in ALLOWLIST.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            path, count = line.rsplit(maxsplit=1)
            caps[path] = int(count)
    return caps


def main() -> int:
    caps = allowed()
    errors, notes = [], []
    for path in sorted((ROOT / "metaschedule").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        cap = caps.pop(rel, None)
        if cap is None and lines > LIMIT:
            errors.append(f"{rel}: {lines} lines, over the {LIMIT}-line limit; split it")
        elif cap is not None and lines > cap:
            errors.append(f"{rel}: {lines} lines, grew past its allowed {cap}; shrink it")
        elif cap is not None and lines < cap:
            notes.append(
                f"{rel}: {lines} lines (allowed {cap}): lower its count in {ALLOWLIST.name}"
            )
    notes += [f"{rel}: listed in {ALLOWLIST.name} but gone: remove its line" for rel in caps]
    for note in notes:
        print(f"note: {note}")
    for error in errors:
        print(f"error: {error}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
