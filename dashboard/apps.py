"""App configuration: loads the graphs of ``PLANWATCH["GRAPH_MODULES"]`` at start-up."""

from __future__ import annotations

from typing import Any, cast

from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from planner.langgraph_config import ConfigError
from planner.registry import load_graphs, load_langgraph_config


class DashboardConfig(AppConfig):
    """Planwatch's dashboard app."""

    name = "dashboard"
    verbose_name = "Planwatch"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register the graphs the settings list (the built-in planners by default), then
        those of ``PLANWATCH_LANGGRAPH_CONFIG``'s langgraph.json."""
        from dashboard import checks, signals  # noqa: F401  (sockets follow the session)

        conf = cast(dict[str, Any], settings.PLANWATCH)
        try:
            load_graphs(conf["GRAPH_MODULES"])
            if conf.get("LANGGRAPH_CONFIG"):
                load_langgraph_config(conf["LANGGRAPH_CONFIG"])
        except (ImportError, ConfigError) as exc:
            raise ImproperlyConfigured(str(exc)) from exc
