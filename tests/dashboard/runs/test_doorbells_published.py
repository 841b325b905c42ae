"""A write's doorbells on Redis's pub/sub layer: published together, one round trip per
connection, each group's in order, each sender back once its doorbell is out."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from dashboard.runs import doorbells

pytestmark = [pytest.mark.redis, pytest.mark.pg]


@pytest.fixture
def pubsub(settings, redis_url):
    """Redis's pub/sub layer (the scale-out default, several connections) as the doorbells'."""
    from channels.layers import channel_layers

    settings.CHANNEL_LAYERS = {"default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [redis_url] * 4}}}
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


def test_a_writes_doorbells_are_one_round_trip_per_connection_and_all_arrive_in_order(pubsub):
    groups = [doorbells.run_group(uuid.uuid4()) for _ in range(30)]

    async def scenario() -> tuple[dict[str, list[Any]], int]:
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        channels = {}
        for group in groups:
            channels[group] = await layer.new_channel()
            await layer.group_add(group, channels[group])
        direct = 0  # publishes sent one round trip each (group_send's way)
        for shard in layer._get_layer()._shards:
            shard._ensure_redis()
            publish = shard._redis.publish

            async def counted(*args: Any, publish: Any = publish) -> Any:
                nonlocal direct
                direct += 1
                return await publish(*args)

            shard._redis.publish = counted
        try:
            # a write rings every run's group at once, twice (two writes in a row)
            for n in (1, 2):
                await asyncio.gather(*(doorbells.asend(group, {"type": "run.events", "n": n})
                                       for group in groups))
            heard = {group: [(await layer.receive(channels[group]))["n"] for _ in (1, 2)]
                     for group in groups}
        finally:
            await layer.flush()
        return heard, direct

    heard, direct = async_to_sync(scenario)()
    assert heard == {group: [1, 2] for group in groups}
    assert direct == 0  # pipelined: no publish had a round trip of its own
