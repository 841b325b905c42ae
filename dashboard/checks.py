"""System checks: ``manage.py check`` names every langgraph.json graph that failed to load."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Warning, register

from planner.registry import failed_graphs


@register()
def langgraph_graphs(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """One warning per graph of ``PLANWATCH_LANGGRAPH_CONFIG`` that could not be loaded."""
    return [
        Warning(f"graph {name!r} from the langgraph.json could not be loaded: {error}",
                hint="Fix the module or its path; the other graphs are served meanwhile.",
                id="planwatch.W001")
        for name, error in failed_graphs().items()
    ]
