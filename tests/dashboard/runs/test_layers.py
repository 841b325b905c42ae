"""The in-process channel layer: a send from the executor's loop wakes an idle receiver."""

from __future__ import annotations

import asyncio
import threading
import time

from channels.layers import InMemoryChannelLayer

from dashboard.runs.layers import InProcessChannelLayer


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
        # let the receiving loop settle into its idle wait first: a send that lands while
        # it is still between iterations is seen by chance, whatever the layer does
        time.sleep(0.2)
        asyncio.run(layer.group_send("watchers", {"type": "run.events", "events": []}))
        woke.wait(patience)
        gave_up.set()
        loop.call_soon_threadsafe(lambda: None)

    thread = threading.Thread(target=executor_thread)
    thread.start()
    await receiving
    await asyncio.to_thread(thread.join)
    return woke.is_set()


def on_idle_loop(layer: InMemoryChannelLayer, *, patience: float) -> bool:
    """``woke_while_idle`` on a fresh loop of its own thread: nothing else can wake it.

    (The test runner's loop may hold other sockets or timers from earlier tests, which
    would wake the receiver by chance and hide what the layer does.)
    """
    result: list[bool] = []
    thread = threading.Thread(
        target=lambda: result.append(asyncio.run(woke_while_idle(layer, patience=patience))))
    thread.start()
    thread.join(patience + 30)
    return result[0]


def test_send_from_another_loop_wakes_an_idle_receiver():
    assert on_idle_loop(InProcessChannelLayer(), patience=10)


def test_channels_in_memory_layer_leaves_it_asleep():
    """Why the in-process layer exists: with Channels' own, the watcher would wait."""
    assert not on_idle_loop(InMemoryChannelLayer(), patience=1)
