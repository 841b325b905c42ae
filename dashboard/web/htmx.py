"""The request type of views that read ``request.htmx`` (set by django-htmx's middleware)."""

from __future__ import annotations

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """An ``HttpRequest`` as django-htmx's middleware leaves it."""

    htmx: HtmxDetails
