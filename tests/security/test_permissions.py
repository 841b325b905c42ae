"""The permission matrix: every URL and websocket route, for anonymous, viewer, operator
and staff, enumerated from the routers so a new route cannot be left out.

Anonymous users reach only the sign-in page (pages redirect there, the API answers 401,
sockets close 4401); signed-in users may read every page; writes need their permission
(a viewer gets 403); the admin is staff-only. Never a 5xx.
"""

from __future__ import annotations

import re
import uuid

import pytest
from channels.testing import WebsocketCommunicator
from django.urls import URLPattern, URLResolver, get_resolver

from dashboard import crons, services
from dashboard.models import RunEvent
from dashboard.web.routing import websocket_urlpatterns
from tests.conftest import wait_run

PUBLIC = {"accounts/login/", "accounts/logout/", "favicon.ico"}
WRITES = {"runs/new/": "start_run", "runs/<uuid:run_id>/cancel/": "cancel_run",
          "runs/<uuid:run_id>/budget/": "cancel_run",
          "runs/<uuid:run_id>/breakpoints/": "debug_run",
          "runs/<uuid:run_id>/continue/": "debug_run", "runs/<uuid:run_id>/fork/": "fork_run",
          "runs/<uuid:run_id>/interrupts/": "answer_interrupt",
          "inbox/answer/": "answer_interrupt",
          "langgraph/threads": "start_run",
          "langgraph/threads/<str:thread_id>/runs/<str:run_id>/cancel": "cancel_run"}

pytestmark = pytest.mark.reliability


def routes(patterns=None, prefix: str = "") -> list[str]:
    """Every URL pattern of the project as text, nested includes flattened."""
    found: list[str] = []
    for item in patterns if patterns is not None else get_resolver().url_patterns:
        text = prefix + str(item.pattern)
        if isinstance(item, URLResolver):
            if text.startswith("admin/"):
                found.append("admin/")  # Django's own; checked as one route
                continue
            found.extend(routes(item.url_patterns, text))
        elif isinstance(item, URLPattern):
            found.append(text)
    return sorted(set(found))


def concrete(route: str, ids: dict[str, str]) -> str | None:
    """A URL for ``route`` with real ids (None for patterns this matrix cannot fill)."""
    if route.startswith("^") or "(?P<format>" in route or "\\." in route:
        return None  # DRF's format-suffix twins and regex routes: covered by their plain form
    url = route
    for name, value in ids.items():
        url = re.sub(rf"<(?:\w+:)?{name}>", value, url)
        url = re.sub(rf"\(\?P<{name}>[^)]*\)", value, url)
    url = url.replace("^", "").replace("$", "")
    return None if "<" in url or "(" in url else "/" + url


@pytest.fixture
def world(executor, operator):
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 2, "ask": True},
                                       user=operator).id)
    checkpoint = run.events.filter(kind=RunEvent.Kind.CHECKPOINT).first()
    cron = crons.cron_create(assistant_id="test.echo", schedule="0 3 * * *", user=operator,
                             thread=None, payload={"input": {"steps": 1}}, enabled=False)
    ids = {"cron_id": str(cron.pk),
           "run_id": str(run.id), "pk": str(run.id), "id": str(run.id),
           "other_id": str(run.id), "seq": "1", "checkpoint_id": checkpoint.checkpoint_id,
           "graph": "test.echo", "thread_id": str(run.conversation_id),
           "assistant_id": "test.echo", "namespace": "child"}
    return run, ids


def test_every_route_for_every_kind_of_user(world, client, django_user_model, viewer, operator):
    _run, ids = world
    staff = django_user_model.objects.create_superuser("root", password="pw-root-12345")
    checked = 0
    for route in routes():
        url = concrete(route, ids)
        if url is None or route in PUBLIC:
            continue
        checked += 1
        client.logout()
        anonymous = client.get(url)
        anonymous.close()
        # the API answers 401; its two HTML docs pages send browsers to sign in like pages
        api = url.startswith(("/api/", "/langgraph/")) and not url.startswith(
            ("/api/docs/", "/api/redoc/"))
        assert anonymous.status_code in ((401, 404) if api else (302,)), (url, anonymous)
        if not api:
            assert "/login/" in anonymous["Location"], url  # the site's or the admin's
        for user in (viewer, operator, staff):
            client.force_login(user)
            read = client.get(url)
            read.close()  # as the server does: a stream never read gives its slot back
            assert read.status_code < 500, (url, user, read.status_code)
            if url.startswith("/admin/"):
                assert (read.status_code == 200) == user.is_staff, (url, user, read.status_code)
            perm = WRITES.get(route)
            if perm:
                wrote = client.post(url, {})
                wrote.close()
                assert wrote.status_code < 500, (url, user, wrote.status_code)
                allowed = user.has_perm(f"dashboard.{perm}")
                assert (wrote.status_code == 403) == (not allowed) or wrote.status_code in (
                    400, 404, 405, 409, 422), (url, user, wrote.status_code)
    assert checked >= 20  # the matrix really walked the routers
    langgraph = [r for r in routes() if r.startswith("langgraph/") and not r.startswith(
        "langgraph/^")]
    assert langgraph and all(concrete(r, ids) for r in langgraph), [
        r for r in langgraph if not concrete(r, ids)]  # every /langgraph/ route, real ids


@pytest.mark.django_db(transaction=True)
async def test_every_websocket_route_refuses_anonymous_users():
    from channels.auth import AuthMiddlewareStack

    from config.asgi import application

    assert application  # the same stack the server runs
    for route in websocket_urlpatterns:
        path = "/" + str(route.pattern).replace("<uuid:run_id>", str(uuid.uuid4()))
        communicator = WebsocketCommunicator(
            AuthMiddlewareStack(route.callback), path)
        communicator.scope["url_route"] = {"kwargs": {"run_id": uuid.UUID(int=1)}}
        connected, code = await communicator.connect()
        if connected:
            message = await communicator.receive_output(2)
            code = message.get("code")
        assert code == 4401, (path, code)
        await communicator.disconnect()
