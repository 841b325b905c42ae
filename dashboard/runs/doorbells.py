"""Doorbells on the channel layer: a group per run and one for the runs list.

Events are written to the database first; a broadcast only tells watchers there is
something new (and carries it, to save them a query). A lost message costs nothing: the
consumer notices the gap in ``seq`` and reads the database.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable, Hashable
from datetime import datetime
from typing import Any
from uuid import UUID

from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.conf import settings

from dashboard.runs import jsonsafe

logger = logging.getLogger("planwatch.broadcast")

RUNS_GROUP = "runs"
INBOX_GROUP = "inbox"


# What a doorbell says of a run: enough for the runs list and a trace's header to redraw
# without reading the run again.
ROLLUP_FIELDS = ("model_calls", "input_tokens", "output_tokens", "total_tokens", "cost_usd")
OUTCOME_FIELDS = ("outcome", "outcome_reason")
SUMMARY_FIELDS = ("id", "graph", "status", "current_node", "last_seq", "started_at",
                  "finished_at", "error_message", *OUTCOME_FIELDS, *ROLLUP_FIELDS)


def run_summary(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` (the :data:`SUMMARY_FIELDS` of a run) as a doorbell carries them."""
    # the model rollups ride along once the run made a model call (the header shows them)
    calls = bool(values.get("model_calls"))
    # and its outcome once it ended (dashboard.runs.outcome)
    ended = bool(values.get("outcome"))
    summary = {name: values[name] for name in SUMMARY_FIELDS
               if (calls or name not in ROLLUP_FIELDS) and (ended or name not in OUTCOME_FIELDS)}
    summary["id"] = str(summary["id"])
    for name in ("started_at", "finished_at"):
        if isinstance(summary[name], datetime):
            summary[name] = summary[name].isoformat()
    return summary


def run_group(run_id: UUID | str) -> str:
    """The group of one run's watchers (only ``[a-z0-9-.]``, as Channels requires)."""
    return f"run.{run_id}"


def events_message(run_id: UUID | str, events: list[dict[str, Any]], *,
                   run: dict[str, Any] | None = None,
                   committed_at: float | None = None) -> dict[str, Any]:
    """The doorbell for newly committed ``events`` (``event_dict`` form, in seq order).

    The events travel as one JSON text: a process's watchers each decode only the small
    message around it, and the events are decoded once for all of them
    (:func:`doorbell_events`). ``committed_at`` is when the write that committed them
    returned (Unix time, the writer's clock): what "committed → received" is measured from.
    """
    return {"type": "run.events", "run_id": str(run_id), "first": events[0]["seq"],
            "last": events[-1]["seq"], "events": jsonsafe.dumps(events), "run": run,
            "committed_at": committed_at}


async def abroadcast_events(run_id: UUID | str, events: list[dict[str, Any]], *,
                            run: dict[str, Any] | None = None,
                            committed_at: float | None = None) -> None:
    """Tell a run's watchers about newly committed events (and the run, if it changed)."""
    await asend(run_group(run_id),
                 events_message(run_id, events, run=run, committed_at=committed_at))


DECODED_DOORBELLS = 512  # doorbell and token messages whose items this process keeps decoded
_decoded: dict[Hashable, list[dict[str, Any]]] = {}


def decoded_once(key: Hashable, text: str) -> list[dict[str, Any]]:
    """``text`` (a message's JSON list) decoded once per process for every socket and
    stream that receives the message (shared: do not change the items)."""
    items = _decoded.get(key)
    if items is None:
        items = _decoded[key] = jsonsafe.loads(text)
        while len(_decoded) > DECODED_DOORBELLS:
            _decoded.pop(next(iter(_decoded)))
    return items


def doorbell_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The events of a doorbell, decoded once per process (shared: do not change them)."""
    return decoded_once((message["run_id"], message["first"], message["last"]),
                        message["events"])


async def abroadcast_run(summary: dict[str, Any], *, watchers: bool = True) -> None:
    """Tell the runs list (and, unless told with its events, the run's page) of a change."""
    await asend(RUNS_GROUP, {"type": "run.changed", "run": summary})
    if watchers:
        await asend(run_group(summary["id"]), {"type": "run.changed", "run": summary})


class RunsDigest:
    """Node moves of many runs, told to the runs list together, at most once an ``interval``.

    A run moves to its next node many times a second; told one by one, a worker with a
    hundred runs would queue hundreds of messages a second on the one runs-list group
    (channels-redis publishes a process's messages one at a time). Status changes are
    not digested: they go out at once, and take the run's pending move with them.
    """

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        self.pending: dict[str, dict[str, Any]] = {}
        self._flush: asyncio.Task[None] | None = None

    def note(self, summary: dict[str, Any]) -> None:
        """Remember a run's latest move; the next digest tells it (call on the loop)."""
        self.pending[summary["id"]] = summary
        if self._flush is None or self._flush.done():
            self._flush = asyncio.get_running_loop().create_task(self._aflush_later())

    def forget(self, run_id: str) -> None:
        """Drop a run's pending move (a newer summary of it is being sent right now)."""
        self.pending.pop(run_id, None)

    async def _aflush_later(self) -> None:
        await asyncio.sleep(self.interval)
        await self.aflush()

    async def aflush(self) -> None:
        """Tell the runs list of every pending move now, in one message."""
        if self._flush is not None and self._flush is not asyncio.current_task():
            self._flush.cancel()  # this flush takes its moves
        runs, self.pending = list(self.pending.values()), {}
        if runs:
            await asend(RUNS_GROUP, {"type": "runs.moved", "runs": runs})


class RunBell:
    """What one run's watchers and the runs list were last told of it; after each committed
    write of the run, :meth:`aring` tells them what is new."""

    def __init__(self, run_id: UUID, *, status: str, node: str,
                 digest: RunsDigest | None = None, rung: int = 0) -> None:
        self.run_id = run_id
        self.digest = digest
        self._told: tuple[str, str] = (status, node)
        self.rung = rung
        """The last seq its watchers were told of (those before ``rung`` were committed)."""
        self.on_rung: Callable[[], None] | None = None
        """Called once they were told of more (the chunks of model answers that waited
        for those events go then: :class:`~dashboard.runs.tokens.TokenBell`)."""

    async def aring(self, events: list[dict[str, Any]], values: dict[str, Any],
                    committed_at: float) -> None:
        """Ring for a committed write: its ``events`` (``event_dict`` form) and the run's
        ``values`` as written; the run itself only if its status or node moved."""
        summary = run_summary(values)
        key = (summary["status"], summary["current_node"])
        moved, new_status = key != self._told, key[0] != self._told[0]
        self._told = key
        if events:  # one message to the run's watchers: the events and, if it moved, the run
            await abroadcast_events(self.run_id, events, run=summary if moved else None,
                                    committed_at=committed_at)
            self.rung = max(self.rung, events[-1]["seq"])
            if self.on_rung is not None:
                self.on_rung()
        if moved and events and not new_status and self.digest is not None:
            self.digest.note(summary)  # the runs list hears of node moves together
        elif moved:
            if self.digest is not None:
                self.digest.forget(summary["id"])
            await abroadcast_run(summary, watchers=not events)


async def abroadcast_inbox() -> None:
    """Tell inbox watchers that the set of pending interrupts changed."""
    await asend(INBOX_GROUP, {"type": "inbox.changed"})


DOORBELLS = "doorbells"  # the layer alias to publish on, where configured (see settings)


async def asend(group: str, message: dict[str, Any]) -> None:
    """Send ``message`` to ``group`` on the doorbells' layer (a failure is logged); on
    Redis's pub/sub layer, together with the doorbells sent meanwhile (:class:`Publisher`)."""
    layer = get_channel_layer(DOORBELLS if DOORBELLS in settings.CHANNEL_LAYERS
                              else DEFAULT_CHANNEL_LAYER)
    if layer is None:
        return
    try:
        if isinstance(layer, RedisPubSubChannelLayer):
            await Publisher.of(layer).asend(group, message)
        else:
            await layer.group_send(group, message)
    except Exception:  # the database holds the truth; a doorbell may fail
        logger.warning("broadcast to %s failed", group, exc_info=True)


class Publisher:
    """The doorbells sent on one event loop while a send is under way, published together:
    one pipelined round trip per Redis connection of channels-redis's pub/sub layer.

    A write of a hundred runs rings a hundred groups; one ``group_send`` each was a round
    trip each, one at a time behind its connection's lock (about 0.09 ms of CPU a publish,
    against 0.02 pipelined). A group always hashes to one connection and a batch is sent
    after the one before it, so one group's doorbells keep their order; each sender waits
    until its doorbell was published, as ``group_send`` made it wait.
    """

    _ON: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Publisher] = (
        weakref.WeakKeyDictionary())

    def __init__(self, layer: RedisPubSubChannelLayer) -> None:
        self.layer = layer
        self.waiting: list[tuple[str, dict[str, Any], asyncio.Future[None]]] = []
        self.sender: asyncio.Task[None] | None = None

    @classmethod
    def of(cls, layer: RedisPubSubChannelLayer) -> Publisher:
        """The running loop's publisher on ``layer``."""
        loop = asyncio.get_running_loop()
        publisher = cls._ON.get(loop)
        if publisher is None or publisher.layer is not layer:
            publisher = cls._ON[loop] = cls(layer)
        return publisher

    async def asend(self, group: str, message: dict[str, Any]) -> None:
        """Publish ``message`` to ``group`` with the next batch; return once it was."""
        published = asyncio.get_running_loop().create_future()
        # retrieved here too, so a sender cancelled meanwhile leaves no unread failure
        published.add_done_callback(lambda done: done.cancelled() or done.exception())
        self.waiting.append((group, message, published))
        if self.sender is None or self.sender.done():
            self.sender = asyncio.ensure_future(self._asend_waiting())
        await asyncio.shield(published)  # a sender cancelled leaves the batch be

    async def _asend_waiting(self) -> None:
        while self.waiting:
            batch, self.waiting = self.waiting, []
            try:
                await self._apublish([(group, message) for group, message, _ in batch])
            except Exception as exc:  # each sender logs it
                for *_, published in batch:
                    if not published.done():
                        published.set_exception(exc)
                continue
            for *_, published in batch:
                if not published.done():
                    published.set_result(None)

    async def _apublish(self, messages: list[tuple[str, dict[str, Any]]]) -> None:
        """``messages`` as ``group_send`` publishes them, a pipeline per connection (its
        lock held, as ``group_send`` holds it); one ``group_send`` each, in order, should
        channels-redis's internals no longer be the ones this knows."""
        shards: dict[Any, list[tuple[str, bytes]]] = {}
        try:
            layer = self.layer._get_layer()
            for group, message in messages:
                channel = layer._get_group_channel_name(group)
                shard = layer._get_shard(channel)
                if not all(hasattr(shard, name) for name in ("_lock", "_ensure_redis",
                                                             "_redis")):
                    raise AttributeError(f"{type(shard).__name__} has no pipeline's parts")
                shards.setdefault(shard, []).append(
                    (channel, layer.channel_layer.serialize(message)))
        except AttributeError:
            logger.debug("doorbells sent one by one", exc_info=True)
            for group, message in messages:
                await self.layer.group_send(group, message)
            return

        async def apipelined(shard: Any, items: list[tuple[str, bytes]]) -> None:
            async with shard._lock:
                shard._ensure_redis()
                pipe = shard._redis.pipeline(transaction=False)
                for channel, data in items:
                    pipe.publish(channel, data)
                await pipe.execute()

        await asyncio.gather(*(apipelined(shard, items) for shard, items in shards.items()))
