"""Following a run: its log after a seq, as it grows, until the run stops.

Every watcher (the trace page's websocket, a LangGraph client's SSE stream, ``manage.py
start_run``) follows a run the same way: it waits on the run's doorbell on the channel
layer and reads the log in short statements, never holding a database connection while it
waits. Each read is a ``database_sync_to_async`` call, which closes the thread's
connection after it (with Django's psycopg pool and ``CONN_MAX_AGE=0`` that hands it back
to the pool): 200 open streams share a few connections instead of pinning 200.

A doorbell carries its events; they are used as they are when they follow the cursor with
no gap. The chunks of a run's model answers (:mod:`~dashboard.runs.tokens`) come on the
same doorbell, in order with its events, to the followers that ask for them.

A gap, a status that may have stopped the run, or a quiet spell of
:data:`WAKE_EVERY` seconds (a lost doorbell) makes the follower read the log instead; a
quiet spell first asks only the run's last seq and status, in one query with every other
follower's that asked meanwhile (:class:`_Looks`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import threading
import weakref
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, cast
from uuid import UUID

from channels.db import database_sync_to_async
from channels.layers import InMemoryChannelLayer, get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.db import connection
from django.db.models import Exists, OuterRef, QuerySet

from dashboard.models import LangGraphRun, Run, RunEvent
from dashboard.runs.doorbells import doorbell_events, run_group
from dashboard.runs.record import event_dict
from dashboard.runs.tokens import REFRESH_SECONDS, TOKENS, alisten, doorbell_tokens

logger = logging.getLogger("planwatch.runs")

WAKE_EVERY = 1.0
"""Seconds a follower waits for a doorbell before it looks at the log anyway."""

_leaving = threading.Event()


def stop_following() -> None:
    """This process stops (it drains): every follower ends within :data:`WAKE_EVERY`
    seconds, its last step not ``last``, so its client reconnects to another process and
    resumes after the last seq it has."""
    _leaving.set()


def short[**P, T](read: Callable[P, T]) -> Callable[P, Coroutine[Any, Any, T]]:
    """``read`` as a short statement: in a thread, with that thread's connection closed
    around it (Channels' ``database_sync_to_async``), so it goes back to the pool."""
    return cast(Callable[P, Coroutine[Any, Any, T]], database_sync_to_async(read))


@dataclass
class Step:
    """What a follower learnt at once: new events (gapless, after the cursor) and the run."""

    events: list[dict[str, Any]] = field(default_factory=list)
    run: Run | None = None
    """The run as read from the database with these events (None: they came by doorbell)."""
    summary: dict[str, Any] | None = None
    """What the doorbell said of the run (``doorbells.run_summary``), if it said anything."""
    last: bool = False
    """The run has stopped and every event up to its last seq was given."""
    tokens: list[dict[str, Any]] = field(default_factory=list)
    """Chunks of model answers, as they came (``tokens``: a step of them only)."""


def finished(run: Run) -> bool:
    """Stop rule of a trace page: the run ended (a paused run may still resume)."""
    return run.is_finished


def with_rollback(runs: QuerySet[Run]) -> QuerySet[Run]:
    """``runs`` with ``rolling_back``: a LangGraph run of the run is to be rolled back once
    it stopped (a cancelled run then waits again where that LangGraph run found it)."""
    return runs.annotate(rolling_back=Exists(
        LangGraphRun.objects.to_roll_back().filter(run=OuterRef("pk"))))


def ended(run: Run) -> bool:
    """Stop rule of a trace page: :func:`finished`, and for good (the run is read
    :func:`with_rollback`: a rollback asked takes a cancelled run back to waiting)."""
    return finished(run) and not getattr(run, "rolling_back", False)


def settled(run: Run) -> bool:
    """Stop rule of a command line: the run neither executes nor waits to."""
    return not run.is_active


@short
def aread(runs: QuerySet[Run] | None, run_id: UUID | str, after: int
          ) -> tuple[Run | None, list[dict[str, Any]]]:
    """The run (read through ``runs``, or as it is stored), and its events after ``after``
    up to the last seq read with it."""
    if runs is not None:
        run = runs.filter(id=run_id).first()
        if run is None:
            return None, []
        rows: Iterable[RunEvent] = RunEvent.objects.filter(
            run_id=run_id, seq__gt=after, seq__lte=run.last_seq).order_by("seq")
        return run, [event_dict(row) for row in rows]
    pk = Run._meta.pk.get_db_prep_value(run_id, connection)
    run_sql, events_sql = _read_sql(connection.vendor)
    run = next(iter(Run.objects.raw(run_sql, [pk])), None)
    if run is None:
        return None, []
    rows = RunEvent.objects.raw(events_sql, [pk, after, run.last_seq])
    return run, [event_dict(row) for row in rows]


@functools.cache
def _read_sql(vendor: str) -> tuple[str, str]:
    """The SQL of :func:`aread`'s two statements on ``vendor``'s database, as the ORM
    compiles them, compiled once (compiling them was most of a read's CPU: every stream
    reads its run when it stops). Parameters: the run's id; then its id, the seq after
    which, the last seq."""
    zero = UUID(int=0)
    run_sql, params = Run.objects.filter(id=zero)[:1].query.sql_with_params()
    assert len(params) == 1, f"a run's read took parameters of its own: {params!r}"
    events_sql, params = RunEvent.objects.filter(run_id=zero, seq__gt=7, seq__lte=9
                                                 ).order_by("seq").query.sql_with_params()
    assert list(params)[1:] == [7, 9], f"an event read's parameters moved: {params!r}"
    return str(run_sql), str(events_sql)


@short
def _acursors(run_ids: list[str]) -> dict[str, tuple[int, str]]:
    """Last seq and status of each of these runs (one indexed query; a deleted run is
    left out)."""
    rows = Run.objects.filter(id__in=run_ids).values_list("id", "last_seq", "status")
    return {str(run_id): (last_seq, status) for run_id, last_seq, status in rows}


class _Looks:
    """The quiet-spell looks of every follower on one event loop, read together.

    A follower that heard no doorbell for a while asks for its run's last seq and status.
    Two hundred streams of model-bound runs ask a hundred times a second; asked one by one,
    each look is a hop to the one thread the ORM runs on, and a follower waiting its turn
    there hears no doorbell meanwhile. Here the looks asked while a read is in flight wait
    for the next read, which answers all of them with one query.
    """

    def __init__(self) -> None:
        self.waiting: dict[str, asyncio.Future[tuple[int, str] | None]] = {}
        self.reader: asyncio.Task[None] | None = None

    async def acursor(self, run_id: str) -> tuple[int, str] | None:
        look = self.waiting.get(run_id)
        if look is None:
            look = self.waiting[run_id] = asyncio.get_running_loop().create_future()
            if self.reader is None or self.reader.done():
                self.reader = asyncio.ensure_future(self._aread())
        return await asyncio.shield(look)

    async def _aread(self) -> None:
        while self.waiting:
            batch, self.waiting = self.waiting, {}
            try:
                known = await _acursors(list(batch))
            except Exception as exc:  # each follower hears why (as its own read would)
                for look in batch.values():
                    if not look.done():
                        look.set_exception(exc)
                continue
            for run_id, look in batch.items():
                if not look.done():
                    look.set_result(known.get(run_id))


_LOOKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Looks] = (
    weakref.WeakKeyDictionary())


async def acursor(run_id: UUID | str) -> tuple[int, str] | None:
    """The run's last seq and status, or None if it was deleted; read together with every
    other follower's look on this loop (see :class:`_Looks`)."""
    loop = asyncio.get_running_loop()
    looks = _LOOKS.get(loop)
    if looks is None:
        looks = _LOOKS[loop] = _Looks()
    return await looks.acursor(str(run_id))


class Doorbell:
    """A run's doorbell: a channel of its own in the run's group, waited on with a timeout.

    One receive stays pending across the waits: a wait that times out leaves it be. (A
    cancelled ``receive`` of Channels' Redis pub/sub layer drops the channel and
    unsubscribes it: until the next receive every doorbell of the run was lost, and the
    follower learnt of those events only at its next quiet-spell look, a second later.)

    When the layer fails (Redis restarting, say) the follower reads the log every
    :data:`WAKE_EVERY` seconds instead, and joins the group again once the layer answers.
    """

    def __init__(self, run_id: UUID | str) -> None:
        self.group = run_group(run_id)
        self.layer = get_channel_layer()
        self.channel: str | None = None
        self._receive: asyncio.Future[dict[str, Any]] | None = None

    async def aopen(self) -> None:
        """Join the run's group (quietly not, if the layer is down)."""
        if self.layer is None:
            return
        try:
            self.channel = await self.layer.new_channel("planwatch.follow.")
            await self.layer.group_add(self.group, self.channel)
        except Exception:
            logger.warning("doorbells unavailable; polling the log", exc_info=True)
            self.channel = None

    async def await_ring(self, seconds: float) -> dict[str, Any] | None:
        """The doorbell's message when it rings; None after ``seconds``."""
        if self.channel is None:
            await asyncio.sleep(seconds if self.layer else 0.05)
            await self.aopen()
            return None
        if self._receive is None:
            self._receive = asyncio.ensure_future(self.layer.receive(self.channel))
        done, _ = await asyncio.wait((self._receive,), timeout=seconds)
        if not done:
            return None
        received, self._receive = self._receive, None
        try:
            message: dict[str, Any] = received.result()
            return message
        except Exception:  # the layer failed: poll until it is back
            logger.warning("doorbell lost; polling the log", exc_info=True)
            self.channel = None
            await asyncio.sleep(seconds)
            return None

    async def aclose(self) -> None:
        """Stop receiving, leave the group and drop the channel (its queue, and on Redis
        its subscription): whether a receive was pending or not."""
        if self._receive is not None:
            self._receive.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._receive
            self._receive = None
        if self.layer is not None and self.channel is not None:
            with contextlib.suppress(Exception):
                await self.layer.group_discard(self.group, self.channel)
            await adrop_channel(self.layer, self.channel)
            self.channel = None


async def adrop_channel(layer: Any, channel: str) -> None:
    """Forget ``channel`` (one of :meth:`Doorbell.aopen`'s) on ``layer``, with what it holds.

    Channels has no call for it: a consumer's channel goes when its pending ``receive`` is
    cancelled, which Redis's pub/sub layer takes as the sign to drop the channel's queue
    and unsubscribe it. A follower that stopped between two receives (after a doorbell:
    the run's last, or a client that closed its stream while a part was on its way) had
    none pending, and its channel stayed: an ``asyncio.Queue`` with the doorbells that came
    before it left the group, and a Redis subscription, per stream, for the life of the
    process (300 streams left 170 of them). In memory, the queued doorbells stayed until
    they expired (60 s), each a copy of its events.
    """
    try:
        if isinstance(layer, RedisPubSubChannelLayer):
            here = layer._get_layer()  # this loop's (the channel was made on it)
            if here.channels.pop(channel, None) is not None:
                await here._get_shard(channel).unsubscribe(channel)
        elif isinstance(layer, InMemoryChannelLayer):
            layer.channels.pop(channel, None)
        elif isinstance(getattr(layer, "receive_buffer", None), dict):  # channels-redis core
            layer.receive_buffer.pop(channel, None)
    except Exception:  # the layer's internals changed, or Redis is down: it costs memory only
        logger.warning("could not drop the doorbell channel %s", channel, exc_info=True)


async def follow(run_id: UUID | str, after: int = 0, *,
                 until: Callable[[Run], bool] = settled,
                 runs: QuerySet[Run] | None = None,
                 wake_every: float | None = None,
                 tokens: bool = False,
                 written: Run | None = None) -> AsyncGenerator[Step]:
    """The run's events after seq ``after``, step by step, until ``until(run)`` holds for
    the run as read from the log and every event up to its last seq was given.

    ``runs`` is the queryset the run is read through (annotated, say, for ``until``); None
    reads it as stored, with SQL compiled once.
    A deleted run ends the following (a last step with no run). With ``tokens``, the
    chunks of its model answers come too, as steps of their own, as they are heard.
    ``written``: the run as its caller just wrote it (a new run, say): its first step is that
    run, with no events, when its last seq and status are still those (asked together with
    the other followers' looks, :func:`acursor`), instead of a read of the run and its log.
    """
    doorbell = Doorbell(run_id)
    await doorbell.aopen()  # before the first read: nothing committed after it is missed
    cursor, status = after, ""
    wake = wake_every or WAKE_EVERY
    loop = asyncio.get_running_loop()
    listened_at = -REFRESH_SECONDS
    try:
        if tokens:  # before the run's first chunk: a client that asks for them comes first
            listened_at = loop.time()
            await alisten(run_id)
        run, events = await _afirst(runs, run_id, cursor, written)
        summary: dict[str, Any] | None = None
        while True:
            if run is None:
                yield Step(last=True)
                return
            events = [e for e in events if e["seq"] > cursor]
            cursor = max(cursor, events[-1]["seq"]) if events else cursor
            status = run.status
            last = until(run) and cursor >= run.last_seq
            yield Step(events, run=run, summary=summary, last=last)
            if last:
                return
            quiet_until = _look_at(loop.time(), wake)  # chunks do not count: only doorbells
            while True:  # doorbells, until the log must be read
                if _leaving.is_set():
                    return
                if tokens and loop.time() - listened_at >= REFRESH_SECONDS:
                    listened_at = loop.time()  # the run sends its chunks while this listens
                    await alisten(run_id)
                wait = quiet_until - loop.time()
                if tokens:
                    wait = min(wait, listened_at + REFRESH_SECONDS - loop.time())
                message = await doorbell.await_ring(max(0.0, wait))
                if message is None and loop.time() < quiet_until:
                    continue  # woken to refresh the mark only
                if message is not None and message.get("type") == TOKENS:
                    if tokens:
                        yield Step(tokens=doorbell_tokens(message))
                    if loop.time() < quiet_until:
                        continue
                    message = None
                if message is None:
                    known = await acursor(run_id)
                    if known is None or known[0] > cursor or known[1] != status:
                        summary = None
                        break
                    quiet_until = _look_at(loop.time(), wake)
                    continue
                pushed = _pushed(message, cursor)
                if pushed is None:
                    summary = message.get("run")
                    break
                if pushed.events:
                    cursor = pushed.events[-1]["seq"]
                if pushed.summary:  # the status a look compares with is the latest told
                    status = pushed.summary.get("status", status)
                if pushed.events or pushed.summary:
                    yield pushed
                quiet_until = _look_at(loop.time(), wake)
            run, events = await aread(runs, run_id, cursor)
    finally:
        await doorbell.aclose()


def _look_at(now: float, wake: float) -> float:
    """When a follower that heard its last doorbell at ``now`` looks at the log: ``wake``
    seconds later, rounded up to the next quarter of ``wake`` on the loop's clock. The
    followers of one process that are due within a quarter look at the same moment, so
    :class:`_Looks` answers them with one query: at most four a ``wake`` a process, however
    many streams are open (each asked on its own second, 200 quiet streams made ~100 a
    second)."""
    grain = wake / 4
    return math.ceil((now + wake) / grain) * grain


async def _afirst(runs: QuerySet[Run] | None, run_id: UUID | str, after: int, written: Run | None
                  ) -> tuple[Run | None, list[dict[str, Any]]]:
    """A follower's first read: ``written`` (nothing after ``after`` yet) while the log says
    its last seq and status are still those, else the run and its events as read."""
    status = written.__dict__.get("status") if written is not None else None  # not deferred
    if written is not None and status is not None and written.last_seq <= after:
        look = await acursor(run_id)
        if look is not None and look == (written.last_seq, status):
            return written, []
    return await aread(runs, run_id, after)


def _pushed(message: dict[str, Any], cursor: int) -> Step | None:
    """The step a doorbell tells on its own, or None when the log must be read (a gap, or
    a status that may have stopped the run)."""
    summary = message.get("run")
    if summary and not Run.is_active_status(summary.get("status")):
        return None
    kind = message.get("type")
    if kind == "run.changed":
        if summary and summary.get("last_seq", 0) > cursor:
            return None  # it tells of rows the follower has not seen
        return Step(summary=summary)
    if kind != "run.events":
        return Step()
    if message["first"] > cursor + 1:
        return None
    return Step([e for e in doorbell_events(message) if e["seq"] > cursor], summary=summary)
