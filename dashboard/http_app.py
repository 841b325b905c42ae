"""A langgraph.json's custom routes app (``"http": {"app": "./routes.py:app"}``), loaded
once per process: the Starlette or FastAPI application, whether its routes need a token
(``enable_custom_route_auth``), or why it could not be loaded (``manage.py check`` names it,
``planwatch.W002``; the API and the graphs are served without it).

:mod:`dashboard.lgserver.custom_routes` serves it under ``/langgraph/``.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any, cast

from django.conf import settings

from planner.langgraph_config import (
    ConfigError,
    add_dependencies,
    import_attribute,
    read_config,
)

logger = logging.getLogger("planwatch.lgserver")


@dataclass(frozen=True)
class CustomApp:
    """A langgraph.json's ``http.app``, loaded, and whether its routes need a token."""

    app: Any
    """The Starlette (or FastAPI) application."""
    where: str
    """Its reference in the file (``./app.py:app``), for messages."""
    authenticated: bool = False
    """``enable_custom_route_auth``: each request needs an API token."""


def read_custom_app(config_path: str) -> CustomApp | None:
    """The app the langgraph.json at ``config_path`` names in ``http.app`` (None: it names
    none); ``ConfigError`` saying what is wrong, any error of the app's module as raised."""
    root, data = read_config(config_path)
    http = data.get("http")
    if http is None:
        return None
    if not isinstance(http, dict):
        raise ConfigError(f'"http" in {config_path} is {http!r}, not an object such as '
                          '{"app": "./app.py:app"}')
    where = http.get("app")
    if where is None:
        return None
    if not isinstance(where, str) or ":" not in where:
        raise ConfigError(f"http.app {where!r} is not 'path/to/file.py:app' or "
                          "'package.module:app'")
    authenticated = http.get("enable_custom_route_auth", False)
    if not isinstance(authenticated, bool):
        raise ConfigError(f"http.enable_custom_route_auth {authenticated!r} is not true or "
                          "false")
    add_dependencies(root, data)
    app = import_attribute(where, root=root, what="http.app",
                           module_name="langgraph_json_http_app")
    try:
        from starlette.applications import Starlette
    except ImportError:  # pragma: no cover (an app of another framework, starlette absent)
        raise ConfigError(f"http.app {where!r} must be a Starlette or FastAPI application; "
                          "install the one it is written for (pip install fastapi)") from None
    if not isinstance(app, Starlette):
        raise ConfigError(f"http.app {where!r} is a {type(app).__name__}, not a Starlette or "
                          "FastAPI application (app = FastAPI() or app = Starlette(routes=…))")
    return CustomApp(app=app, where=where, authenticated=authenticated)


@functools.cache
def _loaded() -> tuple[CustomApp | None, str]:
    path = cast(dict[str, Any], settings.PLANWATCH).get("LANGGRAPH_CONFIG")
    if not path:
        return None, ""
    try:
        return read_custom_app(path), ""
    except Exception as exc:  # the user's module: kept and reported, the API still served
        logger.exception("the custom routes (http.app) of %s could not be loaded", path)
        return None, f"{type(exc).__name__}: {exc}"


def custom_app() -> CustomApp | None:
    """``PLANWATCH_LANGGRAPH_CONFIG``'s ``http.app``, loaded once (None: it names none, or
    it failed to load: :func:`custom_app_error`)."""
    return _loaded()[0]


def custom_app_error() -> str:
    """Why the configured ``http.app`` could not be loaded ("" if it was, or none is)."""
    return _loaded()[1]
