"""The package's layers are a contract: no module imports a layer above its own; and
imports of our own package are at module level unless a comment says why not.

The order is DESIGN.md's, bottom to top (docs/layout.md draws it):

    tir < te < schedule < target/codegen/runtime < the tuner < graph < relax_integration < cli

The tuner is one layer: ``arg_info``, ``measure_candidate``, ``registry``, the component
subpackages (builder, runner, database, ...), ``tune_context``, ``tune`` and the helpers
they share (``utils``, ``logging``, ``profiler``, ``testing``, ...). Imports are read
with ``ast`` (those under ``if TYPE_CHECKING:`` and inside functions included), so the
test needs no import of the package.

A function-local import of our package hides a module's dependencies and is paid on
every call; it is kept only for a reason written on its line as ``# local: <why>`` (an
import cycle, a layer above reached lazily, start-up time of the command line), or in a
folder listed in ``LOCAL_IMPORTS_ALLOWED`` until it is cleaned up.
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
    # test support (doubles, probes of hostile inputs): may use every layer, and only
    # the command line and the package itself import it
    "testing": 7,
}
TUNER = 4

#: (importing module, imported module) pairs allowed to go up, and why
ALLOWED: dict[tuple[str, str], str] = {
    ("metaschedule.tir", "metaschedule.schedule"): (
        "tir.Schedule is TVM's name for schedule.Schedule; a lazy module __getattr__"
    ),
    ("metaschedule.report.data", "metaschedule.graph.default_times"): (
        "the report reads the default schedules' times file tune_relax writes (its reader, "
        "load_default_times, is json and the standard library); the rest of that module "
        "measures defaults and stays in the graph layer"
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


# ----------------------------------------------------------------------------- local imports
#: module families (dotted prefixes) whose function-local imports are not checked yet:
#: folders being reworked elsewhere, to be cleaned and then removed from this list
LOCAL_IMPORTS_ALLOWED: tuple[str, ...] = (
    "metaschedule.codegen",
    "metaschedule.graph",
    "metaschedule.mutator",
    "metaschedule.postproc",
    "metaschedule.relax_integration",
    "metaschedule.schedule_rule",
    "metaschedule.search_strategy",
    "metaschedule.space_generator",
)
LOCAL_MARK = "# local:"


def function_local_imports(path: Path, package_dir: Path = PACKAGE) -> list[tuple[int, str, str]]:
    """(line, absolute module, source text) of every import of our own package that sits
    inside a function (a method, a nested function or a lambda) of ``path``."""
    source = path.read_text()
    lines = source.splitlines()
    name = module_name(path, package_dir)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                if isinstance(child, ast.Import):
                    targets = [a.name for a in child.names]
                elif child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    targets = [".".join(base + ([child.module] if child.module else []))]
                else:
                    targets = [child.module or ""]
                ours = [t for t in targets if t.split(".")[0] == "metaschedule"]
                if ours:
                    end = child.end_lineno or child.lineno
                    text = "\n".join(lines[child.lineno - 1 : end])
                    found.append((child.lineno, ours[0], text))
            inner = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(child, in_function or inner)

    visit(ast.parse(source, str(path)), False)
    return found


def unexplained_local_imports(package: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        importer = module_name(path, package)
        if any(importer == a or importer.startswith(a + ".") for a in LOCAL_IMPORTS_ALLOWED):
            continue
        for line, target, text in function_local_imports(path, package):
            _, mark, reason = text.partition(LOCAL_MARK)
            if not mark or not reason.strip():
                found.append(
                    f"{path.relative_to(package.parent)}:{line}: {importer} imports "
                    f"{target} inside a function"
                )
    return found


def test_function_local_imports_of_the_package_say_why():
    found = unexplained_local_imports()
    assert not found, (
        "imports of our package inside functions (move them to the top of the module; if "
        "that makes an import cycle, move the shared code or end the line with "
        f"'{LOCAL_MARK} <why>'):\n" + "\n".join(found)
    )


def test_the_local_import_checker(tmp_path):
    pkg = tmp_path / "metaschedule"
    (pkg / "tune").mkdir(parents=True)
    (pkg / "graph").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tune" / "__init__.py").write_text("")
    (pkg / "tune" / "a.py").write_text(
        "from ..tir import expr\n"  # module level: fine
        "import numpy\n"
        "class C:\n"
        "    def m(self):\n"
        "        import numpy as np\n"  # third party: fine
        "        from ..tir import stmt\n"  # line 6: reported
        "        from . import b  # local: a cycle, b imports a\n"
        "        from .. import te  # local:\n"  # line 8: a mark without a reason
        "f = lambda: __import__('x')\n"
        "def g():\n"
        "    def h():\n"
        "        import metaschedule.schedule\n"  # line 12: nested, absolute
        "    from ..runtime import (  # local: start-up time\n"
        "        load_module,\n"
        "    )\n"
    )
    (pkg / "graph" / "g.py").write_text("def f():\n    from ..tir import expr\n")  # allowed
    found = unexplained_local_imports(pkg)
    assert [f.split(": ", 1)[0].rsplit(":", 1)[1] for f in found] == ["6", "8", "12"]
    assert "metaschedule.tune.a imports metaschedule.tir inside a function" in found[0]
    assert "metaschedule.schedule" in found[2]
