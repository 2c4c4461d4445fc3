"""The package's layers are a contract: no module imports a layer above its own.

The order is DESIGN.md's, bottom to top (docs/layout.md draws it):

    tir < te < schedule < target/codegen/runtime < the tuner < graph < relax_integration < cli

The tuner is one layer: ``arg_info``, ``measure_candidate``, ``registry``, the component
subpackages (builder, runner, database, ...), ``tune_context``, ``tune`` and the helpers
they share (``utils``, ``logging``, ``profiler``, ``testing``, ...). Imports are read
with ``ast`` (those under ``if TYPE_CHECKING:`` and inside functions included), so the
test needs no import of the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "metaschedule"

#: top-level name under metaschedule -> layer; any other name is the tuner's layer
LAYERS: dict[str, int] = {
    "tir": 0,
    "te": 1,
    "schedule": 2,
    "target": 3,
    "codegen": 3,
    "runtime": 3,
    "graph": 5,
    "relax_integration": 6,
    "cli": 7,
    "__main__": 7,
}
TUNER = 4

#: (importing module, imported module) pairs allowed to go up, and why
ALLOWED: dict[tuple[str, str], str] = {
    ("metaschedule.tir", "metaschedule.schedule"): (
        "tir.Schedule is TVM's name for schedule.Schedule; a lazy module __getattr__"
    ),
}


def layer(module: str) -> int | None:
    """The layer of a dotted module name; None for the package itself (it imports all)."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    return LAYERS.get(parts[1], TUNER)


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, package_dir: Path = PACKAGE) -> list[tuple[int, str]]:
    """(line, absolute module) of every import of our own package in ``path``."""
    name = module_name(path, package_dir)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if node.module is None:  # "from . import x": x may be a submodule
                out += [(node.lineno, f"{target}.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, target))
    return [(line, m) for line, m in out if m.split(".")[0] == "metaschedule"]


def upward_imports(package: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        importer = module_name(path, package)
        own = layer(importer)
        if own is None:
            continue
        for line, target in imported_modules(path, package):
            theirs = layer(target)
            allowed = any(
                importer == a and (target == b or target.startswith(b + ".")) for a, b in ALLOWED
            )
            if theirs is not None and theirs > own and not allowed:
                found.append(
                    f"{path.relative_to(package.parent)}:{line}: {importer} (layer {own}) "
                    f"imports {target} (layer {theirs})"
                )
    return found


def test_no_module_imports_a_layer_above_it():
    found = upward_imports()
    assert not found, (
        "imports that go up a layer (move the shared code down, pass it in, or add an "
        "entry with a reason to ALLOWED):\n" + "\n".join(found)
    )


def test_the_checker_sees_relative_and_absolute_imports(tmp_path):
    pkg = tmp_path / "metaschedule"
    (pkg / "tir").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import tir, cli\n")
    (pkg / "tir" / "__init__.py").write_text("")
    (pkg / "tir" / "bad.py").write_text(
        "from ..schedule import Schedule\n"
        "def f():\n"
        "    import metaschedule.tune\n"
        "    from .. import graph\n"
        "from .expr import Var\n"
    )
    found = upward_imports(pkg)
    assert [f.split(": ", 1)[1] for f in found] == [
        "metaschedule.tir.bad (layer 0) imports metaschedule.schedule (layer 2)",
        "metaschedule.tir.bad (layer 0) imports metaschedule.tune (layer 4)",
        "metaschedule.tir.bad (layer 0) imports metaschedule.graph (layer 5)",
    ]


@pytest.mark.parametrize(
    "module, expected",
    [
        ("metaschedule.tir.arith.simplify", 0),
        ("metaschedule.codegen.c_expr", 3),
        ("metaschedule.registry", TUNER),
        ("metaschedule.cli", 7),
        ("metaschedule", None),
    ],
)
def test_layer_of(module, expected):
    assert layer(module) == expected
