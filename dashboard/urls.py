"""Dashboard pages."""

from __future__ import annotations

from django.urls import path

from dashboard.views import interrupts, runs

app_name = "dashboard"

urlpatterns = [
    path("", runs.run_list, name="runs"),
    path("runs/<uuid:run_id>/interrupts/", interrupts.run_interrupts, name="run_interrupts"),
    path("inbox/", interrupts.inbox, name="inbox"),
]
