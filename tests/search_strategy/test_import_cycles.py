"""The cost models, the feature extractor and the search strategies import each other one
way: search_strategy -> cost_model -> feature_extractor, never back (issue 32 removed the
cycle prior -> feature_extractor -> search_strategy -> evolutionary_search -> prior).

The module import graph is read with ``ast`` from the module-level imports of
``metaschedule/**/*.py`` (those under ``if TYPE_CHECKING:`` included: a type checker
follows them too; function-local imports left out). Importing ``a.b.c`` imports the
packages ``a.b`` on the way; the root package ``metaschedule``, which imports everything
by design, is left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "metaschedule"

#: top-level subpackages of which no two may share a strongly connected component
ONE_WAY = ("cost_model", "feature_extractor", "search_strategy")


def module_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module name -> the modules of the package its module-level statements import."""
    root = package.name
    files: dict[str, tuple[Path, bool]] = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        files[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in files.items():
        here = name if is_pkg else name.rsplit(".", 1)[0]
        deps: set[str] = set()
        for node in _module_level_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [
                    f"{mod}.{a.name}" if f"{mod}.{a.name}" in files else mod for a in node.names
                ]
            for target in targets:
                parts = target.split(".")
                for i in range(2, len(parts) + 1):  # the packages on the way, then the module
                    dep = ".".join(parts[:i])
                    if dep in files and dep != name:
                        deps.add(dep)
        graph[name] = {d for d in deps if d != root}
    return graph


def _module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    out: list[ast.Import | ast.ImportFrom] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                out.append(node)
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(node.orelse)
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
                visit(getattr(node, "finalbody", []))

    visit(tree.body)
    return out


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one module
    (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, deps = work[-1]
            w = next(deps, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _subpackage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def test_cost_model_feature_extractor_and_search_strategy_import_one_way():
    graph = module_graph()
    assert "metaschedule.cost_model.prior" in graph  # the graph is read
    for comp in strongly_connected(graph):
        shared = sorted({_subpackage(m) for m in comp} & set(ONE_WAY))
        assert len(shared) < 2, f"an import cycle through {', '.join(shared)}: {comp}"


def test_the_checker_finds_a_cycle_through_type_checking_imports(tmp_path):
    pkg = tmp_path / "pkg"
    for sub in ("a", "b", "c"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from . import a, b, c\n")
    (pkg / "a" / "x.py").write_text("from ..b import y\n")
    (pkg / "b" / "y.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a.x import X\n"
    )
    (pkg / "c" / "z.py").write_text("def f():\n    from ..a import x\n")  # local: not counted
    comps = strongly_connected(module_graph(pkg))
    assert comps == [["pkg.a.x", "pkg.b.y"]]
