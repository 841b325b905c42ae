"""Websocket consumers: the runs list and one run's live trace."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.template.loader import render_to_string

from dashboard import broadcast, inbox, selectors

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


@database_sync_to_async
def _ainbox_update(user: Any, graph: str, known: inbox.PendingState | None
                   ) -> tuple[str, inbox.PendingState]:
    return inbox.inbox_update(user=user, graph=graph, known=known)


@database_sync_to_async
def _abadge() -> str:
    return inbox.badge(count=selectors.interrupts_pending_count())


class InboxConsumer(AsyncWebsocketConsumer):
    """Keeps the inbox page (or, with ``?badge``, the navigation count) current."""

    async def connect(self) -> None:
        """Refuse anonymous users; join the inbox group and bring the page up to date."""
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        self.badge_only = "badge" in query
        self.graph = (query.get("graph") or [""])[0][:100]
        self.known: inbox.PendingState | None = None
        await self.channel_layer.group_add(broadcast.INBOX_GROUP, self.channel_name)
        await self.accept()
        await self.inbox_changed({})

    async def disconnect(self, code: int) -> None:
        """Leave the inbox group."""
        await self.channel_layer.group_discard(broadcast.INBOX_GROUP, self.channel_name)

    async def inbox_changed(self, message: dict[str, Any]) -> None:
        """Send the badge, or the inbox rows and the runs whose questions changed."""
        if self.badge_only:
            await self.send(text_data=await _abadge())
            return
        html, self.known = await _ainbox_update(self.scope["user"], self.graph, self.known)
        await self.send(text_data=html)
