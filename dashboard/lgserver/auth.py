"""``x-api-key``: LangGraph clients send the REST API's tokens in this header."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from dashboard.api.auth import TokenAuthentication


class ApiKeyAuthentication(TokenAuthentication):
    """A knox token from ``x-api-key`` (``get_client(url=…, api_key=TOKEN)``), checked,
    expired and revoked exactly as in ``Authorization: Token …``."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        key = request.META.get("HTTP_X_API_KEY", "")
        if not key:
            return None
        user, token = self.authenticate_credentials(key.strip().encode())
        return user, token

    def authenticate_header(self, request: Request) -> str:
        """Sent with a 401, so an anonymous client is told how to authenticate."""
        return "x-api-key"


def key_of(headers: dict[str, str]) -> str:
    """The API token a request sends (``x-api-key``, or ``Authorization: Token …``); "" for
    none. ``headers``: names in lower case."""
    key = headers.get("x-api-key", "").strip()
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return key or (token.strip() if scheme.lower() == "token" else "")


def user_of_key(key: str) -> Any | None:
    """The user an API token belongs to, checked, expired and revoked as every request's
    (None: no such token, or it authenticates nobody)."""
    if not key:
        return None
    try:
        user, _ = ApiKeyAuthentication().authenticate_credentials(key.encode())
    except AuthenticationFailed:
        return None
    return user
