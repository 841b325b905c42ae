"""Dashboard pages."""

from __future__ import annotations

from django.urls import path

from dashboard.views import runs

app_name = "dashboard"

urlpatterns = [
    path("", runs.run_list, name="runs"),
]
