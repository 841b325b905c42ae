"""Websocket consumers: the runs list and one run's live trace."""

from __future__ import annotations

from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer
from django.template.loader import render_to_string

from dashboard import broadcast

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403


class RunsConsumer(AsyncWebsocketConsumer):
    """Streams status changes of every run to the runs list."""

    async def connect(self) -> None:
        """Refuse anonymous users; join the runs group."""
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        await self.channel_layer.group_add(broadcast.RUNS_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        """Leave the runs group."""
        await self.channel_layer.group_discard(broadcast.RUNS_GROUP, self.channel_name)

    async def run_changed(self, message: dict[str, Any]) -> None:
        """Send the changed run's status cell as an out-of-band swap."""
        html = render_to_string("dashboard/_run_status_oob.html", {"run": message["run"]})
        await self.send(text_data=html)
