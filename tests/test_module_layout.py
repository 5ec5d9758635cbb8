"""The package's modules follow the data flow: no module imports, at any depth and inside a
function too, a module that imports it back, and none outside ``autograder/checks/`` is longer
than a reader takes in at one sitting."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "autograder"
#: The most lines a module outside ``checks/`` may have (the hidden tests' checks are per
#: assignment and read question by question).
MAX_MODULE_LINES = 600


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The package's modules ``path`` imports anywhere in its source (``from autograder import
    x`` names the module ``autograder.x`` when there is one)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in modules else node.module)
    return found & modules


def import_graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {name: _imports(path, modules) - {name} for name, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_module_imports_one_that_imports_it():
    actual = cycles(import_graph())
    assert actual == [], f"import cycles among the package's modules: {actual}"


def test_the_judge_modules_import_what_they_use_from_below():
    graph = import_graph()
    assert "autograder.grade" not in graph["autograder.gradescope"], (
        "the rehearsal imports the orchestrator"
    )
    assert "autograder.judge" not in graph["autograder.session"], "the session imports the judge"
    assert "autograder.checks" not in graph["autograder.encoding"], (
        "the student process's encoding imports the checks"
    )


def test_no_module_outside_the_checks_is_too_long_to_read_at_one_sitting():
    actual = {
        path.relative_to(PACKAGE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
        if "checks" not in path.relative_to(PACKAGE).parts
    }
    too_long = {name: lines for name, lines in actual.items() if lines > MAX_MODULE_LINES}
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines: {too_long}"
