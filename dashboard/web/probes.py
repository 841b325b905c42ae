"""Probes for balancers, orchestrators and Prometheus: ``/healthz``, ``/readyz`` and
``/metrics`` (and, for LangGraph's clients, ``/langgraph/ok`` and ``/langgraph/health``),
answered first.

:func:`probe_middleware` stands first in ``MIDDLEWARE`` and answers these paths itself,
before host validation (a balancer asks by address, not by a name in ``ALLOWED_HOSTS``),
the TLS redirect, sessions, CSRF and sign-in: a probe needs none of them and must stay
cheap. ``/healthz``: the process answers (200, no database). ``/readyz``: the checks of
:mod:`dashboard.health`, 200 when all are up, else 503 naming those that are down.
``/metrics``: :mod:`dashboard.metrics`, to a scraper with its token or from its networks.
"""

from __future__ import annotations

from collections.abc import Callable
from inspect import iscoroutinefunction
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.decorators import sync_and_async_middleware

from dashboard import health, metrics


def healthz(request: HttpRequest) -> HttpResponse:
    """The process is alive: it answers."""
    return JsonResponse({"status": "alive"})


def readyz(request: HttpRequest) -> HttpResponse:
    """200 when this process can serve, else 503 naming what is down."""
    readiness = health.readiness()
    return JsonResponse(readiness.as_json(), status=200 if readiness.ready else 503)


def langgraph_ok(request: HttpRequest) -> HttpResponse:
    """LangGraph's health, ``/langgraph/ok``: ``{"ok": true}`` while the process answers;
    with ``check_db=1`` the readiness checks too, each healthy or not (503 when one is down)."""
    if request.GET.get("check_db", "0") != "1":
        return JsonResponse({"ok": True})
    readiness = health.readiness()
    return JsonResponse({"ok": readiness.ready, "services": {
        check.name: "healthy" if check.ok else "unhealthy" for check in readiness.checks}},
        status=200 if readiness.ready else 503)


def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus's exposition, to a scraper the settings let in (403 otherwise)."""
    if not metrics.scrape_allowed(
            authorization=request.headers.get("Authorization", ""),
            remote_addr=request.META.get("REMOTE_ADDR", ""),
            forwarded=any(name in request.headers for name in metrics.PROXY_HEADERS)):
        return JsonResponse({"detail": (
            f"metrics are not served to {request.META.get('REMOTE_ADDR')!r}: send "
            "'Authorization: Bearer <PLANWATCH_METRICS_TOKEN>' or scrape from an address in "
            "PLANWATCH_METRICS_NETWORKS (by default loopback only; a request a proxy "
            "forwarded needs the token)")}, status=403)
    return HttpResponse(metrics.scrape(), content_type=metrics.CONTENT_TYPE)


VIEWS: dict[str, Callable[[HttpRequest], HttpResponse]] = {
    "/healthz": healthz, "/readyz": readyz, "/metrics": metrics_view,
    # beside LangGraph's server API: its health (LangGraph's /ok) and Aegra's (/health)
    "/langgraph/ok": langgraph_ok, "/langgraph/health": readyz}


def _answer(request: HttpRequest, view: Callable[[HttpRequest], HttpResponse]) -> HttpResponse:
    """The probe's answer (GET or HEAD only), never cached."""
    if request.method not in ("GET", "HEAD"):
        response: HttpResponse = JsonResponse(
            {"detail": f"method {request.method} not allowed on {request.path_info}; use GET"},
            status=405)
        response["Allow"] = "GET, HEAD"
    else:
        response = view(request)
    response["Cache-Control"] = "no-store"
    return response


def _probe(request: HttpRequest) -> Callable[[HttpRequest], HttpResponse] | None:
    return VIEWS.get(request.path_info.rstrip("/") or "/")


@sync_and_async_middleware
def probe_middleware(get_response: Any) -> Any:
    """Answers the probe paths before any other middleware sees the request (sync or
    async like the stack, so other requests take no extra thread hop)."""
    if iscoroutinefunction(get_response):
        async def amiddleware(request: HttpRequest) -> HttpResponse:
            view = _probe(request)
            if view is None:
                return cast(HttpResponse, await get_response(request))
            # off the request thread: a probe must not queue behind the requests it judges
            return await sync_to_async(_answer, thread_sensitive=False)(request, view)

        return amiddleware

    def middleware(request: HttpRequest) -> HttpResponse:
        view = _probe(request)
        if view is None:
            return cast(HttpResponse, get_response(request))
        return _answer(request, view)

    return middleware
