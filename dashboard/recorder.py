"""Recording a run: numbering its events and writing them behind the graph.

Every flush of a running run writes its buffered events and the run's progress (last seq,
current node, heartbeat) in one transaction on the *checkpointer's own connection*: the
psycopg pool on PostgreSQL (one pipelined round trip, no thread hop) and the aiosqlite
connection on SQLite (so the graph's checkpoint writes and the event writes never contend
for SQLite's single write lock, whose busy handler sleeps for milliseconds). The final
write of a run (status, output, error, interrupts) goes through the ORM.

On PostgreSQL the executor's own bookkeeping commits with ``synchronous_commit = off``
unless ``PLANWATCH["SYNC_EVENT_COMMITS"]`` is set: the checkpoints (the graph's truth)
are still committed durably by the saver, so a crash of the *database server* can lose
at most the last few hundred milliseconds of event rows, never a checkpoint, and the run
is recovered from its checkpoint. A crash of Planwatch itself loses nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Coroutine
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from dashboard import broadcast
from dashboard.checkpointer import SaverHandle
from dashboard.models import Interrupt, Run, RunEvent

EVENT_COLUMNS = ("run_id", "seq", "kind", "node", "namespace", "step", "task_id",
                 "checkpoint_id", "payload", "duration_ms", "created_at")
EVENT_DEFAULTS: dict[str, Any] = {"node": "", "namespace": "", "step": None, "task_id": "",
                                  "checkpoint_id": "", "payload": {}, "duration_ms": None}


def relaxed_commits() -> bool:
    """Whether executor bookkeeping may commit without waiting for the WAL flush."""
    return not settings.PLANWATCH["SYNC_EVENT_COMMITS"]


def usable_connection() -> None:
    """Keep this thread's connection across writes; replace it only once it is broken.

    The executor's database work runs on one long-lived thread, not per request, so
    Django's per-request ``close_old_connections()`` would reconnect on every flush
    (with ``CONN_MAX_AGE=0``: a new PostgreSQL connection, or SQLite's PRAGMAs, each time).
    """
    if connection.connection is not None and connection.errors_occurred:
        if not connection.is_usable():
            connection.close()
        connection.errors_occurred = False


def relax_commit() -> None:
    """Inside a transaction: let it commit without waiting for the WAL (see above)."""
    if connection.vendor == "postgresql" and relaxed_commits():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")


class EventSink:
    """Writes event rows and run progress on the checkpointer's connection."""

    def __init__(self, handle: SaverHandle, *, postgres: bool) -> None:
        self.saver = handle.saver
        self.postgres = postgres
        mark = "%s" if postgres else "?"
        self.insert_sql = (
            f"INSERT INTO {RunEvent._meta.db_table} ({', '.join(EVENT_COLUMNS)}) "
            f"VALUES ({', '.join([mark] * len(EVENT_COLUMNS))})"
        )
        self.progress_sql = (
            f"UPDATE {Run._meta.db_table} SET last_seq = {mark}, current_node = {mark}, "
            f"heartbeat_at = {mark} WHERE id = {mark}"
        )

    @contextlib.asynccontextmanager
    async def lock(self) -> AsyncIterator[None]:
        """Hold SQLite's one writer (the saver's connection lock); free on PostgreSQL."""
        if self.postgres:
            yield
        else:
            async with self.saver.lock:
                yield

    async def awrite(self, run_id: uuid.UUID, rows: list[dict[str, Any]], *,
                     current_node: str, now: datetime) -> None:
        """Insert ``rows`` and record the run's progress in one transaction."""
        last_seq = rows[-1]["seq"]
        if self.postgres:
            from psycopg.types.json import Jsonb

            params = [(run_id, *[Jsonb(r[c]) if c == "payload" else r[c]
                                 for c in EVENT_COLUMNS[1:-1]], now) for r in rows]
            # one pipelined round trip: BEGIN, SET LOCAL, the inserts, the update, COMMIT
            async with self.saver.conn.connection() as conn, conn.pipeline(), \
                    conn.transaction(), conn.cursor() as cur:
                if relaxed_commits():
                    await cur.execute("SET LOCAL synchronous_commit TO OFF")
                await cur.executemany(self.insert_sql, params)
                await cur.execute(self.progress_sql, (last_seq, current_node, now, run_id))
            return
        # Django's SQLite conventions: uuid as 32 hex digits, naive UTC datetimes as text.
        stamp = str(timezone.make_naive(now, timezone.UTC)) if settings.USE_TZ else str(now)
        params = [(run_id.hex, *[json.dumps(r[c]) if c == "payload" else r[c]
                                 for c in EVENT_COLUMNS[1:-1]], stamp) for r in rows]
        async with self.saver.lock:
            conn = self.saver.conn
            await conn.executemany(self.insert_sql, params)
            await conn.execute(self.progress_sql, (last_seq, current_node, stamp, run_id.hex))
            await conn.commit()


class EventWriter:
    """Buffers a run's events, numbers them, and writes them behind the graph."""

    def __init__(self, run: Run, *, next_seq: int, sink: EventSink | None,
                 tasks: set[asyncio.Task[None]] | None = None) -> None:
        self.run = run
        self.tasks = set() if tasks is None else tasks
        self.sink = sink
        self.next_seq = next_seq
        self.buffer: list[dict[str, Any]] = []
        self.current_node = run.current_node
        self._flushing: asyncio.Task[None] | None = None
        self._published: tuple[str, str] = (run.status, run.current_node)

    def add(self, fields: dict[str, Any]) -> None:
        """Number one event and buffer it."""
        self.buffer.append({**EVENT_DEFAULTS, **fields, "seq": self.next_seq})
        self.next_seq += 1

    def flush_behind(self) -> None:
        """Start a flush unless one is running (that one's successor takes the rest)."""
        if self._flushing is None or self._flushing.done():
            self._flushing = self.track(self.aflush())

    def track(self, flush: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run a flush as a task the executor can wait for when it stops."""
        task = asyncio.get_running_loop().create_task(flush)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def aflush(self, **final: Any) -> None:
        """Write everything buffered in one transaction, then broadcast it."""
        while self._flushing is not None and not self._flushing.done():
            if self._flushing is asyncio.current_task():
                break
            await asyncio.shield(self._flushing)
        batch, self.buffer = self.buffer, []
        if not batch and not final:
            return
        now = timezone.now()
        for row in batch:
            row["created_at"] = now
        if final or self.sink is None:
            lock = self.sink.lock() if self.sink else contextlib.nullcontext()
            async with lock:
                summary = await awrite_final(self.run.id, batch, self.current_node, final)
        else:
            await self.sink.awrite(self.run.id, batch, current_node=self.current_node, now=now)
            summary = {"id": str(self.run.id), "graph": self.run.graph,
                       "status": Run.Status.RUNNING, "current_node": self.current_node,
                       "last_seq": batch[-1]["seq"]}
        key = (summary["status"], summary["current_node"])
        moved = key != self._published
        self._published = key
        if batch:  # one message to the run's watchers: the events and, if it moved, the run
            await broadcast.abroadcast_events(self.run.id, [event_dict(r) for r in batch],
                                              run=summary if moved else None)
        if moved:
            await broadcast.abroadcast_run(summary, watchers=not batch)

    async def afinish(
        self, *, status: str, output: Any = None, error: tuple[str, str] | None = None,
        pending: list[dict[str, Any]] | None = None, cancel_interrupts: bool = False,
    ) -> None:
        """Write the last events together with the run's final (or paused) status."""
        final: dict[str, Any] = {"status": status}
        if output is not None:
            final["output"] = output
        if error:
            final["error_message"], final["error_traceback"] = error
        if pending is not None:
            final["pending"] = pending
        final["cancel_interrupts"] = cancel_interrupts
        await self.aflush(**final)
        if pending or cancel_interrupts:
            await broadcast.abroadcast_inbox()


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


@sync_to_async
def awrite_final(
    run_id: uuid.UUID, batch: list[dict[str, Any]], current_node: str, final: dict[str, Any]
) -> dict[str, Any]:
    """Insert the last events and the run's final (or paused) status in one transaction."""
    usable_connection()
    now = batch[0]["created_at"] if batch else timezone.now()
    with transaction.atomic():
        relax_commit()
        RunEvent.objects.bulk_create([RunEvent(run_id=run_id, **row) for row in batch])
        fields: dict[str, Any] = {"heartbeat_at": now}
        if batch:
            fields["last_seq"] = batch[-1]["seq"]
        if current_node:
            fields["current_node"] = current_node
        status = final.get("status")
        if status:
            fields["status"] = status
            for key in ("output", "error_message", "error_traceback"):
                if key in final:
                    fields[key] = final[key]
            if status in Run.FINISHED:
                fields.update(finished_at=now, owner="", cancel_requested=False)
            elif status == Run.Status.INTERRUPTED:
                fields["owner"] = ""
        Run.objects.filter(id=run_id).update(**fields)
        for item in final.get("pending") or ():
            Interrupt.objects.get_or_create(
                run_id=run_id, interrupt_id=item["interrupt_id"],
                defaults={k: item[k] for k in ("node", "namespace", "payload")},
            )
        if final.get("pending") is not None:
            live = [i["interrupt_id"] for i in final["pending"]]
            Interrupt.objects.filter(run_id=run_id, status=Interrupt.Status.PENDING).exclude(
                interrupt_id__in=live
            ).update(status=Interrupt.Status.CANCELLED)
        if final.get("cancel_interrupts"):
            Interrupt.objects.filter(run_id=run_id, status=Interrupt.Status.PENDING).update(
                status=Interrupt.Status.CANCELLED
            )
        run = Run.objects.values("id", "graph", "status", "current_node", "last_seq").get(
            id=run_id
        )
    run["id"] = str(run["id"])
    return run
