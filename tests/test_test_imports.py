"""No test module imports from another test module, counting imports inside functions.

What tests share lives in tests/support/ (helpers, and fixtures registered as a plugin in
tests/conftest.py) or in a folder's conftest.py: a helper imported from a ``test_*``
module ties one test file to another's tests, and a fixture imported from one is
defined twice. Nor is a private name (``_pack``) imported from another tests module.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_test_module(name: str) -> bool:
    return name.rpartition(".")[2].startswith("test_")


def imports_of(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, str]]:
    """Each ``(module, name)`` a tests module imports from the tests package, wherever in
    its code the import stands (``name`` empty for ``import tests.x``)."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, "") for alias in node.names
                         if alias.name.split(".")[0] == "tests")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            if base.split(".")[0] == "tests":
                # `from tests.planner import test_x` imports a module, not a value
                found.extend((f"{base}.{alias.name}", "") if _is_test_module(alias.name)
                             else (base, alias.name) for alias in node.names)
    return found


def wrong_imports(module: str, imports: list[tuple[str, str]]) -> list[str]:
    """The imports of ``module`` that reach into a test module or take a private name."""
    wrong = []
    for source, name in imports:
        if source != module and _is_test_module(source):
            wrong.append(f"{module} imports {source}" + (f".{name}" if name else ""))
        elif name.startswith("_"):
            wrong.append(f"{module} imports the private {source}.{name}")
    return wrong


def test_the_checker_sees_a_test_module_and_a_private_name_imported_anywhere():
    tree = ast.parse("from tests.support.planner import Run\n"
                     "def f():\n    from tests.planner.test_graph import xml_plan\n"
                     "from . import test_other\n"
                     "from .test_sibling import helper\n"
                     "import tests.security.test_faults\n"
                     "from tests.support.planner import _pack\n")
    found = imports_of(tree, "tests.planner.test_seed", is_package=False)
    assert sorted(wrong_imports("tests.planner.test_seed", found)) == [
        "tests.planner.test_seed imports tests.planner.test_graph.xml_plan",
        "tests.planner.test_seed imports tests.planner.test_other",
        "tests.planner.test_seed imports tests.planner.test_sibling.helper",
        "tests.planner.test_seed imports tests.security.test_faults",
        "tests.planner.test_seed imports the private tests.support.planner._pack",
    ]
    assert wrong_imports("tests.x", [("tests.support.planner", "Run"),
                                     ("tests.conftest", "wait_run")]) == []


def test_no_test_module_imports_from_another_test_module():
    wrong = []
    for path in sorted(TESTS.rglob("*.py")):
        if "node_modules" in path.parts:
            continue
        module = _module_name(path)
        tree = ast.parse(path.read_text())
        wrong += wrong_imports(module, imports_of(tree, module, path.name == "__init__.py"))
    assert not wrong, ("move what tests share to tests/support/ (fixtures: a conftest.py "
                       "or a plugin module there):\n" + "\n".join(wrong))
