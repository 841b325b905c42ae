"""App configuration."""

from __future__ import annotations

from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """Planwatch's dashboard app."""

    name = "dashboard"
    verbose_name = "Planwatch"
    default_auto_field = "django.db.models.BigAutoField"
