"""The embedded default's channel layer: in memory, and safe to ring from another loop.

Channels' ``InMemoryChannelLayer`` keeps ``asyncio.Queue`` objects that belong to the
event loop its consumers receive on (daphne's). The in-process executor runs graphs on a
loop of its own, in another thread; a ``put_nowait`` from there sets a waiter's result
without waking daphne's loop, so a watcher would see the event only when something else
woke the server. This layer hands every send from a foreign loop to the loop its
consumers receive on, where Channels' own code then runs unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from channels.layers import InMemoryChannelLayer


class InProcessChannelLayer(InMemoryChannelLayer):  # type: ignore[misc]  # channels is untyped
    """``InMemoryChannelLayer`` whose sends from other threads' loops reach its receivers."""

    def __init__(self, *, capacity: int = 1000, **kwargs: Any) -> None:
        # Channels' default capacity (100) drops messages silently once a slow consumer
        # falls behind; the database stays the truth, but a doorbell should not be lost.
        super().__init__(capacity=capacity, **kwargs)
        self._home: asyncio.AbstractEventLoop | None = None

    async def receive(self, channel: str) -> dict[str, Any]:
        """Receive as Channels does, remembering the loop the receivers live on."""
        self._home = asyncio.get_running_loop()
        message: dict[str, Any] = await super().receive(channel)
        return message

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        """Send on the receivers' loop."""
        await self._on_home(super().send, channel, message)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        """Send to a group on the receivers' loop (its membership is mutated there too)."""
        await self._on_home(super().group_send, group, message)

    async def _on_home(self, method: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None:
        home = self._home
        if home is None or home.is_closed() or not home.is_running() \
                or home is asyncio.get_running_loop():
            await method(*args)
            return
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(method(*args), home))
