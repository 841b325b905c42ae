"""Recording a run: numbering its events and writing them behind the graph.

Every flush of a running run writes its buffered events and the run's progress (last seq,
current node, heartbeat) atomically on the executor's own event loop, with no thread hop:
on PostgreSQL as one statement on a small psycopg pool of the sink's own, on SQLite in one
transaction on the *checkpointer's own* aiosqlite connection (so the graph's checkpoint
writes and the event writes never contend for SQLite's single write lock, whose busy
handler sleeps for milliseconds). Claiming a queued run and the final write (status,
output or error) go the same way; only a paused run's questions (get-or-create of its
interrupts) go through the ORM.

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
import time
import uuid
from collections.abc import AsyncIterator, Coroutine
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from dashboard import broadcast
from dashboard.checkpointer import SaverHandle
from dashboard.models import Interrupt, Run, RunEvent

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


Statement = tuple[str, list[Any]]
# The columns an event row gets from the writer's JSON batch (run_id and created_at are
# the same for every row of a write, so they are parameters of their own), with their SQL
# types for PostgreSQL's jsonb_to_recordset.
BATCH_COLUMNS = (("seq", "integer"), ("kind", "text"), ("node", "text"), ("namespace", "text"),
                 ("step", "integer"), ("task_id", "text"), ("checkpoint_id", "text"),
                 ("payload", "jsonb"), ("duration_ms", "double precision"))


class EventSink:
    """Writes event rows, claims and final statuses next to the checkpointer.

    The rows of a write travel as *one* JSON parameter (a batch of any size is one
    statement of the same text, so the driver parses it once and the server plans it
    once, and serialising it is one ``json.dumps``). PostgreSQL: a small pool of its own
    whose sessions commit without waiting for the WAL (unless ``SYNC_EVENT_COMMITS``), and
    every write is *one statement* (data-modifying CTEs) in autocommit: one round trip, no
    BEGIN/COMMIT. SQLite: the saver's own aiosqlite connection, under its lock, one
    transaction per write.
    """

    def __init__(self, handle: SaverHandle, *, postgres: bool, pool: Any = None) -> None:
        self.saver = handle.saver
        self.postgres = postgres
        self.pool = pool
        self.mark = mark = "%s" if postgres else "?"
        run, event = Run._meta.db_table, RunEvent._meta.db_table
        columns = ", ".join(name for name, _ in BATCH_COLUMNS)
        if postgres:
            record = ", ".join(f"{name} {kind}" for name, kind in BATCH_COLUMNS)
            select = (f"SELECT %s, {columns}, %s "
                      f"FROM jsonb_to_recordset(%s::jsonb) AS e({record})")
        else:
            # json_extract gives SQL values for scalars and JSON text for the payload
            # (always an object), as Django's JSONField stores it on SQLite
            picked = ", ".join(f"json_extract(e.value, '$.{name}')" for name, _ in BATCH_COLUMNS)
            select = f"SELECT ?, {picked}, ? FROM json_each(?) AS e"
        self.insert_sql = f"INSERT INTO {event} (run_id, {columns}, created_at) {select}"
        self.claim_sql = (
            f"UPDATE {run} SET owner = {mark}, heartbeat_at = {mark}, status = {mark}, "
            f"started_at = COALESCE(started_at, {mark}) WHERE id = {mark} AND status = {mark} "
            f"AND (owner = '' OR owner = {mark} OR heartbeat_at < {mark}) "
            f"RETURNING graph, thread_id, input, current_node, last_seq, started_at"
        )
        self.cancel_interrupts_sql = (
            f"UPDATE {Interrupt._meta.db_table} SET status = {mark} "
            f"WHERE run_id = {mark} AND status = {mark}"
        )

    @classmethod
    async def aopen(cls, handle: SaverHandle, *, postgres: bool, pool_size: int) -> EventSink:
        """The sink for an open saver (on PostgreSQL with its own pool)."""
        if not postgres:
            return cls(handle, postgres=False)
        from psycopg_pool import AsyncConnectionPool

        from dashboard.checkpointer import postgres_conninfo

        async def configure(conn: Any) -> None:
            if relaxed_commits():
                await conn.execute("SET synchronous_commit TO OFF")

        pool = AsyncConnectionPool(
            postgres_conninfo(), min_size=1, max_size=pool_size, configure=configure,
            kwargs={"autocommit": True, "prepare_threshold": 0}, open=False,
        )
        await pool.open()
        return cls(handle, postgres=True, pool=pool)

    async def aclose(self) -> None:
        """Close the sink's own pool, if it has one."""
        if self.pool is not None:
            await self.pool.close()

    @contextlib.asynccontextmanager
    async def lock(self) -> AsyncIterator[None]:
        """Hold SQLite's one writer (the saver's connection lock); free on PostgreSQL."""
        if self.postgres:
            yield
        else:
            async with self.saver.lock:
                yield

    async def _aexecute(self, statements: list[Statement], *, returning: bool = False
                        ) -> Any:
        """Run ``statements`` atomically; the last one's first row if ``returning``.

        PostgreSQL: all but the last become data-modifying CTEs of the last (each runs
        exactly once, whether referenced or not), so the write is a single statement.
        SQLite: each statement is one hop to aiosqlite's thread, then one for the commit.
        """
        if self.postgres:
            head = [f"w{i} AS ({sql})" for i, (sql, _) in enumerate(statements[:-1])]
            sql = (f"WITH {', '.join(head)} " if head else "") + statements[-1][0]
            params = [p for _, ps in statements for p in ps]
            async with self.pool.connection() as conn:
                cur = await conn.execute(sql, params)
                return await cur.fetchone() if returning else None
        async with self.saver.lock:
            conn = self.saver.conn
            try:
                for sql, params in statements:
                    rows = await conn.execute_fetchall(sql, params)
            except BaseException:
                await conn.rollback()
                raise
            await conn.commit()
            return next(iter(rows), None)

    def _db(self, value: Any) -> Any:
        """A Python value as this database's driver takes it for Django's columns."""
        if isinstance(value, uuid.UUID):
            return value if self.postgres else value.hex
        if isinstance(value, datetime) and not self.postgres:
            # Django's SQLite conventions: naive UTC datetimes as text
            return str(timezone.make_naive(value, timezone.UTC)) if settings.USE_TZ \
                else str(value)
        return value

    def _json(self, value: Any) -> Any:
        if self.postgres:
            from psycopg.types.json import Jsonb

            return Jsonb(value)
        return json.dumps(value)

    async def aclaim_queued(self, run_id: uuid.UUID, *, owner: str, now: datetime,
                            stale: datetime) -> Run | None:
        """Take a queued run in one conditional UPDATE; None if it is not queued and free.

        The fast path of the executor's claim: starting a fresh run is the common case,
        and this costs one round trip with no thread hop. Anything else (a resume, a
        recovery) is claimed through the ORM.
        """
        params = [self._db(v) for v in (owner, now, Run.Status.RUNNING, now, run_id,
                                        Run.Status.QUEUED, owner, stale)]
        row = await self._aexecute([(self.claim_sql, params)], returning=True)
        if row is None:
            return None
        graph, thread_id, input_, current_node, last_seq, started_at = row
        if not self.postgres:  # text columns: parse as Django would
            input_ = json.loads(input_)
            started_at = parse_datetime(started_at)
            if settings.USE_TZ:
                started_at = timezone.make_aware(started_at, timezone.UTC)
        return Run(id=run_id, graph=graph, thread_id=thread_id, input=input_,
                   current_node=current_node, last_seq=last_seq, started_at=started_at,
                   status=Run.Status.RUNNING, owner=owner, heartbeat_at=now)

    async def awrite(self, run: Run, rows: list[dict[str, Any]], *, current_node: str,
                     now: datetime, final: dict[str, Any] | None = None) -> dict[str, Any]:
        """Insert ``rows`` and record the run's progress (or final status) atomically.

        ``final`` (as :meth:`EventWriter.afinish` builds it, without ``pending``) ends the
        run: status, output or error, and the questions it leaves are cancelled if asked.
        Returns the run's summary as broadcast.
        """
        last_seq = rows[-1]["seq"] if rows else None
        fields: dict[str, Any] = {"heartbeat_at": now, "current_node": current_node}
        if last_seq is not None:
            fields["last_seq"] = last_seq
        status = Run.Status.RUNNING
        if final:
            status = final["status"]
            fields["status"] = status
            for key in ("error_message", "error_traceback"):
                if key in final:
                    fields[key] = final[key]
            if "output" in final:
                fields["output"] = self._json(final["output"])
            if status in Run.FINISHED:
                fields.update(finished_at=now, owner="", cancel_requested=False)
            elif status == Run.Status.INTERRUPTED:
                fields["owner"] = ""
        run_id, stamp = self._db(run.id), self._db(now)
        statements: list[Statement] = []
        if rows:
            batch = json.dumps([{name: r[name] for name, _ in BATCH_COLUMNS} for r in rows])
            statements.append((self.insert_sql, [run_id, stamp, batch]))
        if final and final.get("cancel_interrupts"):
            statements.append((self.cancel_interrupts_sql, [
                Interrupt.Status.CANCELLED, run_id, Interrupt.Status.PENDING]))
        statements.append((
            f"UPDATE {Run._meta.db_table} SET "
            + ", ".join(f"{column} = {self.mark}" for column in fields)
            + f" WHERE id = {self.mark}",
            [*(self._db(v) for v in fields.values()), run_id],
        ))
        await self._aexecute(statements)
        return broadcast.run_summary({
            "id": run.id, "graph": run.graph, "status": status, "current_node": current_node,
            "last_seq": run.last_seq if last_seq is None else last_seq,
            "started_at": run.started_at, "finished_at": fields.get("finished_at"),
            "error_message": fields.get("error_message", run.error_message),
        })


class EventWriter:
    """Buffers a run's events, numbers them, and writes them behind the graph."""

    def __init__(self, run: Run, *, next_seq: int, sink: EventSink | None,
                 tasks: set[asyncio.Task[None]] | None = None, interval: float = 0.0,
                 digest: broadcast.RunsDigest | None = None) -> None:
        self.run = run
        self.digest = digest
        self.tasks = set() if tasks is None else tasks
        self.sink = sink
        self.next_seq = next_seq
        self.interval = interval
        self.buffer: list[dict[str, Any]] = []
        self.current_node = run.current_node
        self._flushing: asyncio.Task[None] | None = None
        self._sleeping = False
        self._closing = False  # the final write is coming: the write behind takes no more
        self._last_write = float("-inf")
        self._published: tuple[str, str] = (run.status, run.current_node)

    def add(self, fields: dict[str, Any]) -> None:
        """Number one event and buffer it."""
        self.buffer.append({**EVENT_DEFAULTS, **fields, "seq": self.next_seq})
        self.next_seq += 1

    def flush_behind(self) -> None:
        """Write what is buffered behind the graph, at most one write per ``interval``.

        The first events after a quiet spell are written at once; events that come while
        a write is in flight, or within ``interval`` of its start, are written together by
        the next one (a burst of fast steps costs a few writes, not one a step, and no
        event waits longer than the interval plus one write).
        """
        if self.buffer and (self._flushing is None or self._flushing.done()):
            self._flushing = self.track(self._awrite_behind())

    async def _awrite_behind(self) -> None:
        loop = asyncio.get_running_loop()
        while self.buffer and not self._closing:
            wait = self._last_write + self.interval - loop.time()
            if wait > 0:
                self._sleeping = True
                try:
                    await asyncio.sleep(wait)
                finally:
                    self._sleeping = False
            self._last_write = loop.time()
            await self._awrite({})

    def track(self, flush: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run a flush as a task the executor can wait for when it stops."""
        task = asyncio.get_running_loop().create_task(flush)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def aflush(self, **final: Any) -> None:
        """Write everything buffered now (with the run's final status, if given).

        A write behind that is in flight lands first (seq stays ordered) and then stops;
        one still waiting for its interval is cancelled: its events are written here.
        """
        self._closing = True
        behind = self._flushing
        if behind is not None and not behind.done() and behind is not asyncio.current_task():
            if self._sleeping:
                behind.cancel()
            await asyncio.wait({behind})
        self._closing = False
        await self._awrite(final)

    async def _awrite(self, final: dict[str, Any]) -> None:
        batch, self.buffer = self.buffer, []
        if not batch and not final:
            return
        now = timezone.now()
        for row in batch:
            row["created_at"] = now
        if self.sink is None or final.get("pending") is not None:
            # a paused run records its questions through the ORM (get-or-create)
            lock = self.sink.lock() if self.sink else contextlib.nullcontext()
            async with lock:
                summary = await awrite_final(self.run.id, batch, self.current_node, final)
        else:
            summary = await self.sink.awrite(self.run, batch, current_node=self.current_node,
                                             now=now, final=final or None)
        committed_at = time.time()
        if batch:
            self.run.last_seq = batch[-1]["seq"]
        key = (summary["status"], summary["current_node"])
        moved, new_status = key != self._published, key[0] != self._published[0]
        self._published = key
        if batch:  # one message to the run's watchers: the events and, if it moved, the run
            await broadcast.abroadcast_events(self.run.id, [event_dict(r) for r in batch],
                                              run=summary if moved else None,
                                              committed_at=committed_at)
        if moved and batch and not new_status and self.digest is not None:
            self.digest.note(summary)  # the runs list hears of node moves together
        elif moved:
            if self.digest is not None:
                self.digest.forget(summary["id"])
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
        run = Run.objects.values(*broadcast.SUMMARY_FIELDS).get(id=run_id)
    return broadcast.run_summary(run)
