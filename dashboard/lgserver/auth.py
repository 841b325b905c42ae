"""``x-api-key``: LangGraph clients send the REST API's tokens in this header."""

from __future__ import annotations

from typing import Any

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
