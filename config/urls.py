"""Top-level URLs: the dashboard, accounts, the admin and the API."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("api/", include("dashboard.api.urls")),
    path("", include("dashboard.urls")),
]

handler400 = "dashboard.views.errors.bad_request"
