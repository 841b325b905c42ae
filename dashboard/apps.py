"""App configuration: registers the graphs of ``PLANWATCH["GRAPH_MODULES"]`` at start-up."""

from __future__ import annotations

import importlib

from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class DashboardConfig(AppConfig):
    """Planwatch's dashboard app."""

    name = "dashboard"
    verbose_name = "Planwatch"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Import the modules that register a user's own graphs with the registry."""
        for module in settings.PLANWATCH["GRAPH_MODULES"]:
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise ImproperlyConfigured(
                    f"PLANWATCH_GRAPH_MODULES names {module!r}, which cannot be imported "
                    f"({exc}); fix the module path or remove it from the setting"
                ) from exc
