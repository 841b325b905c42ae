"""URLs under ``/api/``: resources, the OpenAPI schema and its offline docs pages."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.urls import include, path, re_path
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularRedocView,
    SpectacularSwaggerSplitView,
)
from rest_framework.routers import DefaultRouter

from dashboard.api import views

app_name = "api"

router = DefaultRouter()
router.include_root_view = False
router.include_format_suffixes = False  # no `.json` twins: the viewsets take no `format`
router.register("runs", views.RunViewSet, basename="run")
router.register("interrupts", views.InterruptViewSet, basename="interrupt")
router.register("graphs", views.GraphViewSet, basename="graph")

urlpatterns = [
    path("", include(router.urls)),
    # DRF's views answer anonymous requests with 401 (it exempts them from Django's login
    # redirect); the two HTML docs pages send a browser to the login page like every page.
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # the split view serves Swagger UI's start-up script as a file (no inline script: CSP)
    path("docs/", login_required(SpectacularSwaggerSplitView.as_view(url_name="api:schema")),
         name="docs"),
    path("redoc/", login_required(SpectacularRedocView.as_view(url_name="api:schema")),
         name="redoc"),
    re_path(r"^.*$", views.NotFoundView.as_view(), name="not-found"),
]
