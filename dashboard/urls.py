"""Dashboard pages."""

from __future__ import annotations

from django.urls import path

from dashboard import views

app_name = "dashboard"

urlpatterns = [
    path("", views.run_list, name="runs"),
]
