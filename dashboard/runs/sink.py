"""The event sink: the executor's own writes (events, claims, final statuses) next to the saver.

Every write runs on the executor's event loop with no thread hop: on PostgreSQL as *one
statement* (data-modifying CTEs) in autocommit on a small psycopg pool of the sink's own,
with prepared statements; on SQLite in one transaction on the *checkpointer's own*
aiosqlite connection, under its lock (so the graph's checkpoint writes and the event writes
never contend for SQLite's single write lock, whose busy handler sleeps for milliseconds).

Event rows travel as *one* JSON parameter, whatever their number and however many runs
they belong to: the statement's text never changes, so the driver and the server parse
and plan it once, and serialising a write is one ``json.dumps``.

On PostgreSQL the sink's sessions commit with ``synchronous_commit = off`` unless
``PLANWATCH["SYNC_EVENT_COMMITS"]`` is set: the checkpoints (the graph's truth) are still
committed durably by the saver, so a crash of the *database server* can lose at most the
last few hundred milliseconds of event rows, never a checkpoint, and the run is recovered
from its checkpoint. A crash of Planwatch itself loses nothing.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from dashboard.models import Interrupt, Run, RunEvent
from dashboard.runs import transitions
from dashboard.runs.conf import planwatch_setting
from dashboard.runs.doorbells import SUMMARY_FIELDS, run_summary
from dashboard.runs.savers import SaverHandle, postgres_conninfo

Statement = tuple[str, list[Any]]
# An event row's columns in a write's JSON batch, with their types for PostgreSQL's
# jsonb_to_recordset (created_at is the same for every row of a write: a parameter).
BATCH_COLUMNS = (("run_id", "uuid"), ("seq", "integer"), ("kind", "text"), ("node", "text"),
                 ("namespace", "text"), ("step", "integer"), ("task_id", "text"),
                 ("checkpoint_id", "text"), ("payload", "jsonb"),
                 ("duration_ms", "double precision"))
PROGRESS_COLUMNS = (("id", "uuid"), ("last_seq", "integer"), ("current_node", "text"),
                    ("model_calls", "integer"), ("input_tokens", "integer"),
                    ("output_tokens", "integer"), ("total_tokens", "integer"),
                    ("cost_usd", "double precision"))
# the model-call rollups (transitions.ROLLUPS) a write sets with the events that moved them
ROLLUP_SET = ", ".join(f"{name} = p.{name}" for name, _ in PROGRESS_COLUMNS[3:])

Batch = tuple[Run, list[dict[str, Any]], str]
"""One run's share of a write: the run, its new event rows (numbered) and its node now."""


def relaxed_commits() -> bool:
    """Whether executor bookkeeping may commit without waiting for the WAL flush."""
    return not planwatch_setting("SYNC_EVENT_COMMITS")


class EventSink:
    """Writes event rows, claims and final statuses next to the checkpointer."""

    def __init__(self, handle: SaverHandle, *, postgres: bool, pool: Any = None) -> None:
        # AsyncSqliteSaver's connection and lock, on SQLite (the base class has neither)
        self.saver: Any = handle.saver
        self.postgres = postgres
        self.pool = pool
        self.mark = mark = "%s" if postgres else "?"
        run = Run._meta.db_table
        columns = ", ".join(name for name, _ in BATCH_COLUMNS)
        self.insert_sql = (f"INSERT INTO {RunEvent._meta.db_table} ({columns}, created_at) "
                           f"SELECT {self._from_json(BATCH_COLUMNS, 'e')}, {mark} "
                           f"FROM {self._records(BATCH_COLUMNS, 'e')}")
        # every run of a write moves on: its last seq, its node, its heartbeat
        self.progress_sql = (
            f"UPDATE {run} SET last_seq = p.last_seq, current_node = p.current_node, "
            f"{ROLLUP_SET}, heartbeat_at = {mark} "
            f"FROM (SELECT {self._from_json(PROGRESS_COLUMNS, 'j')} "
            f"FROM {self._records(PROGRESS_COLUMNS, 'j')}) AS p WHERE {run}.id = p.id"
        )
        # a queued run is claimed in one conditional UPDATE; which fields it sets and which
        # runs are free to take are the transitions' to say
        claim = transitions.claim(owner="", now=timezone.now())
        self.claim_fields = tuple(claim)
        self.claim_sql = (
            f"UPDATE {run} SET {self.set_clause(claim)} WHERE id = {mark} "
            f"AND status = {mark} AND {transitions.FREE_SQL.format(mark=mark)} "
            f"AND parent_id IS NULL "  # a fork copies its parent's state first: the ORM path
            # another run of its thread executes: it waits (and is dispatched when that
            # one stops); the constraint run_one_running_per_thread settles a race
            f"AND NOT EXISTS (SELECT 1 FROM {run} AS sibling WHERE sibling.conversation_id "
            f"= {run}.conversation_id AND sibling.status = 'running' "
            f"AND sibling.id <> {run}.id) "
            f"RETURNING graph, thread_id, input, current_node, last_seq, started_at, "
            f"interrupt_before, interrupt_after, step_once, configurable, context, "
            f"recursion_limit"
        )
        self.cancel_interrupts_sql = (
            f"UPDATE {Interrupt._meta.db_table} SET status = {mark} "
            f"WHERE run_id = {mark} AND status = {mark}"
        )

    def set_clause(self, fields: transitions.Fields) -> str:
        """``SET`` assignments for a transition's fields (``FirstSet`` keeps a set value)."""
        return ", ".join(
            f"{name} = COALESCE({name}, {self.mark})"
            if isinstance(value, transitions.FirstSet) else f"{name} = {self.mark}"
            for name, value in fields.items())

    def set_params(self, fields: transitions.Fields) -> list[Any]:
        """The parameters of :meth:`set_clause` for ``fields``, as this driver takes them."""
        return [self._db(v.value if isinstance(v, transitions.FirstSet) else v, name)
                for name, v in fields.items()]

    def _records(self, columns: tuple[tuple[str, str], ...], alias: str) -> str:
        """The rows of a JSON array parameter, as a table named ``alias``."""
        if self.postgres:
            record = ", ".join(f"{name} {kind}" for name, kind in columns)
            return f"jsonb_to_recordset(%s::jsonb) AS {alias}({record})"
        return f"json_each(?) AS {alias}"

    def _from_json(self, columns: tuple[tuple[str, str], ...], alias: str) -> str:
        """The columns picked from :meth:`_records` (same names, SQL values)."""
        if self.postgres:
            return ", ".join(f"{alias}.{name}" for name, _ in columns)
        # json_extract gives SQL values for scalars and JSON text for the payload (always
        # an object), as Django's JSONField stores it on SQLite
        return ", ".join(f"json_extract({alias}.value, '$.{name}') AS {name}"
                         for name, _ in columns)

    @classmethod
    async def aopen(cls, handle: SaverHandle, *, postgres: bool, pool_size: int) -> EventSink:
        """The sink for an open saver (on PostgreSQL with its own pool)."""
        if not postgres:
            return cls(handle, postgres=False)
        from psycopg_pool import AsyncConnectionPool

        from config import pgpool

        async def configure(conn: Any) -> None:
            if relaxed_commits():
                await conn.execute("SET synchronous_commit TO OFF")

        # statements are prepared at once: there are a handful, run thousands of times, and
        # the server shares the machine's cores with the graphs
        pool = AsyncConnectionPool(
            postgres_conninfo(), min_size=1, max_size=pool_size, configure=configure,
            kwargs={"autocommit": True, "prepare_threshold": 0}, open=False,
            # a connection the server dropped (a restart, pg_terminate_backend) is found
            # out on checkout and replaced, not used for a write that would then fail
            check=pgpool.acheck,
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

    def _db(self, value: Any, column: str = "") -> Any:
        """A Python value as this database's driver takes it for Django's columns."""
        if column == "output":
            return self._json(value)
        if isinstance(value, uuid.UUID):
            return value if self.postgres else value.hex
        if isinstance(value, datetime) and not self.postgres:
            # Django's SQLite conventions: naive UTC datetimes as text
            return str(timezone.make_naive(value, UTC)) if settings.USE_TZ \
                else str(value)
        return value

    def _json(self, value: Any) -> Any:
        if self.postgres:
            from psycopg.types.json import Jsonb

            return Jsonb(value)
        return json.dumps(value)

    def _rows_json(self, batches: list[Batch]) -> str:
        """The event rows of ``batches`` as the JSON parameter of :attr:`insert_sql`."""
        return json.dumps([
            {"run_id": str(self._db(run.id)),
             **{name: row[name] for name, _ in BATCH_COLUMNS[1:]}}
            for run, rows, _ in batches for row in rows
        ])

    async def aclaim_queued(self, run_id: uuid.UUID, *, owner: str, now: datetime,
                            stale: datetime) -> Run | None:
        """Take a queued run in one conditional UPDATE; None if it is not queued and free.

        The fast path of the executor's claim: starting a fresh run is the common case,
        and this costs one round trip with no thread hop. Anything else (a resume, a
        recovery) is claimed through the ORM.
        """
        fields = transitions.claim(owner=owner, now=now)
        assert tuple(fields) == self.claim_fields
        params = [*self.set_params(fields),
                  *(self._db(v) for v in (run_id, Run.Status.QUEUED, owner, stale))]
        # the thread's status first: the claim's RETURNING is the write's answer
        row = await self._aexecute([*self.thread_statements(run_id, fields),
                                    (self.claim_sql, params)], returning=True)
        if row is None:
            return None
        (graph, thread_id, input_, current_node, last_seq, started_at, before, after, step,
         configurable, context, recursion_limit) = row
        if not self.postgres:  # text columns: parse as Django would
            input_, before, after = json.loads(input_), json.loads(before), json.loads(after)
            configurable = json.loads(configurable)
            context = json.loads(context) if context is not None else None
            started_at = parse_datetime(started_at)
            if settings.USE_TZ and started_at is not None:
                started_at = timezone.make_aware(started_at, UTC)
        run = Run(id=run_id, graph=graph, thread_id=thread_id, input=input_,
                  current_node=current_node, last_seq=last_seq, started_at=started_at,
                  interrupt_before=before, interrupt_after=after, step_once=bool(step),
                  configurable=configurable, context=context,
                  recursion_limit=recursion_limit)
        transitions.apply_to(run, fields)
        return run

    async def awrite_many(self, batches: list[Batch], *, now: datetime) -> list[dict[str, Any]]:
        """Insert the rows of several running runs and record their progress, atomically.

        One statement for every run an executor has rows of, whatever their number.
        Returns each run's summary as broadcast, in the order of ``batches``.
        """
        stamp = self._db(now)
        progress = []
        for run, rows, node in batches:
            moved = transitions.progress(now=now, last_seq=rows[-1]["seq"] if rows else None,
                                         current_node=node, calls=transitions.rollups(run))
            progress.append({"id": str(self._db(run.id)),
                             "current_node": moved.get("current_node", run.current_node),
                             "last_seq": moved.get("last_seq", run.last_seq),
                             **{name: moved[name] for name in transitions.ROLLUPS}})
        statements: list[Statement] = []
        if any(rows for _, rows, _ in batches):
            statements.append((self.insert_sql, [stamp, self._rows_json(batches)]))
        statements.append((self.progress_sql, [stamp, json.dumps(progress)]))
        await self._aexecute(statements)
        return [
            run_summary({
                "id": run.id, "graph": run.graph, "status": run.status,
                "current_node": moved["current_node"], "last_seq": moved["last_seq"],
                "started_at": run.started_at, "finished_at": None,
                "error_message": run.error_message,
                **{name: moved[name] for name in transitions.ROLLUPS},
            })
            for (run, _, _), moved in zip(batches, progress, strict=True)
        ]

    async def awrite(self, run: Run, rows: list[dict[str, Any]], *, current_node: str,
                     now: datetime, final: dict[str, Any]) -> dict[str, Any]:
        """Insert a run's last ``rows`` together with where it stops, atomically.

        ``final`` (as :meth:`~dashboard.runs.record.EventWriter.afinish` builds it, without
        ``pending``) gives the status (paused or final), output or error, and whether the
        questions it leaves are withdrawn. Returns the run's summary as broadcast.
        """
        fields = transitions.stop(
            status=final["status"], now=now, last_seq=rows[-1]["seq"] if rows else None,
            current_node=current_node, output=final.get("output"), error=final.get("error"),
            calls=transitions.rollups(run))
        statements: list[Statement] = []
        if rows:
            statements.append((self.insert_sql, [self._db(now),
                                                 self._rows_json([(run, rows, current_node)])]))
        if final.get("cancel_interrupts"):
            statements.append((self.cancel_interrupts_sql, [
                Interrupt.Status.CANCELLED, self._db(run.id), Interrupt.Status.PENDING]))
        statements.append(self.update_statement(run.id, fields))
        statements.extend(self.thread_statements(run.id, fields))
        await self._aexecute(statements)
        transitions.apply_to(run, fields)
        return run_summary({name: getattr(run, name) for name in SUMMARY_FIELDS})

    def update_statement(self, run_id: uuid.UUID, fields: transitions.Fields) -> Statement:
        """The ``UPDATE`` that applies a transition's ``fields`` to one run."""
        return (f"UPDATE {Run._meta.db_table} SET {self.set_clause(fields)} "
                f"WHERE id = {self.mark}", [*self.set_params(fields), self._db(run_id)])

    def thread_statements(self, run_id: uuid.UUID, fields: transitions.Fields
                          ) -> list[Statement]:
        """The ``UPDATE`` that gives the run's thread its new status, if ``fields`` change
        the run's (:data:`~dashboard.runs.transitions.THREAD_SQL`, as the ORM path runs it)."""
        status = transitions.thread_status(fields)
        if status is None:
            return []
        return [(transitions.THREAD_SQL.format(mark=self.mark),
                 transitions.thread_params(self._db(run_id), status))]

    async def aapply(self, run_id: uuid.UUID, fields: transitions.Fields) -> None:
        """Apply a transition's ``fields`` to one run (and its thread) on the fast path."""
        await self._aexecute([self.update_statement(run_id, fields),
                              *self.thread_statements(run_id, fields)])

