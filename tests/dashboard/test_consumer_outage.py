"""A socket whose database cannot be reached closes "try again later" with a code daphne
sends (4013), accepted first, so the page connects again and catches up once it can; a
handshake is never left refused (an error in the page's console, not tried again)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.db import OperationalError

from dashboard import services
from dashboard.web import consumers, middleware
from dashboard.web.routing import websocket_urlpatterns
from tests.conftest import wait_run

pytestmark = [pytest.mark.django_db(transaction=True)]

UNREACHABLE = OperationalError("couldn't get a connection after 5.00 sec")


def sent_by_daphne(code: int) -> bool:
    """Whether daphne (autobahn) sends ``code`` at all: 1000, or 3000 to 4999."""
    return code == 1000 or 3000 <= code <= 4999


def test_every_close_code_of_the_sockets_is_one_daphne_sends():
    codes = {name: getattr(module, name) for module in (consumers, middleware)
             for name in dir(module) if name.startswith("CLOSE_")}
    assert codes and all(sent_by_daphne(code) for code in codes.values()), codes
    assert consumers.CLOSE_TRY_AGAIN_LATER == 4013


async def closed_with(app, path: str, user) -> tuple[bool, dict]:
    """Whether the socket was accepted, and the close that followed."""
    comm = WebsocketCommunicator(app, path, headers=[(b"origin", b"http://testserver"),
                                                     (b"host", b"testserver")])
    comm.scope["user"] = user
    accepted, _ = await comm.connect(timeout=5)
    closed = await comm.receive_output(timeout=5)
    await comm.wait(timeout=5)
    return accepted, closed


def raising(*args, **kwargs):
    raise UNREACHABLE


def test_a_run_socket_that_cannot_read_the_run_closes_try_again_later(
        executor, operator, monkeypatch):
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 2}, user=operator).id)
    monkeypatch.setattr(consumers.trace, "trace_fold", raising)
    accepted, closed = async_to_sync(closed_with)(URLRouter(websocket_urlpatterns),
                                                  f"/ws/runs/{run.id}/?after=0", operator)
    assert accepted and closed == {"type": "websocket.close", "code": 4013}


def test_an_inbox_socket_that_cannot_read_closes_try_again_later(operator, monkeypatch):
    monkeypatch.setattr(consumers.inbox, "inbox_update", raising)
    accepted, closed = async_to_sync(closed_with)(URLRouter(websocket_urlpatterns),
                                                  "/ws/inbox/", operator)
    assert accepted and closed == {"type": "websocket.close", "code": 4013}


def test_a_socket_whose_session_cannot_be_read_is_accepted_then_closed_try_again_later(
        operator, monkeypatch):
    from channels import auth

    from config.asgi import application

    async def no_user(scope):
        raise UNREACHABLE

    monkeypatch.setattr(auth, "get_user", no_user)
    comm = WebsocketCommunicator(application, "/ws/inbox/?badge=1", headers=[
        (b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")])

    async def scenario() -> tuple[bool, dict]:
        accepted, _ = await comm.connect(timeout=5)
        closed = await comm.receive_output(timeout=5)
        await comm.disconnect()  # the page's goodbye: the gate waited for it
        return accepted, closed

    accepted, closed = async_to_sync(scenario)()
    assert accepted and closed == {"type": "websocket.close", "code": 4013}


def test_a_handshake_outlasts_the_wait_for_a_database_connection(settings):
    from dashboard.web.serving import handshake_seconds

    # daphne's default (5 s) equals the web's wait: it cut the handshake first
    settings.DB_WAIT_SECONDS = 5.0
    assert handshake_seconds() >= settings.DB_WAIT_SECONDS + 5
