"""A run's model tokens, told to its watchers as they come and never written.

LangGraph's server streams a chat model's answer chunk by chunk in the ``messages`` and
``messages-tuple`` stream modes of a run whose request asked for them. Here the run's
model-call recorder (:mod:`~dashboard.runs.modelcalls`) hands each chunk of such a run to
its :class:`TokenBell`, which sends it on the run's doorbell group: the channel layer the
doorbells take (in memory in-process, Redis pub/sub from a worker process), so a stream
that follows the run gets the chunks in order with its events' doorbells.

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
import json
import uuid
from typing import Any
from uuid import UUID

from dashboard.runs.doorbells import RunBell, asend, decoded_once, run_group

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
            await asend(self.group, tokens_message(
                self.run_id, items, key=f"{self.key}:{next(self.numbers)}"))


def tokens_message(run_id: UUID | str, items: list[dict[str, Any]], *, key: str
                   ) -> dict[str, Any]:
    """The doorbell message carrying ``items`` (as one JSON text, decoded once per process
    by :func:`doorbell_tokens`)."""
    return {"type": TOKENS, "run_id": str(run_id), "key": key, "tokens": json.dumps(items)}


def doorbell_tokens(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The items of a token message, decoded once per process (shared: do not change them)."""
    return decoded_once(("tokens", message["key"]), message["tokens"])
