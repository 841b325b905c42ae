"""One exception handler: every API error is JSON with a ``detail`` naming the bad field."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from config.dberrors import database_busy
from dashboard.services import (
    AnswerForbidden,
    BudgetError,
    InterruptClosed,
    LimitReached,
    ModelSettingsError,
    RunStateError,
    ServiceError,
)

# A service refusal because of the state of things (not the request's shape) is a conflict.
CONFLICTS = (RunStateError, InterruptClosed)


class RequestTooLarge(exceptions.APIException):
    """The request body is larger than ``DATA_UPLOAD_MAX_MEMORY_SIZE``."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "request body too large; send less data"
    default_code = "too_large"


RETRY_AFTER_SECONDS = 5
"""What a 503 for a busy database tells the client to wait before it retries."""

def busy_response() -> Response:
    """503 with ``Retry-After``: the database, not the request, is at fault; send it again."""
    set_rollback()
    return Response(
        {"detail": f"the database is busy (a write waited past its timeout); retry in "
                   f"{RETRY_AFTER_SECONDS} seconds",
         "code": "database_busy", "errors": {}},
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def flatten(detail: Any, prefix: str = "") -> dict[str, str]:
    """DRF's nested validation detail as ``{"field.sub": "message; message"}``."""
    if isinstance(detail, dict):
        flat: dict[str, str] = {}
        for key, value in detail.items():
            name = "" if key == "non_field_errors" else str(key)
            flat.update(flatten(value, f"{prefix}.{name}" if prefix and name else prefix or name))
        return flat
    if isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            return {prefix: "; ".join(str(item) for item in detail)}
        flat = {}
        for index, item in enumerate(detail):
            flat.update(flatten(item, f"{prefix}.{index}" if prefix else str(index)))
        return flat
    return {prefix: str(detail)}


def _too_large(context: dict[str, Any]) -> str:
    request = context.get("request")
    size = request.META.get("CONTENT_LENGTH", "?") if request is not None else "?"
    return (f"request body is {size} bytes; the limit is "
            f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE} (DATA_UPLOAD_MAX_MEMORY_SIZE). "
            "Send less data.")


def _describe(errors: dict[str, str]) -> str:
    return "; ".join(f"{field}: {message}" if field else message
                     for field, message in errors.items())


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Map service errors to 400/409, a busy database to 503, and give every error
    ``detail``, ``code``, ``errors``."""
    if database_busy(exc):
        return busy_response()
    if isinstance(exc, RequestDataTooBig):  # DRF reads JSON through Django's checked body
        exc = RequestTooLarge(_too_large(context))
    elif isinstance(exc, Http404):  # e.g. an unknown format suffix
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    if isinstance(exc, ServiceError):
        detail = exc.message
        named = [f for f in exc.errors if f != "__all__"]
        if named and not any(f in detail for f in named):
            detail = f"{', '.join(named)}: {detail}"
        http = 409 if isinstance(exc, CONFLICTS) else 429 if isinstance(exc, LimitReached) \
            else 403 if isinstance(exc, AnswerForbidden) \
            else 422 if isinstance(exc, (BudgetError, ModelSettingsError)) else 400
        return Response({"detail": detail, "code": exc.code, "errors": exc.errors}, status=http)
    response = drf_exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return response
    if isinstance(exc, exceptions.ValidationError):
        errors = flatten(exc.detail)
        response.data = {"detail": _describe(errors) or "invalid request", "code": "invalid",
                         "errors": errors}
    else:
        codes = exc.get_codes()
        response.data = {"detail": str(exc.detail),
                         "code": codes if isinstance(codes, str) else "error", "errors": {}}
    return response
