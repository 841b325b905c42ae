"""No import cycle in planner/ or dashboard/, counting imports inside functions.

Imports under ``if TYPE_CHECKING:`` are left out (they never run). A cycle is printed as
the chain of modules that closes it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("planner", "dashboard")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The project modules ``module`` imports, wherever in its code the import stands."""
    found: set[str] = set()

    def resolve(name: str) -> None:
        while name and name not in known:  # `from a.b import c` may name a module or a value
            name = name.rpartition(".")[0]
        if name and name != module:
            found.add(name)

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                resolve(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                resolve(f"{base}.{alias.name}")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    """Every project module under ``PACKAGES`` and the project modules it imports."""
    paths = {
        _module_name(p): p
        for package in PACKAGES for p in (ROOT / package).rglob("*.py")
        if "migrations" not in p.parts
    }
    known = set(paths)
    return {name: _imports(ast.parse(path.read_text()), name, path.name == "__init__.py", known)
            for name, path in paths.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One chain per cycle found by a depth-first walk (each closing edge reported once)."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt):], nxt])
            elif nxt not in state:
                walk(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node)
    return cycles


def test_the_checker_sees_a_cycle_through_a_function_level_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
    tree = ast.parse("def f():\n    from dashboard.runs import executor\n"
                     "if TYPE_CHECKING:\n    import dashboard.web.views\n")
    assert _imports(tree, "x", False, {"dashboard.runs.executor", "dashboard.web.views"}) == {
        "dashboard.runs.executor"}


def test_planner_and_dashboard_have_no_import_cycle():
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_planner_never_imports_django_or_the_dashboard():
    graph = import_graph()
    for name, path in ((n, n) for n in graph if n.startswith("planner")):
        assert not any(i.startswith("dashboard") for i in graph[path]), name


ENTRY_POINTS = ("dashboard.web", "dashboard.api", "dashboard.lgserver", "dashboard.admin",
                "dashboard.management")
"""The packages requests and commands come in by; only these may import the web layer."""


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_nothing_below_the_web_layer_imports_it():
    graph = import_graph()
    below = [n for n in graph
             if n.startswith("dashboard") and not any(_within(n, p) for p in ENTRY_POINTS)]
    assert "dashboard.services" in below and "dashboard.runs.executor" in below
    assert "dashboard.crons" in below and "dashboard.thread_runs" in below
    # nor any other entry point (the crons start their runs through thread_runs, a service,
    # not through the LangGraph API's package)
    wrong = {n: sorted(i for i in graph[n] if any(_within(i, p) for p in ENTRY_POINTS))
             for n in below}
    wrong = {n: found for n, found in wrong.items() if found}
    assert not wrong, f"modules below the web layer import an entry point: {wrong}"
