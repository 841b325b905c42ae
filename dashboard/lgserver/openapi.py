"""The OpenAPI document of ``/langgraph/`` (``GET /langgraph/openapi.json``).

drf-spectacular builds it from the endpoints themselves: their paths and methods, and the
body shape each one declares (``request_shapes``, :mod:`dashboard.lgserver.bodies`), the
same shape its body is parsed with. Answers are LangGraph's shapes, described as any JSON.
Its paths are relative to the API's root (``/threads/search``; ``servers``:
``/langgraph``), as LangGraph's server writes them; a langgraph.json's custom routes join
them (:mod:`~dashboard.lgserver.custom_routes`).
Planwatch's own ``/api/schema/`` leaves these endpoints out.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes

PREFIX = "/langgraph/"

SETTINGS = {
    "TITLE": "Planwatch: LangGraph server API",
    "DESCRIPTION": "LangGraph's server API (assistants, threads, runs, store, crons) as "
                   "Planwatch serves it; send an API token as `x-api-key`.",
    "PREPROCESSING_HOOKS": ["dashboard.lgserver.openapi.only_langgraph"],
    # a langgraph.json's custom routes (http.app) join the document, as on LangGraph's server
    "POSTPROCESSING_HOOKS": ["dashboard.lgserver.custom_routes.with_app_paths"],
    "COMPONENT_SPLIT_REQUEST": True,
    # paths relative to the API's root, which the server names (as LangGraph's server
    # writes its document when mounted under a prefix): /threads/search at /langgraph
    "SCHEMA_PATH_PREFIX": PREFIX.rstrip("/"),
    "SCHEMA_PATH_PREFIX_TRIM": True,
    "SERVERS": [{"url": PREFIX.rstrip("/")}],
}
"""drf-spectacular's settings for this document (the rest are Planwatch's)."""


class LangGraphSchema(AutoSchema):
    """An endpoint's operation: its declared body shape; any JSON as its answer."""

    def get_request_serializer(self) -> Any:
        """The shape the view declares for this method (none: no body)."""
        return getattr(self.view, "request_shapes", {}).get(self.method.lower())

    def get_response_serializers(self) -> Any:
        """LangGraph's shapes, not described here: any JSON."""
        return OpenApiTypes.ANY

    def get_operation_id(self) -> str:
        """The method and the path: ``post_threads_thread_id_runs``."""
        path = self.path.removeprefix(PREFIX).strip("/").replace("{", "").replace("}", "")
        return f"{self.method.lower()}_{path.replace('/', '_')}"

    def get_tags(self) -> list[str]:
        """The resource: assistants, threads, runs, store."""
        parts = [p for p in self.path.removeprefix(PREFIX).split("/")
                 if p and not p.startswith("{")]
        return parts[:1] or ["langgraph"]


def only_langgraph(endpoints: list[Any], **kwargs: Any) -> list[Any]:
    """Keep ``/langgraph/``'s endpoints (the document of this API)."""
    return [e for e in endpoints if e[0].startswith(PREFIX)]


def without_langgraph(endpoints: list[Any], **kwargs: Any) -> list[Any]:
    """Leave ``/langgraph/``'s endpoints out (of ``/api/schema/``)."""
    return [e for e in endpoints if not e[0].startswith(PREFIX)]


class ApiKeyScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """``x-api-key``: an API token, as LangGraph's clients send it."""

    target_class = "dashboard.lgserver.auth.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        """An API key in the ``x-api-key`` header."""
        return {"type": "apiKey", "in": "header", "name": "x-api-key"}
