"""A run's model tokens, told to its watchers as they come and never written.

LangGraph's server streams a chat model's answer chunk by chunk in the ``messages`` and
``messages-tuple`` stream modes of a run whose request asked for them. Here the run's
model-call recorder (:mod:`~dashboard.runs.modelcalls`) hands each chunk of such a run to
its :class:`TokenBell`, which sends it on the run's doorbell group: the channel layer the
doorbells take (in memory in-process, Redis pub/sub from a worker process), so a stream
that follows the run gets the chunks in order with its events' doorbells.

Chunks are sent only while someone listens: a follower that streams them
(:func:`dashboard.runs.follow.follow` with ``tokens``) marks the run listened to
(:func:`alisten`, a mark of :data:`LISTEN_SECONDS` it refreshes every second: a key in Redis
when the doorbells go through Redis, else this process's table), and a bell sends nothing
while no mark stands (a run whose client left published every chunk to Redis).

A chunk is not an event: no row, no seq. A stream that joins later, resumes after a
``Last-Event-ID`` or replays a run that ended gets each message whole instead, from the
update of the node that returned it (``dashboard.lgserver.stream``).

One chunk is one item: the message's ``id``, its index ``i`` among the call's chunks, the
namespace ``ns`` of the graph that called the model, the ``chunk`` (LangChain's message
JSON) and, with the first only, the call's ``meta`` (LangGraph's metadata of the call), its
``call`` id (LangChain's run id) and ``hidden`` if it is tagged ``nostream`` (its chunks go
to ``events`` streams only). When
the call ends with a message whose id is not the one its chunks had (a provider's id
arriving late), one more item says so: ``{"id": …, "final": …}``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
import weakref
from typing import Any
from uuid import UUID

from django.conf import settings

from dashboard.runs import jsonsafe
from dashboard.runs.doorbells import RunBell, asend, decoded_once, run_group

logger = logging.getLogger("planwatch.runs")

LISTEN_SECONDS = 5.0
"""How long a listener's mark stands unless its follower refreshes it (every second):
a run whose client left stops sending chunks this long after."""

REFRESH_SECONDS = 1.0
"""How often a follower refreshes its mark, and how long a bell trusts a mark it saw."""

RECHECK_SECONDS = 0.1
"""How long a bell trusts having seen no mark (a client that just came misses no more)."""

_marks: dict[str, float] = {}
"""Without Redis (one process executes and serves): run id -> when its mark lapses."""

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
    weakref.WeakKeyDictionary())
"""One Redis client per event loop (the executor's loop and the server's differ)."""


def _redis() -> Any:
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        import redis.asyncio as aredis

        client = _clients[loop] = aredis.Redis.from_url(
            settings.REDIS_URL, socket_timeout=2.0, socket_connect_timeout=2.0)
    return client


async def aclose_client() -> None:
    """Close this event loop's Redis client, if it made one (a loop that ends)."""
    client = _clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()


def _key(run_id: UUID | str) -> str:
    return f"planwatch:tokens-listened:{run_id}"


async def alisten(run_id: UUID | str) -> None:
    """Mark that a client streams ``run_id``'s chunks, for :data:`LISTEN_SECONDS`."""
    if not getattr(settings, "REDIS_URL", ""):
        now = time.monotonic()
        if len(_marks) > 1000:  # lapsed marks go (a process follows many runs in a day)
            for lapsed in [k for k, until in _marks.items() if until < now]:
                _marks.pop(lapsed, None)
        _marks[str(run_id)] = now + LISTEN_SECONDS
        return
    try:
        await _redis().set(_key(run_id), 1, px=max(1, round(LISTEN_SECONDS * 1000)))
    except Exception:  # Redis away: the doorbells are too; the stream reads the log
        logger.warning("marking run %s's tokens listened failed", run_id, exc_info=True)


async def alistened(run_id: UUID | str) -> bool:
    """Whether a client streams ``run_id``'s chunks now (a mark stands)."""
    if not getattr(settings, "REDIS_URL", ""):
        until = _marks.get(str(run_id))
        if until is not None and until < time.monotonic():
            _marks.pop(str(run_id), None)
            return False
        return until is not None
    try:
        return bool(await _redis().exists(_key(run_id)))
    except Exception:  # unknown: send, as before marks (the layer may fail the send too)
        return True

TOKENS = "run.tokens"
"""The type of a doorbell message carrying chunks (followers that want none skip it)."""

_SENDING: set[asyncio.Task[None]] = set()
"""Sends in flight, held until done (a task nobody holds may be collected before it runs)."""


class TokenBell:
    """Sends one execution's chunks on its run's group, each after the events that came
    before it (a chunk waits until its run's :class:`~dashboard.runs.doorbells.RunBell` has
    rung for them: a client sees the state a node started from before its model's first
    token, as from LangGraph's server), and one message in flight at a time: the chunks
    that come while one is sent go together in the next (a model that streams faster than
    the layer answers costs a message per round trip, not one per chunk)."""

    def __init__(self, run_id: UUID, bell: RunBell) -> None:
        self.run_id = run_id
        self.group = run_group(run_id)
        self.bell = bell
        bell.on_rung = self._kick
        self.key = uuid.uuid4().hex[:12]  # its messages' keys: decoded once per process
        self.numbers = itertools.count()
        self.pending: list[tuple[int, dict[str, Any]]] = []
        self.sending: asyncio.Task[None] | None = None
        # what the last look at the marks said, and when: listened for its first second,
        # as the client whose request asked for chunks may be a moment behind its run
        self.listened, self.looked_at = True, time.monotonic()

    def add(self, item: dict[str, Any], *, after: int) -> None:
        """Send one item once the events up to seq ``after`` were rung (call on the
        executor's loop)."""
        self.pending.append((after, item))
        if after <= self.bell.rung:
            self._kick()

    def _kick(self) -> None:
        """Send what is due, unless a send in flight will."""
        if self.pending and (self.sending is None or self.sending.done()):
            self.sending = asyncio.get_running_loop().create_task(self._asend())
            _SENDING.add(self.sending)
            self.sending.add_done_callback(_SENDING.discard)

    def _due(self) -> list[dict[str, Any]]:
        """The items whose events were rung, taken in order (``after`` never decreases)."""
        rung, count = self.bell.rung, 0
        while count < len(self.pending) and self.pending[count][0] <= rung:
            count += 1
        due, self.pending = self.pending[:count], self.pending[count:]
        return [item for _, item in due]

    async def _asend(self) -> None:
        while items := self._due():
            if not await self._alistened():
                continue  # nobody streams them: dropped (a later client gets whole messages)
            await asend(self.group, tokens_message(
                self.run_id, items, key=f"{self.key}:{next(self.numbers)}"))

    async def _alistened(self) -> bool:
        """Whether a client streams the chunks, looked up at most every
        :data:`REFRESH_SECONDS` while one does, every :data:`RECHECK_SECONDS` while none."""
        now = time.monotonic()
        if now - self.looked_at >= (REFRESH_SECONDS if self.listened else RECHECK_SECONDS):
            self.listened, self.looked_at = await alistened(self.run_id), now
        return self.listened


def tokens_message(run_id: UUID | str, items: list[dict[str, Any]], *, key: str
                   ) -> dict[str, Any]:
    """The doorbell message carrying ``items`` (as one JSON text, decoded once per process
    by :func:`doorbell_tokens`)."""
    return {"type": TOKENS, "run_id": str(run_id), "key": key, "tokens": jsonsafe.dumps(items)}


def doorbell_tokens(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The items of a token message, decoded once per process (shared: do not change them)."""
    return decoded_once(("tokens", message["key"]), message["tokens"])
