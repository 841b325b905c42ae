"""Sockets follow the session: sign-out, deactivation, a new password or lost rights close
that user's open websockets within a second (code 4401)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Permission
from django.contrib.auth.signals import user_logged_out
from django.test import RequestFactory

from dashboard.web.consumers import RunsConsumer

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True), pytest.mark.reliability]


async def _open(user, session_key="s3ss10n"):
    communicator = WebsocketCommunicator(RunsConsumer.as_asgi(), "/ws/runs/")
    communicator.scope["user"] = user
    communicator.scope["session"] = SimpleNamespace(session_key=session_key)
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def _closed_with(communicator, code=4401):
    while True:  # skip frames the page gets meanwhile; the close must come within a second
        message = await communicator.receive_output(1)
        if message["type"] == "websocket.close":
            assert message.get("code") == code
            return


async def _stays_open(communicator, seconds=0.5):
    """No close within ``seconds`` (frames the page gets meanwhile, such as another run's
    move on the runs list, are not the question)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while (left := deadline - loop.time()) > 0:
        if await communicator.receive_nothing(left):
            return True
        message = await communicator.receive_output()
        assert message["type"] != "websocket.close", message
    return True


@pytest.fixture
def olga(django_user_model):
    user = django_user_model.objects.create_user("olga3", password="pw-olga-12345")
    user.user_permissions.set(Permission.objects.filter(codename="start_run"))
    return user


async def test_signing_out_closes_that_sessions_sockets(olga):
    mine = await _open(olga, "one")
    other = await _open(olga, "two")
    request = RequestFactory().get("/accounts/logout/")
    request.session = SimpleNamespace(session_key="one")
    await database_sync_to_async(user_logged_out.send)(sender=type(olga), request=request,
                                                       user=olga)
    await _closed_with(mine)
    assert await _stays_open(other, 0.3)  # another browser of the same user stays
    await other.disconnect()


@pytest.mark.parametrize("change", ["deactivate", "password", "permission"])
async def test_losing_the_account_or_rights_closes_every_socket(olga, change):
    socket = await _open(olga)

    def apply() -> None:
        if change == "deactivate":
            olga.is_active = False
            olga.save()
        elif change == "password":
            olga.set_password("a-new-pw-98765")
            olga.save()
        else:
            olga.user_permissions.remove(Permission.objects.get(codename="start_run"))

    await database_sync_to_async(apply)()
    await _closed_with(socket)


async def test_saving_a_user_without_changing_credentials_keeps_the_socket(olga):
    socket = await _open(olga)

    def touch() -> None:
        olga.first_name = "Olga"
        olga.save()

    await database_sync_to_async(touch)()
    assert await _stays_open(socket, 0.5)
    await socket.disconnect()
