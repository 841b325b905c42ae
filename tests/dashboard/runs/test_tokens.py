"""A run's token bell: chunks of model answers go on the run's doorbell group after the
events that came before them, several in one message when they come faster than it is
sent (the in-process layer here; the Redis layer in tests/lgserver/test_stream_tokens.py)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from dashboard.runs import tokens
from dashboard.runs.doorbells import RunBell, run_group
from dashboard.runs.tokens import TOKENS, TokenBell, doorbell_tokens


def item(index: int) -> dict[str, Any]:
    return {"id": "m1", "i": index, "ns": "", "chunk": {"content": f"piece {index}"}}


def values(run_id: uuid.UUID, last_seq: int) -> dict[str, Any]:
    """A run's values as a write returns them (what a doorbell tells of it)."""
    return {"id": run_id, "graph": "talk", "status": "running", "current_node": "talk",
            "last_seq": last_seq, "started_at": None, "finished_at": None,
            "error_message": ""}


def heard(run_id: uuid.UUID, scenario, *, listens: bool = True) -> list[dict[str, Any]]:
    """What a watcher of the run's group heard while ``scenario(bell, tokens)`` ran (one
    that ``listens`` for chunks marked so, as a follower streaming them does)."""
    layer = get_channel_layer()

    async def watch() -> list[dict[str, Any]]:
        channel = await layer.new_channel("test.tokens.")
        await layer.group_add(run_group(run_id), channel)
        if listens:
            await tokens.alisten(run_id)
        bell = RunBell(run_id, status="running", node="talk", rung=3)
        await scenario(bell, TokenBell(run_id, bell))
        messages = []
        while True:
            try:
                messages.append(await asyncio.wait_for(layer.receive(channel), 0.3))
            except TimeoutError:
                return messages

    return async_to_sync(watch)()


def test_a_chunk_waits_for_the_events_before_it_then_follows_them():
    run_id = uuid.uuid4()

    async def scenario(bell: RunBell, tokens: TokenBell) -> None:
        tokens.add(item(0), after=4)  # the call's start (seq 4) is not written yet
        await asyncio.sleep(0.1)
        assert tokens.pending  # held
        event = {"seq": 4, "kind": "model_started"}
        await bell.aring([event], values(run_id, 4), time.time())

    messages = heard(run_id, scenario)
    assert [m["type"] for m in messages] == ["run.events", TOKENS]
    assert doorbell_tokens(messages[1]) == [item(0)]


def test_chunks_that_come_while_one_is_sent_go_together_in_order():
    run_id = uuid.uuid4()

    async def scenario(bell: RunBell, tokens: TokenBell) -> None:
        for index in range(3):  # in one turn of the loop: before the first send starts
            tokens.add(item(index), after=3)
        await asyncio.sleep(0.1)
        tokens.add(item(3), after=3)

    messages = heard(run_id, scenario)
    assert [[i["i"] for i in doorbell_tokens(m)] for m in messages] == [[0, 1, 2], [3]]


def test_no_chunk_is_sent_while_nobody_streams_them(monkeypatch):
    """A run whose client left (or never asked) sends its events' doorbells, no chunks
    (past its first second, which waits for a client a moment behind its run)."""
    monkeypatch.setattr(tokens, "REFRESH_SECONDS", 0.0)
    run_id = uuid.uuid4()

    async def scenario(bell: RunBell, bell_tokens: TokenBell) -> None:
        for index in range(3):
            bell_tokens.add(item(index), after=3)
            await asyncio.sleep(0.05)
        await bell.aring([{"seq": 4, "kind": "node_finished"}], values(run_id, 4), time.time())

    messages = heard(run_id, scenario, listens=False)
    assert [m["type"] for m in messages] == ["run.events"]


def test_chunks_stop_once_the_listeners_mark_lapses(settings, monkeypatch):
    """A follower that stops refreshing its mark (its client left) stops the chunks."""
    monkeypatch.setattr(tokens, "LISTEN_SECONDS", 0.2)
    monkeypatch.setattr(tokens, "REFRESH_SECONDS", 0.05)
    run_id = uuid.uuid4()

    async def scenario(bell: RunBell, bell_tokens: TokenBell) -> None:
        bell_tokens.add(item(0), after=3)  # heard: the mark stands
        await asyncio.sleep(0.4)  # the mark lapses
        bell_tokens.add(item(1), after=3)

    messages = heard(run_id, scenario)
    assert [[i["i"] for i in doorbell_tokens(m)] for m in messages] == [[0]]


@pytest.mark.redis
def test_the_mark_is_a_redis_key_every_process_sees_until_it_lapses(settings, monkeypatch):
    """With Redis the mark is a key (a worker's bell sees a web process's follower)."""
    import os

    settings.REDIS_URL = os.environ.get("REDIS_TEST_URL", "redis://127.0.0.1:6379/3")
    monkeypatch.setattr(tokens, "LISTEN_SECONDS", 1.0)
    run_id = uuid.uuid4()

    async def scenario() -> list[bool]:
        seen = [await tokens.alistened(run_id)]
        await tokens.alisten(run_id)
        seen.append(await tokens.alistened(run_id))
        await asyncio.sleep(1.3)
        seen.append(await tokens.alistened(run_id))
        return seen

    assert async_to_sync(scenario)() == [False, True, False]
