"""Custom routes: the Starlette or FastAPI app a langgraph.json's ``"http": {"app": …}``
names, served under ``/langgraph/`` beside LangGraph's server API, as LangGraph's server
mounts it beside its own.

- **Which wins.** A path Planwatch serves under ``/langgraph/`` (an endpoint of the API,
  ``openapi.json``, ``ok``, ``health``: :func:`planwatch_serves`) is always Planwatch's,
  whatever the app declares; any other path a route of the app matches is the app's; the
  rest get Planwatch's 404 naming what is not served. (On LangGraph's server a custom
  route shadows every API route but ``/ok``, ``/docs``, ``/openapi.json`` and
  ``/metrics``; here none can, so no route of the app stands in for one of Planwatch's
  and skips its sign-in or its ownership rules.)
- **Who may call them.** As on LangGraph's server, the app's routes are its own (public
  unless it checks its callers) unless ``"enable_custom_route_auth": true``: then each
  request needs an API token (``x-api-key``, or ``Authorization: Token …``), checked as
  every other, or it is refused (401) before the app sees it; the app finds the caller in
  ``request.user`` (``identity``, ``display_name``, ``permissions``, as LangGraph's
  ``BaseUser``), its username in the ``x-planwatch-user`` header, and ``request.auth``
  (its permissions as scopes). What they may do there is the app's rule
  (:func:`dashboard.policy.may_call_custom_routes`).
- **No credentials reach it.** The caller's ``Authorization``, ``x-api-key``, cookies
  (the session's) and CSRF token are taken off every request before the app sees it, so
  an app (or a log of its requests) never holds a token that acts as the caller on
  Planwatch; it gets the caller's identity instead (above).
- **Its document.** Its paths join ``/langgraph/openapi.json`` (a FastAPI app's own
  document; a Starlette app's routes, described by their docstrings), as LangGraph's
  server merges them; a path Planwatch serves keeps Planwatch's description.
- **Its lifespan** is entered before its first request (daphne sends no ASGI lifespan
  events); its shutdown half does not run.
- **Its middleware** is its own: Django's (the host check, CORS of
  ``PLANWATCH_CORS_ORIGINS``, the body limits) does not wrap it; an app served to browsers
  on other origins adds Starlette's ``CORSMiddleware`` itself.

Only HTTP is routed to the app (not websockets). Starlette (or FastAPI) is the app's
dependency, imported only when an app is configured; Planwatch needs neither. The app is
loaded by :mod:`dashboard.http_app`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.urls import Resolver404, resolve

from dashboard import policy
from dashboard.http_app import CustomApp, custom_app
from dashboard.lgserver.auth import key_of, user_of_key
from dashboard.web.probes import VIEWS as PROBES
from planner.langgraph_config import RunUser

PREFIX = "/langgraph"
"""Where LangGraph's server API, and so the app, is served."""

CREDENTIALS = frozenset({b"authorization", b"x-api-key", b"cookie", b"proxy-authorization",
                         b"x-csrftoken"})
"""Headers that carry a caller's Planwatch credentials: never passed to the app (which
would act as the caller everywhere with them); the app gets who calls instead."""

USER_HEADER = b"x-planwatch-user"
"""The header that names the signed-in caller to the app (with
``enable_custom_route_auth``), beside ``request.user``; a caller's own is dropped."""

logger = logging.getLogger("planwatch.lgserver")

Scope = dict[str, Any]
ASGIApp = Any


def planwatch_serves(path: str) -> bool:
    """Whether Planwatch answers ``path`` itself: a probe or one of its endpoints, not the
    catch-all that names what is not served."""
    if path.rstrip("/") in PROBES:
        return True
    try:
        return resolve(path).url_name != "not-served"
    except Resolver404:
        return False


def _caller(key: str) -> RunUser | None:
    """The user a token belongs to, as the app sees it (None: no user, or not allowed)."""
    user = user_of_key(key)
    if user is None or not policy.may_call_custom_routes(user):
        return None
    name = user.get_username()
    return RunUser(identity=name, display_name=user.get_full_name() or name,
                   permissions=tuple(sorted(user.get_all_permissions())))


async def _answer(send: Any, status: int, detail: str, **headers: str) -> None:
    """A JSON ``{"detail": …}`` answer, as Planwatch's API errors are."""
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        *[(k.encode(), v.encode()) for k, v in headers.items()]]})
    await send({"type": "http.response.body", "body": body})


class CustomRoutes:
    """ASGI: a request under ``/langgraph/`` that Planwatch does not serve and a route of
    the app matches goes to the app (signed in first, if it asks); every other, to Django."""

    def __init__(self, django_app: ASGIApp, custom: CustomApp) -> None:
        from starlette.routing import Match

        self.django_app = django_app
        self.custom = custom
        self._no_match = Match.NONE
        self._lock = asyncio.Lock()
        self._started = False
        self._state: dict[str, Any] = {}

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        """Route one connection."""
        inner = self._scope_for_app(scope) if scope["type"] == "http" else None
        if inner is None:
            await self.django_app(scope, receive, send)
            return
        if self.custom.authenticated:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                       for k, v in scope.get("headers", [])}
            user = await sync_to_async(_caller)(key_of(headers))
            if user is None:
                await _answer(send, 401, (
                    "this route needs an API token (langgraph.json sets "
                    "enable_custom_route_auth): send it as x-api-key"),
                    **{"www-authenticate": "x-api-key"})
                return
            from starlette.authentication import AuthCredentials

            inner["user"], inner["auth"] = user, AuthCredentials(list(user.permissions))
            inner["headers"].append((USER_HEADER, user.identity.encode("latin-1", "replace")))
        if not await self._start():
            await _answer(send, 503, f"the custom routes of {self.custom.where} could not "
                                     "start (their app's lifespan failed; see the log)")
            return
        inner["state"] = dict(self._state)
        await self.custom.app(inner, receive, send)

    def _scope_for_app(self, scope: Scope) -> Scope | None:
        """The scope the app is called with (mounted at ``/langgraph``), or None when the
        request is Planwatch's or no route of the app matches it."""
        root = scope.get("root_path", "")
        path = scope["path"].removeprefix(root)
        if not path.startswith(f"{PREFIX}/") or planwatch_serves(path):
            return None
        inner = {**scope, "root_path": f"{root}{PREFIX}", "headers": [
            (name, value) for name, value in scope.get("headers", [])
            if name.lower() not in CREDENTIALS and name.lower() != USER_HEADER]}
        if any(route.matches(inner)[0] != self._no_match for route in self.custom.app.routes):
            return inner
        return None

    async def _start(self) -> bool:
        """Enter the app's lifespan once, before its first request; False if it failed."""
        if self._started:
            return True
        async with self._lock:
            if not self._started:
                app = self.custom.app
                try:
                    state = await app.router.lifespan_context(app).__aenter__()
                except Exception:
                    logger.exception("the lifespan of http.app %s failed", self.custom.where)
                    return False
                self._state = dict(state or {})
                self._started = True
        return True


def with_custom_routes(django_app: ASGIApp) -> ASGIApp:
    """Django's ASGI app, with the configured ``http.app`` served beside it (as it is
    when there is none)."""
    custom = custom_app()
    return django_app if custom is None else CustomRoutes(django_app, custom)


def app_openapi(app: Any) -> dict[str, Any]:
    """The app's own OpenAPI document: a FastAPI app's (``app.openapi()``); a Starlette
    app's paths and methods, each summarised by its endpoint's docstring."""
    document = getattr(app, "openapi", None)
    if callable(document):
        return cast(dict[str, Any], document())
    from starlette.schemas import SchemaGenerator

    paths: dict[str, dict[str, Any]] = {}
    for endpoint in SchemaGenerator({}).get_endpoints(app.routes):
        doc = (inspect.getdoc(endpoint.func) or "").strip()
        paths.setdefault(endpoint.path, {})[endpoint.http_method] = {
            "summary": doc.splitlines()[0] if doc else endpoint.path,
            "responses": {"200": {"description": "The app's answer."}}}
    return {"paths": paths}


def with_app_paths(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular's last step for ``/langgraph/openapi.json``: the configured app's
    paths (and the schemas they name) added, except those Planwatch serves itself."""
    custom = custom_app()
    if custom is None:
        return result
    try:
        document = app_openapi(custom.app)
    except Exception:  # the app's own document failed: the API's is still served
        logger.exception("the OpenAPI document of http.app %s failed", custom.where)
        return result
    paths = result.setdefault("paths", {})
    for path, item in (document.get("paths") or {}).items():
        if path not in paths and not planwatch_serves(f"{PREFIX}{path}"):
            paths[path] = item
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in ((document.get("components") or {}).get("schemas") or {}).items():
        schemas.setdefault(name, schema)
    return result
