"""Top-level URLs: the dashboard, accounts, the admin and the API."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("api/", include("dashboard.api.urls")),
    # pages name their icon; this answers browsers and tools that ask the root anyway
    path("favicon.ico", login_not_required(RedirectView.as_view(
        url=static("planwatch/favicon.svg"), permanent=True))),
    path("", include("dashboard.urls")),
]

handler400 = "dashboard.views.errors.bad_request"
