"""The in-process channel layer: a send from the executor's loop wakes an idle receiver."""

from __future__ import annotations

import asyncio
import threading

from channels.layers import InMemoryChannelLayer

from dashboard.layers import InProcessChannelLayer


async def woke_while_idle(layer: InMemoryChannelLayer, *, patience: float) -> bool:
    """Send from another thread's loop while this loop sleeps; did the receiver wake?

    The sending thread waits up to ``patience`` seconds for the receiver, then wakes this
    loop itself; a message that only arrives after that does not count.
    """
    channel = await layer.new_channel()
    await layer.group_add("watchers", channel)
    woke, gave_up = threading.Event(), threading.Event()
    loop = asyncio.get_running_loop()

    async def receive() -> None:
        await layer.receive(channel)
        if not gave_up.is_set():
            woke.set()

    receiving = asyncio.create_task(receive())
    await asyncio.sleep(0)  # the receiver now waits on this (otherwise idle) loop

    def executor_thread() -> None:
        asyncio.run(layer.group_send("watchers", {"type": "run.events", "events": []}))
        woke.wait(patience)
        gave_up.set()
        loop.call_soon_threadsafe(lambda: None)

    thread = threading.Thread(target=executor_thread)
    thread.start()
    await receiving
    await asyncio.to_thread(thread.join)
    return woke.is_set()


async def test_send_from_another_loop_wakes_an_idle_receiver():
    assert await woke_while_idle(InProcessChannelLayer(), patience=10)


async def test_channels_in_memory_layer_leaves_it_asleep():
    """Why the in-process layer exists: with Channels' own, the watcher would wait."""
    assert not await woke_while_idle(InMemoryChannelLayer(), patience=1)
