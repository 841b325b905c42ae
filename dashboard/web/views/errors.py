"""Error pages that say what went wrong and how to fix it."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponseBadRequest
from django.utils.html import escape

from dashboard.web.middleware import too_large


def bad_request(request: HttpRequest, exception: Exception | None = None
                ) -> HttpResponseBadRequest:
    """400: name the problem (a too-large form above all) instead of a bare status line;
    the APIs' too-large bodies get their JSON 413."""
    if isinstance(exception, RequestDataTooBig) and request.path.startswith(
            ("/api/", "/langgraph/")):
        return too_large()  # type: ignore[return-value]
    if isinstance(exception, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE // 1024
        message = (f"The form data is larger than the {limit:,} KB limit; nothing was saved. "
                   "Shorten the answer and send it again.")
    else:
        message = "The request could not be understood; reload the page and try again."
    if request.headers.get("HX-Request"):
        return HttpResponseBadRequest(escape(message))
    return HttpResponseBadRequest(
        f"<!doctype html><title>Bad request · Planwatch</title><h1>Bad request</h1>"
        f"<p>{escape(message)}</p><p><a href=\"/\">Back to Planwatch</a></p>"
    )
