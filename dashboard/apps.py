"""App configuration: loads the graphs of ``PLANWATCH["GRAPH_MODULES"]`` at start-up."""

from __future__ import annotations

from typing import Any, cast

from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from planner.registry import load_graphs


class DashboardConfig(AppConfig):
    """Planwatch's dashboard app."""

    name = "dashboard"
    verbose_name = "Planwatch"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register the graphs the settings list (the built-in planners by default)."""
        modules = cast(dict[str, Any], settings.PLANWATCH)["GRAPH_MODULES"]
        try:
            load_graphs(modules)
        except ImportError as exc:
            raise ImproperlyConfigured(str(exc)) from exc
