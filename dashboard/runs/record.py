"""Writing behind the graphs: one write for the buffered events of every run of an executor.

Every run's events are numbered and buffered by its execution's
:class:`~dashboard.runs.execution.Buffered` and written behind the graph by the
executor's :class:`WriteBehind`, which takes the buffered events of *all* its runs
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
from datetime import datetime
from typing import Any, Protocol

from django.utils import timezone

from dashboard.models import Run, RunEvent
from dashboard.runs import doorbells, store
from dashboard.runs.savers import RunLost

logger = logging.getLogger("planwatch.recorder")

EVENT_DEFAULTS: dict[str, Any] = {"node": "", "namespace": "", "step": None, "task_id": "",
                                  "checkpoint_id": "", "payload": {}, "duration_ms": None}


class TaskClock:
    """When each task of a run's graph began and ended, as the task itself ran.

    LangGraph streams a task's start and result through a queue the executor drains when
    its turn comes, after the node may have run (and called its model) already; LangChain's
    callbacks fire inside the task, in order with the model calls' own. The model-call
    recorder stamps them here (from any thread: one dict write each), and the writer gives
    a node's events these times (:meth:`moment`), so a node is drawn where it ran, around
    its model calls, after the node before it.
    """

    def __init__(self) -> None:
        """An empty clock."""
        self.began: dict[str, datetime] = {}
        self.ended: dict[str, datetime] = {}
        self._runs: dict[Any, str] = {}  # the callback run that is a task, by run id
        self._stamped: dict[str, datetime] = {}  # node_started's ``at``, by task

    def start(self, task_id: str, run_id: Any, at: datetime) -> None:
        """The task's outermost runnable began at ``at`` (inner ones are not the task)."""
        if task_id and task_id not in self.began:
            self.began[task_id] = at
            self._runs[run_id] = task_id

    def end(self, run_id: Any, at: datetime) -> None:
        """A runnable ended: if it was a task's outermost one, the task ended at ``at``."""
        task_id = self._runs.pop(run_id, None)
        if task_id is not None:
            self.ended[task_id] = at

    def stamp(self, fields: dict[str, Any], observed: datetime) -> None:
        """Give a node event of ``fields`` the time its task said (``at``, and a finished
        node's ``duration_ms`` from its start as stamped here); other events keep
        ``observed``, the moment the executor saw them."""
        kind, task_id = fields["kind"], fields.get("task_id") or ""
        at = observed
        if task_id and kind == RunEvent.Kind.NODE_STARTED:
            # streamed before the task ran (then its own start is a little later), or after
            # it ran for a while: the earlier of the two is when it began
            began = self.began.get(task_id)
            at = min(observed, began) if began is not None else observed
            self._stamped[task_id] = at
        elif task_id and kind in TASK_ENDS:
            ended = self.ended.get(task_id)
            if ended is not None:
                at = ended
            began = self._stamped.get(task_id)
            if began is not None and kind != RunEvent.Kind.INTERRUPT_RAISED:
                fields["duration_ms"] = max((at - began).total_seconds() * 1000, 0.0)
        fields["at"] = at


TASK_ENDS = (RunEvent.Kind.NODE_FINISHED, RunEvent.Kind.NODE_FAILED,
             RunEvent.Kind.INTERRUPT_RAISED)
"""The events that end a node's execution."""


class Buffered(Protocol):
    """What the write-behind needs of a run's event writer."""

    run: Run
    current_node: str
    buffer: list[dict[str, Any]]
    bell: doorbells.RunBell

    def take(self, now: Any) -> list[dict[str, Any]]:
        """Hand over the buffered events that may be written now, stamped with the moment
        of their write (the rest wait for a later write)."""

    def lose(self) -> None:
        """Another executor took the run over: drop what is buffered, write nothing more."""


def track(tasks: set[asyncio.Task[Any]], work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    """Run ``work`` as a task kept in ``tasks`` until it is done (the executor waits for them)."""
    task = asyncio.get_running_loop().create_task(work)
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    return task


class WriteBehind:
    """Writes the buffered events of all of an executor's runs together, behind the graphs.

    ``RETRIES`` failed writes of a run in a row are retried, ``RETRY_PAUSE`` seconds apart;
    after that the run's rows wait in its buffer for its next write (its final one at last).

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
        self.waiting: dict[uuid.UUID, Buffered] = {}
        self._task: asyncio.Task[None] | None = None
        self._last_write = float("-inf")
        self._writing: set[uuid.UUID] = set()  # the runs of the write in flight
        self._written: asyncio.Event | None = None  # set when that write is done
        self._failures: dict[uuid.UUID, int] = {}  # failed writes in a row, by run

    def note(self, writer: Buffered) -> None:
        """Have ``writer``'s buffered events written by the next write."""
        self.waiting[writer.run.id] = writer
        if self._task is None or self._task.done():
            self._task = track(self.tasks, self._arun())

    async def arelease(self, writer: Buffered) -> None:
        """Leave ``writer`` out of the next write; wait for one in flight with its events,
        and for the next one too if the writer was noted again meanwhile (a checkpoint
        saved while it waited): the write that follows is then the run's last. (It used
        to return while that next write was in flight: the run's final status landed
        before its last events, a succeeded run read with an older ``last_seq``.)"""
        while True:
            self.waiting.pop(writer.run.id, None)
            if writer.run.id not in self._writing or self._written is None:
                return
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

    async def _awrite(self, writers: list[Buffered]) -> None:
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
            except Exception as exc:
                if len(batches) == 1:
                    self._failed(*batches[0], exc)
                    return
                logger.warning("writing the events of %d runs together failed; writing them "
                               "run by run", len(batches), exc_info=True)
                for w, rows in batches:
                    try:
                        await self._awrite_one(w, rows, now)
                    except Exception as one:
                        self._failed(w, rows, one)
                return
        for w, _ in batches:
            self._failures.pop(w.run.id, None)
        committed_at = time.time()
        # side by side: a hundred runs' doorbells one after the other held the next write
        await asyncio.gather(*(w.bell.aring([event_dict(r) for r in rows], values, committed_at)
                               for (w, rows), values in zip(batches, written, strict=True)))

    def _failed(self, writer: Buffered, rows: list[dict[str, Any]], exc: Exception) -> None:
        """A write of ``writer``'s ``rows`` failed: refused by the run's fence (another
        executor took the run: its rows are dropped, never retried), or retried."""
        if isinstance(exc, RunLost):
            self._failures.pop(writer.run.id, None)
            writer.lose()
        else:
            self._retry(writer, rows)

    def _retry(self, writer: Buffered, rows: list[dict[str, Any]]) -> None:
        """A write failed (a dropped connection, say): its rows go back in front of the
        run's buffer, numbered as they were, for the next write (after a pause) or the
        run's final write, so a failed write leaves no gap. After ``RETRIES`` failures in
        a row the run is not retried: its rows wait for its next write.

        Nothing is raised: it would end the write of the runs after this one (their rows
        taken from their buffers already, then in none) and every later write of the
        runs waiting meanwhile."""
        failures = self._failures.get(writer.run.id, 0) + 1
        self._failures[writer.run.id] = failures
        writer.buffer[:0] = rows
        if failures > self.RETRIES:
            logger.error("writing %d events of run %s failed %d times in a row; they wait "
                         "for its next write", len(rows), writer.run.id, failures,
                         exc_info=True)
            return
        logger.warning("writing %d events of run %s failed (%d in a row); retrying",
                       len(rows), writer.run.id, failures, exc_info=True)
        self._last_write += self.RETRY_PAUSE  # the next write waits a little longer
        self.note(writer)

    async def _awrite_one(self, writer: Buffered, rows: list[dict[str, Any]],
                          now: Any) -> None:
        assert self.store is not None
        (values,) = await self.store.aprogress([(writer.run, rows, writer.current_node)],
                                               now=now)
        self._failures.pop(writer.run.id, None)
        await writer.bell.aring([event_dict(r) for r in rows], values, time.time())


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
        "at": _iso(get("at")) or (created.isoformat() if created else None),
    }


def _iso(value: Any) -> str | None:
    if isinstance(value, datetime):
        return value.isoformat()
    return value if isinstance(value, str) and value else None
