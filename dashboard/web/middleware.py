"""The one place crafted input is refused before any view sees it, a dropped database
connection is answered without a 500, and websocket gatekeeping.

HTTP: a NUL character or a lone surrogate in the path, the query string, a form field or
a JSON body, or JSON nested deeper than :data:`MAX_JSON_DEPTH`, is answered with a 400 that
names the problem (JSON under ``/api/`` and ``/langgraph/``), never a 500 from a database
that cannot store it or a parser that runs out of stack.

Websockets: the ``Host`` (and the ``Origin``'s host) must be one of ``ALLOWED_HOSTS``, as
for HTTP requests; the ``Origin`` must match the page's own scheme, host *and port* (or a trusted
origin); a path no route knows is accepted and closed at once with code 4404, so clients
get a reason instead of a server error.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.signals import got_request_exception
from django.db import connections
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.request import split_domain_port, validate_host
from django.template.loader import render_to_string
from django.utils.html import escape

from config.dberrors import connection_lost, database_unreachable
from dashboard.api.exceptions import RETRY_AFTER_SECONDS
from dashboard.checkpoints import check_read_pools

logger = logging.getLogger(__name__)

MAX_JSON_DEPTH = 100
"""The deepest nesting of arrays and objects a JSON body may have."""

CLOSE_NO_ROUTE = 4404
CLOSE_BAD_ORIGIN = 4403
CLOSE_TRY_AGAIN_LATER = 4013
"""The database cannot be reached now: the page's socket reconnects after a pause
(``static/planwatch/app.js``). WebSocket's own 1013 is never sent: autobahn, under daphne,
refuses every close code below 3000 but 1000, so a consumer that closed with 1013 left the
socket open and silent (a run page missed the run's next question after an outage)."""

_BAD = re.compile("[\x00\ud800-\udfff]")
_JSON_PATHS = ("/api/", "/langgraph/")


def problem_in(text: str) -> str:
    """What is wrong with ``text`` ("" if nothing): a NUL or a lone surrogate."""
    found = _BAD.search(text)
    if found is None:
        return ""
    return "a NUL character" if found.group() == "\x00" else "a lone surrogate (not Unicode text)"


def json_depth(text: str) -> int:
    """How deep arrays and objects nest in a JSON text (strings skipped), without recursion."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _strings(value: Any) -> list[tuple[str, str]]:
    """Every string in a decoded JSON value (keys too) with where it is, without recursion."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            found.append((where or "the body", item))
        elif isinstance(item, dict):
            for key, child in item.items():
                found.append((f"{where}.{key}" if where else str(key), str(key)))
                stack.append((f"{where}.{key}" if where else str(key), child))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", child) for i, child in enumerate(item))
    return found


def request_problem(request: HttpRequest) -> str:
    """Why ``request`` is refused ("" if it is not)."""
    if found := problem_in(request.path):
        return f"the address contains {found}; remove it"
    for name, values in request.GET.lists():
        for value in [name, *values]:
            if found := problem_in(value):
                return f"the query parameter {name!r} contains {found}; remove it"
    content_type = request.content_type or ""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        return ""  # too large to read here: the view answers it with its 413
    if request.method in ("POST", "PUT", "PATCH") and content_type == "application/json":
        return _json_problem(request.body)
    if request.method == "POST" and content_type == "application/x-www-form-urlencoded":
        for name, values in request.POST.lists():
            for value in [name, *values]:
                if found := problem_in(value):
                    return f"the form field {name!r} contains {found}; remove it"
    return ""


def _json_problem(body: bytes) -> str:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "the body is not UTF-8 text; send JSON encoded as UTF-8"
    if json_depth(text) > MAX_JSON_DEPTH:
        return f"the JSON body nests deeper than {MAX_JSON_DEPTH} levels; flatten it"
    try:
        value = json.loads(text) if text.strip() else None
    except ValueError:
        return ""  # the parser of the view answers malformed JSON with its own 400
    for where, string in _strings(value):
        if found := problem_in(string):
            return f"{where} contains {found}; remove it"
    return ""


def too_large() -> JsonResponse:
    """The API's 413, naming the limit and the setting."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return JsonResponse({
        "detail": f"the request body is larger than {limit:,} bytes "
                  "(DATA_UPLOAD_MAX_MEMORY_SIZE); send less data",
        "code": "too_large", "errors": {}}, status=413)


class CraftedInputMiddleware:
    """Answer a request carrying crafted characters or nesting with a 400 that says why."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        """Refuse or pass on."""
        try:
            problem = request_problem(request)
        except RequestDataTooBig:  # a body sent with no length (chunked) that is too large
            if request.path.startswith(_JSON_PATHS):
                return too_large()
            raise
        if not problem:
            return self.get_response(request)
        if request.path.startswith(_JSON_PATHS):
            return JsonResponse({"detail": problem, "code": "invalid_characters",
                                 "errors": {}}, status=400)
        return HttpResponse(
            f"<!doctype html><title>Bad request · Planwatch</title><h1>Bad request</h1>"
            f"<p>{escape(problem)}.</p><p><a href=\"/\">Back to Planwatch</a></p>",
            status=400)


SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def drop_broken_connections() -> None:
    """Close this thread's Django connections that failed (back to the pool, which throws a
    broken one away), and have each pool test its idle connections: a server that dropped
    one has usually dropped them all."""
    for conn in connections.all(initialized_only=True):
        conn.close_if_unusable_or_obsolete()
        if pool := getattr(conn, "pool", None):
            pool.check()
    check_read_pools()


@receiver(got_request_exception)
def _note_lost_connection(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    exc = sys.exc_info()[1]
    if request is not None and connection_lost(exc):
        request.planwatch_connection_lost = True  # type: ignore[attr-defined]
    elif request is not None and database_unreachable(exc):
        request.planwatch_database_down = True  # type: ignore[attr-defined]


class LostConnectionMiddleware:
    """A request whose database connection the server dropped under it is answered again,
    once, on a fresh connection when it is safe (GET, HEAD, OPTIONS); any other, and any
    request for which no connection could be had, gets a 503 with ``Retry-After`` that
    says the database could not be reached (it may be sent again), never a 500."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        """Answer; answer again, or with a 503, if the connection was lost."""
        response = self.get_response(request)
        lost = getattr(request, "planwatch_connection_lost", False)
        if not lost and not getattr(request, "planwatch_database_down", False):
            return response
        request.planwatch_connection_lost = False  # type: ignore[attr-defined]
        request.planwatch_database_down = False  # type: ignore[attr-defined]
        drop_broken_connections()
        if lost and request.method in SAFE_METHODS:
            logger.warning("database connection lost under %s %s; answering again",
                           request.method, request.path)
            response = self.get_response(request)
            if not (getattr(request, "planwatch_connection_lost", False)
                    or getattr(request, "planwatch_database_down", False)):
                return response
            drop_broken_connections()
        logger.warning("database unreachable under %s %s; answered 503", request.method,
                       request.path)
        return database_unavailable(request, lost=lost)


def database_unavailable(request: HttpRequest, *, lost: bool = False) -> HttpResponse:
    """The 503 of a request the database could not serve (``lost``: it dropped the
    connection under the request), saying so in words: JSON under the APIs, a line for
    htmx (shown in the form that sent it), else a page that needs no database to render."""
    saved = "" if request.method in SAFE_METHODS else " Nothing was saved."
    what = ("The database connection was lost during this request" if lost
            else "The database cannot be reached")
    detail = (f"{what}, so it could not be served.{saved} Planwatch keeps trying; try "
              f"again in {RETRY_AFTER_SECONDS} seconds.")
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    if request.path.startswith(_JSON_PATHS):
        return JsonResponse({"detail": detail, "code": "database_unavailable",
                             "errors": {}}, status=503, headers=headers)
    if request.headers.get("HX-Request"):
        return HttpResponse(detail, status=503, headers=headers,
                            content_type="text/plain; charset=utf-8")
    return HttpResponse(render_to_string("503.html", {"detail": detail}), status=503,
                        headers=headers)


# -- websockets ----------------------------------------------------------------------------


def _origin_of(url: str) -> tuple[str, str, int] | None:
    parts = urlsplit(url)
    if not parts.scheme or not parts.hostname:
        return None
    default = 443 if parts.scheme in ("https", "wss") else 80
    scheme = {"wss": "https", "ws": "http"}.get(parts.scheme, parts.scheme)
    try:
        port = parts.port or default
    except ValueError:
        return None
    return scheme, parts.hostname.lower(), port


def host_allowed(scope: dict[str, Any]) -> bool:
    """Whether the socket's ``Host`` is one of ``ALLOWED_HOSTS`` (as Django checks a
    request's), and so is its ``Origin``'s host."""
    headers = dict(scope.get("headers") or ())
    host = headers.get(b"host", b"").decode("latin-1")
    allowed = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, allowed):
        return False
    origin = _origin_of(headers.get(b"origin", b"").decode("latin-1"))
    trusted = [_origin_of(o) for o in getattr(settings, "CSRF_TRUSTED_ORIGINS", [])]
    return origin is not None and (origin in trusted or validate_host(origin[1], allowed))


def origin_allowed(scope: dict[str, Any]) -> bool:
    """Whether the socket's ``Origin`` is the page's own (scheme, host, port) or trusted."""
    headers = dict(scope.get("headers") or ())
    origin = headers.get(b"origin", b"").decode("latin-1")
    host = headers.get(b"host", b"").decode("latin-1")
    if not origin or not host:
        return False
    scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
    own = _origin_of(f"{scheme}://{host}")
    theirs = _origin_of(origin)
    if theirs is None:
        return False
    trusted = [_origin_of(o) for o in getattr(settings, "CSRF_TRUSTED_ORIGINS", [])]
    return theirs == own or theirs in trusted


class WebsocketGate:
    """ASGI middleware for websockets: host and origin checked (with its port); unknown
    paths closed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Close sockets to a host not served or from another origin (4403) or to no
        route (4404); pass the rest."""
        if not (host_allowed(scope) and origin_allowed(scope)):
            await self._close(receive, send, CLOSE_BAD_ORIGIN)
            return
        seen = {"connect": False, "accept": False, "close": False}

        async def receiving() -> Any:
            message = await receive()
            seen["connect"] |= message.get("type") == "websocket.connect"
            return message

        async def sending(message: dict[str, Any]) -> None:
            kind = str(message.get("type", "")).removeprefix("websocket.")
            if kind in seen:
                seen[kind] = True
            await send(message)

        try:
            await self.inner(scope, receiving, sending)
        except ValueError as exc:
            if "No route found" not in str(exc):
                raise
            await self._close(receive, send, CLOSE_NO_ROUTE)
        except Exception as exc:
            # the session or the user could not be read (the database cannot be reached):
            # closed "try again later", the page reconnects once it can, without an error
            # in its console for a handshake refused
            if not database_unreachable(exc) or seen["close"]:
                raise
            logger.warning("database unreachable under websocket %s; closing it for the "
                           "page to reconnect", scope.get("path", ""))
            if not seen["connect"]:
                await receive()
            if not seen["accept"]:
                await send({"type": "websocket.accept"})
            await send({"type": "websocket.close", "code": CLOSE_TRY_AGAIN_LATER})
            # held until the client's goodbye, as a consumer is (an application that ended
            # at once left some handshakes to daphne's timeout: a reset in the console)
            while (await receive()).get("type") != "websocket.disconnect":
                pass

    @staticmethod
    async def _close(receive: Any, send: Any, code: int) -> None:
        message = await receive()
        if message.get("type") == "websocket.connect":
            await send({"type": "websocket.accept"})
        await send({"type": "websocket.close", "code": code})
