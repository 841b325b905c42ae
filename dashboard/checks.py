"""System checks: ``manage.py check`` names every langgraph.json graph that failed to load,
its custom routes' app (``http.app``) if that failed, and a server or graph budget that
cannot be taken."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register

from dashboard.http_app import custom_app_error
from dashboard.runs.budgets import BudgetInvalid, budget_parse
from dashboard.runs.conf import planwatch_setting
from planner.registry import all_graphs, failed_graphs


@register()
def langgraph_graphs(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """One warning per graph of ``PLANWATCH_LANGGRAPH_CONFIG`` that could not be loaded."""
    return [
        Warning(f"graph {name!r} from the langgraph.json could not be loaded: {error}",
                hint="Fix the module or its path; the other graphs are served meanwhile.",
                id="planwatch.W001")
        for name, error in failed_graphs().items()
    ]


@register()
def langgraph_http_app(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A warning if ``PLANWATCH_LANGGRAPH_CONFIG``'s ``http.app`` could not be loaded."""
    error = custom_app_error()
    if not error:
        return []
    return [Warning(f"the custom routes (http.app) of the langgraph.json could not be "
                    f"loaded: {error}",
                    hint="Fix the app or its path; the API and the graphs are served "
                         "meanwhile, without the custom routes.", id="planwatch.W002")]


@register()
def budgets(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """An error for ``PLANWATCH_BUDGET``, or a graph's declared budget, that cannot be taken
    (every run would be refused with it)."""
    layers = [("PLANWATCH_BUDGET", planwatch_setting("BUDGET") or None)]
    layers += [(f"graph {spec.name!r} budget", spec.budget) for spec in all_graphs()]
    found: list[CheckMessage] = []
    for field, raw in layers:
        try:
            budget_parse(raw, field=field)
        except BudgetInvalid as exc:
            found.append(Error(str(exc), hint="Fix the budget (README, \"Budgets\"); until "
                               "then each run it applies to is refused.", id="planwatch.E001"))
    return found
