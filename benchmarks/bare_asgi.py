"""The bare path the event latency is compared with: producer → Redis → daphne → client.

A websocket consumer that joins the group named in its URL and forwards every message's
text as it is: no database, no templates, no authentication. Served by the same daphne
with the same channel layer as Planwatch (``daphne benchmarks.bare_asgi:application``).
"""

from __future__ import annotations

import os
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from channels.consumer import get_handler_name  # noqa: E402
from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402


class BareConsumer(AsyncWebsocketConsumer):
    """Joins ``bare.<n>`` and forwards what the producer sends."""

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Call the handler directly, as Planwatch's consumers do.

        Channels' own dispatch first hops to the database thread
        (``aclose_old_connections``) for every message; a bare path that touches no
        database has no reason to pay for it, and the floor should not include it.
        """
        await getattr(self, get_handler_name(message))(message)

    async def connect(self) -> None:
        """Join the group of the URL."""
        self.group = f"bare.{self.scope['url_route']['kwargs']['n']}"
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        """Leave the group."""
        await self.channel_layer.group_discard(self.group, self.channel_name)

    async def bare_msg(self, message: dict[str, Any]) -> None:
        """Forward the producer's text."""
        await self.send(text_data=message["text"])


application = ProtocolTypeRouter({
    "websocket": URLRouter([path("bare/<int:n>/", BareConsumer.as_asgi())]),
})
