"""planner/ stays pure LangGraph: no module under it imports Django or the dashboard."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PLANNER = Path(__file__).resolve().parents[2] / "planner"
FORBIDDEN = {"django", "dashboard", "channels", "rest_framework", "config"}


def forbidden_imports(source: str) -> list[str]:
    """Top-level packages from FORBIDDEN that ``source`` imports (at any depth)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(
                node.func, "id", "")) in ("import_module", "__import__") and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            names = [node.args[0].value]
        else:
            continue
        found += [n for n in names if n.split(".")[0] in FORBIDDEN]
    return found


def test_the_checker_catches_every_form_of_import() -> None:
    source = """
import django
import os, channels.layers
from dashboard.models import Run
from rest_framework import serializers
def later():
    from django.conf import settings
    importlib.import_module("dashboard.services")
from . import sibling
from planner.llm import make_llm
"""
    assert forbidden_imports(source) == [
        "django", "channels.layers", "dashboard.models", "rest_framework", "django.conf",
        "dashboard.services"]


def test_no_module_under_planner_imports_django_or_the_dashboard() -> None:
    files = sorted(PLANNER.rglob("*.py"))
    assert len(files) > 10
    offenders = {str(p.relative_to(PLANNER)): bad for p in files
                 if (bad := forbidden_imports(p.read_text(encoding="utf-8")))}
    assert offenders == {}


def test_importing_the_planner_loads_no_django() -> None:
    code = ("import sys, planner.registry as r; r.all_graphs(); "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            f"{sorted(FORBIDDEN)!r}); print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=PLANNER.parent, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
