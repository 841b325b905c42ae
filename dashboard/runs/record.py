"""Recording a run: numbering its events and writing them behind the graph.

Every run's events are buffered by its :class:`EventWriter` and written behind the graph
by the executor's :class:`WriteBehind`, which takes the buffered events of *all* its runs
in one write (one statement on PostgreSQL, one transaction on SQLite: see
:mod:`dashboard.runs.store`, which does every write), at most one every ``interval``. A
run's final write (its status, output or error) is its own, after any write in flight with
its earlier events. After each write, every run in it rings its watchers' doorbell.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Coroutine
from typing import Any

from django.utils import timezone

from dashboard.models import Run, RunEvent
from dashboard.runs import doorbells, store

logger = logging.getLogger("planwatch.recorder")

EVENT_DEFAULTS: dict[str, Any] = {"node": "", "namespace": "", "step": None, "task_id": "",
                                  "checkpoint_id": "", "payload": {}, "duration_ms": None}


def track(tasks: set[asyncio.Task[Any]], work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    """Run ``work`` as a task kept in ``tasks`` until it is done (the executor waits for them)."""
    task = asyncio.get_running_loop().create_task(work)
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    return task


class WriteBehind:
    """Writes the buffered events of all of an executor's runs together, behind the graphs.

    ``RETRIES`` failed writes of a run in a row are retried, ``RETRY_PAUSE`` seconds apart.

    The first events after a quiet spell are written at once; events that come while a
    write is in flight, or within ``interval`` of its start, wait for the next write,
    which takes every run's: a burst of fast steps costs a few writes, not one a step,
    however many runs make it, and no event waits longer than the interval plus one write.
    If a write of several runs fails, each run's rows are written on their own, so one
    run's bad row costs no other run its events.
    """

    RETRIES = 5
    RETRY_PAUSE = 0.2

    def __init__(self, store: store.RunStore | None, *, interval: float = 0.0,
                 tasks: set[asyncio.Task[Any]] | None = None) -> None:
        self.store = store
        self.interval = interval
        self.tasks = set() if tasks is None else tasks
        self.waiting: dict[uuid.UUID, EventWriter] = {}
        self._task: asyncio.Task[None] | None = None
        self._last_write = float("-inf")
        self._writing: set[uuid.UUID] = set()  # the runs of the write in flight
        self._written: asyncio.Event | None = None  # set when that write is done
        self._failures: dict[uuid.UUID, int] = {}  # failed writes in a row, by run

    def note(self, writer: EventWriter) -> None:
        """Have ``writer``'s buffered events written by the next write."""
        self.waiting[writer.run.id] = writer
        if self._task is None or self._task.done():
            self._task = track(self.tasks, self._arun())

    async def arelease(self, writer: EventWriter) -> None:
        """Leave ``writer`` out of the next write; wait for one in flight with its events."""
        self.waiting.pop(writer.run.id, None)
        if writer.run.id in self._writing and self._written is not None:
            await self._written.wait()

    async def _arun(self) -> None:
        loop = asyncio.get_running_loop()
        while self.waiting:
            wait = self._last_write + self.interval - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
                continue  # runs may have been released meanwhile
            self._last_write = loop.time()
            writers, self.waiting = list(self.waiting.values()), {}
            self._writing, self._written = {w.run.id for w in writers}, asyncio.Event()
            try:
                await self._awrite(writers)
            finally:
                self._writing = set()
                self._written.set()

    async def _awrite(self, writers: list[EventWriter]) -> None:
        now = timezone.now()
        batches = [(w, w.take(now)) for w in writers]
        batches = [(w, rows) for w, rows in batches if rows]
        if not batches:
            return
        if self.store is None:  # no store opened yet: the ORM, run by run
            written = [await store.awrite_orm(w.run, rows, w.current_node, {})
                       for w, rows in batches]
        else:
            try:
                written = await self.store.aprogress(
                    [(w.run, rows, w.current_node) for w, rows in batches], now=now)
            except Exception:
                if len(batches) == 1:
                    self._retry(*batches[0])
                    return
                logger.warning("writing the events of %d runs together failed; writing them "
                               "run by run", len(batches), exc_info=True)
                for w, rows in batches:
                    try:
                        await self._awrite_one(w, rows, now)
                    except Exception:
                        self._retry(w, rows)
                return
        for w, _ in batches:
            self._failures.pop(w.run.id, None)
        committed_at = time.time()
        # side by side: a hundred runs' doorbells one after the other held the next write
        await asyncio.gather(*(w.published(rows, values, committed_at)
                               for (w, rows), values in zip(batches, written, strict=True)))

    def _retry(self, writer: EventWriter, rows: list[dict[str, Any]]) -> None:
        """A write failed (a dropped connection, say): its rows go back in front of the
        run's buffer, numbered as they were, for the next write (after a pause) or the
        run's final write, so a failed write leaves no gap. After ``RETRIES`` failures in
        a row the error is raised (the run's final write still carries the rows)."""
        failures = self._failures.get(writer.run.id, 0) + 1
        self._failures[writer.run.id] = failures
        writer.buffer[:0] = rows
        logger.warning("writing %d events of run %s failed (%d in a row); retrying",
                       len(rows), writer.run.id, failures, exc_info=True)
        if failures > self.RETRIES:
            raise
        self._last_write += self.RETRY_PAUSE  # the next write waits a little longer
        self.note(writer)

    async def _awrite_one(self, writer: EventWriter, rows: list[dict[str, Any]],
                          now: Any) -> None:
        assert self.store is not None
        (values,) = await self.store.aprogress([(writer.run, rows, writer.current_node)],
                                               now=now)
        self._failures.pop(writer.run.id, None)
        await writer.published(rows, values, time.time())


class EventWriter:
    """Buffers a run's events, numbers them, and has them written behind the graph."""

    def __init__(self, run: Run, *, next_seq: int, store: store.RunStore | None = None,
                 behind: WriteBehind | None = None, interval: float = 0.0,
                 tasks: set[asyncio.Task[Any]] | None = None,
                 digest: doorbells.RunsDigest | None = None) -> None:
        """Write behind through the executor's ``behind``, or one of its own on ``store``."""
        self.run = run
        self.behind = behind or WriteBehind(store, interval=interval, tasks=tasks)
        self.digest = digest
        self.next_seq = next_seq
        self.buffer: list[dict[str, Any]] = []
        self.current_node = run.current_node
        self._published: tuple[str, str] = (run.status, run.current_node)

    def add(self, fields: dict[str, Any]) -> None:
        """Number one event and buffer it."""
        self.buffer.append({**EVENT_DEFAULTS, **fields, "seq": self.next_seq})
        self.next_seq += 1

    def flush_behind(self) -> None:
        """Have what is buffered written behind the graph (see :class:`WriteBehind`)."""
        if self.buffer:
            self.behind.note(self)

    def take(self, now: Any) -> list[dict[str, Any]]:
        """Hand over the buffered events, stamped with the moment of their write."""
        batch, self.buffer = self.buffer, []
        for row in batch:
            row["created_at"] = now
        return batch

    async def aflush(self, **final: Any) -> None:
        """Write everything buffered now (with the run's final status, if given).

        A write behind in flight with earlier events of this run lands first (seq stays
        ordered); events still waiting for the next one are written here instead.
        """
        await self.behind.arelease(self)
        writes = self.behind.store
        batch = self.take(timezone.now())
        if not batch and not final:
            return
        now = batch[0]["created_at"] if batch else timezone.now()
        if writes is None:
            values = await store.awrite_orm(self.run, batch, self.current_node, final)
        elif final:
            values = await writes.astop(self.run, batch, current_node=self.current_node,
                                        now=now, final=final)
        else:
            (values,) = await writes.aprogress([(self.run, batch, self.current_node)],
                                               now=now)
        await self.published(batch, values, time.time())

    async def published(self, batch: list[dict[str, Any]], values: dict[str, Any],
                        committed_at: float) -> None:
        """Ring the doorbells of a committed write (``values``: the run's, as written): the
        run's watchers, the runs list."""
        if batch:
            self.run.last_seq = batch[-1]["seq"]
        summary = doorbells.run_summary(values)
        key = (summary["status"], summary["current_node"])
        moved, new_status = key != self._published, key[0] != self._published[0]
        self._published = key
        if batch:  # one message to the run's watchers: the events and, if it moved, the run
            await doorbells.abroadcast_events(self.run.id, [event_dict(r) for r in batch],
                                              run=summary if moved else None,
                                              committed_at=committed_at)
        if moved and batch and not new_status and self.digest is not None:
            self.digest.note(summary)  # the runs list hears of node moves together
        elif moved:
            if self.digest is not None:
                self.digest.forget(summary["id"])
            await doorbells.abroadcast_run(summary, watchers=not batch)

    async def afinish(
        self, *, status: str, output: Any = None, error: tuple[str, str] | None = None,
        pending: list[dict[str, Any]] | None = None, cancel_interrupts: bool = False,
    ) -> None:
        """Write the last events together with the run's final (or paused) status."""
        final: dict[str, Any] = {"status": status}
        if output is not None:
            final["output"] = output
        if error:
            final["error"] = error
        if pending is not None:
            final["pending"] = pending
        final["cancel_interrupts"] = cancel_interrupts
        await self.aflush(**final)
        if pending or cancel_interrupts:
            await doorbells.abroadcast_inbox()


def event_dict(event: RunEvent | dict[str, Any]) -> dict[str, Any]:
    """The plain form of an event (a row or a buffered dict), as broadcast and as shown."""
    get = event.get if isinstance(event, dict) else lambda name: getattr(event, name)
    created = get("created_at")
    return {
        "seq": get("seq"), "kind": get("kind"), "node": get("node"),
        "namespace": get("namespace"), "step": get("step"), "task_id": get("task_id"),
        "checkpoint_id": get("checkpoint_id"), "payload": get("payload"),
        "duration_ms": get("duration_ms"),
        "created_at": created.isoformat() if created else None,
    }
