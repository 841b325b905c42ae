"""LangGraph's own checkpoint savers, in the Django database: tables and connections."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import logging
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from django.db import connection
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.postgres import _ainternal
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.types import ERROR, _DeltaSnapshot
from langgraph.pregel import Pregel
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from config.dberrors import transient
from dashboard.runs import jsonsafe
from dashboard.runs.conf import planwatch_setting

logger = logging.getLogger("planwatch.runs")

SAVER_POOL_TIMEOUT = 5.0
"""Seconds a checkpoint write waits for a pooled connection before it is tried again (the
pool's own default, 30 s, outlasted a short storm's whole retry window)."""


async def aend_abandoned_transactions(conn: psycopg.AsyncConnection[Any]) -> None:
    """Configure a connection of an executor's pool so that the server ends a transaction
    left open on it for ``PLANWATCH_IDLE_TRANSACTION_SECONDS`` (0: never): an executor
    whose loop stopped in the middle of a checkpoint write (a stalled or frozen process)
    held its run's row share-locked (the fence) until it went on, and every claim of the
    run, and whoever waited on that claim, hung with it. The connection is closed then;
    the write, if its executor wakes, fails and is retried on another, where the fence
    refuses it once the run was taken over."""
    seconds = planwatch_setting("IDLE_TRANSACTION_SECONDS")
    if seconds > 0:
        await conn.execute("SELECT set_config('idle_in_transaction_session_timeout', %s, "
                           "false)", [str(max(1, round(seconds * 1000)))])
        if not conn.autocommit:  # procrastinate's pool: a pool takes no connection in one
            await conn.commit()


def is_postgres(settings_dict: dict[str, Any] | None = None) -> bool:
    """Whether the (default) database is PostgreSQL."""
    engine = (settings_dict or connection.settings_dict)["ENGINE"]
    return bool(engine == "django.db.backends.postgresql")


def postgres_conninfo(settings_dict: dict[str, Any] | None = None) -> str:
    """A libpq connection string for the database Django is using right now."""
    from psycopg.conninfo import make_conninfo

    sd = settings_dict or connection.settings_dict
    params = {
        "dbname": sd["NAME"],
        "user": sd.get("USER") or None,
        "password": sd.get("PASSWORD") or None,
        "host": sd.get("HOST") or None,
        "port": str(sd["PORT"]) if sd.get("PORT") else None,
    }
    return make_conninfo(**{k: v for k, v in params.items() if v is not None})


def setup_checkpoint_tables(settings_dict: dict[str, Any]) -> None:
    """Create (or migrate) the saver's tables with the saver's own ``setup()``."""
    if is_postgres(settings_dict):
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(postgres_conninfo(settings_dict)) as saver:
            saver.setup()
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(settings_dict["NAME"], check_same_thread=False)
        try:
            SqliteSaver(conn).setup()
        finally:
            conn.close()


T = TypeVar("T")


class RunLost(Exception):
    """The executor no longer holds the run: another took it over (a claim moved the run's
    epoch past the one its writes carry), so its writes are refused and it stops."""


@dataclass(frozen=True)
class Fence:
    """The claim a run's writes prove they still hold: the run and its epoch then."""

    run_id: uuid.UUID
    epoch: int

    def lost(self) -> RunLost:
        """The error a write refused by this fence raises."""
        return RunLost(f"run {self.run_id} is no longer held at epoch {self.epoch}: "
                       "another executor took it over; this execution stops")


PG_FENCE = "SELECT planwatch_fence(%s::uuid, %s::integer)"
"""A fenced checkpoint write's main query on PostgreSQL (migration 0033), its rows written
by the CTEs before it (:func:`fenced_statement`): the run's row share-locked until the
write commits, or the whole statement aborted (SQLSTATE ``PWF01``) if the run's epoch moved
on."""

SQLITE_FENCE = "SELECT 1 FROM dashboard_run WHERE id = ? AND epoch = ?"
"""A checkpoint write's last statement on SQLite, before its commit: SQLite has one
writer, so the epoch read inside the write's transaction is the committed one."""


@dataclass(frozen=True)
class RowsAtOnce:
    """One of the saver's statements as a CTE that writes all its rows at once: the
    statement's columns as arrays (``unnest``), the rows deduplicated on its conflict key
    as running them one after the other would leave them (``keep`` the first or the last
    of a key; one statement may not touch a row twice)."""

    sql: str
    key: tuple[int, ...]
    keep: str  # "first" (ON CONFLICT DO NOTHING) or "last" (DO UPDATE)

    def cte(self, rows: list[Sequence[Any]]) -> tuple[str, list[Any]]:
        """The CTE's text and its parameters (one array a column)."""
        kept: dict[tuple[Any, ...], Sequence[Any]] = {}
        for row in rows:
            key = tuple(row[i] for i in self.key)
            if self.keep == "last" or key not in kept:
                kept[key] = row
        columns = [list(column) for column in zip(*kept.values(), strict=True)]
        return self.sql, columns


_WRITES_COLUMNS = """
    INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id,
                                   task_path, idx, channel, type, blob)
    SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[],
                         %s::integer[], %s::text[], %s::text[], %s::bytea[])
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)"""

ROWS_AT_ONCE: dict[str, RowsAtOnce] = {
    AsyncPostgresSaver.UPSERT_CHECKPOINT_BLOBS_SQL: RowsAtOnce("""
        INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
        SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[],
                             %s::bytea[])
        ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING""",
        key=(0, 1, 2, 3), keep="first"),
    AsyncPostgresSaver.UPSERT_CHECKPOINT_WRITES_SQL: RowsAtOnce(_WRITES_COLUMNS + """
        DO UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type,
                      blob = EXCLUDED.blob""", key=(0, 1, 2, 3, 5), keep="last"),
    AsyncPostgresSaver.INSERT_CHECKPOINT_WRITES_SQL: RowsAtOnce(_WRITES_COLUMNS + """
        DO NOTHING""", key=(0, 1, 2, 3, 5), keep="first"),
}
"""The saver's statements that write many rows (``executemany``), as one CTE each."""

ONE_ROW = {AsyncPostgresSaver.UPSERT_CHECKPOINTS_SQL}
"""The saver's statements that write one row (``execute``): a CTE as they are."""


class Recorded:
    """The cursor a fenced write of the saver is given: it records the statements and
    rows the saver's ``aput``/``aput_writes`` execute (neither reads a result), for
    :func:`fenced_statement` to write them in one statement."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Sequence[Any]]]] = []

    async def execute(self, query: str, params: Sequence[Any] | None = None) -> None:
        """Note one statement and its row."""
        self.calls.append((query, [params or ()]))

    async def executemany(self, query: str, params_seq: Any) -> None:
        """Note one statement and its rows."""
        self.calls.append((query, list(params_seq)))


def fenced_statement(calls: list[tuple[str, list[Sequence[Any]]]], fence: Fence
                     ) -> tuple[str, list[Any]] | None:
    """``calls`` (what a saver's write executed) as one statement fenced by ``fence``: a
    data-modifying CTE a call (each runs once, and all or none commit), the fence as its
    main query; None if a call is not one of the saver's known writes."""
    ctes: list[str] = []
    params: list[Any] = []
    for sql, rows in calls:
        if not rows:
            continue
        if sql in ROWS_AT_ONCE:
            text, values = ROWS_AT_ONCE[sql].cte(rows)
        elif sql in ONE_ROW and len(rows) == 1:
            text, values = sql.strip().rstrip(";"), list(rows[0])
        else:
            return None
        ctes.append(f"w{len(ctes)} AS ({text})")
        params.extend(values)
    head = f"WITH {', '.join(ctes)} " if ctes else ""
    return head + PG_FENCE, [*params, fence.run_id, fence.epoch]


class FencedPostgresSaver(AsyncPostgresSaver):
    """LangGraph's ``AsyncPostgresSaver`` whose writes (``aput``, ``aput_writes``) are one
    statement each, refused unless :attr:`fence` still holds.

    The saver's own code makes each write's rows (its serialisation, its statements); the
    cursor it writes them on records them (:class:`Recorded`), and they go out as one
    statement whose CTEs write them and whose main query is the fence
    (:func:`fenced_statement`): one round trip, no transaction or pipeline around it (those
    cost more CPU than the write: psycopg's pipeline waits once for each of its syncs). A
    write the saver makes some other way (``adelete_thread``'s deletes) is replayed in one
    pipelined transaction that the fence begins."""

    fence: Fence | None = None

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata, new_versions: ChannelVersions
                   ) -> RunnableConfig:
        """The saver's ``aput`` (langgraph-checkpoint-postgres 3.2's, line for line), its
        blobs serialised on the loop when fenced, as :meth:`aput_writes` does, and its
        JSON by orjson (:func:`~dashboard.runs.jsonsafe.dumpb`)."""
        if self.fence is None or self.pipe is not None:
            return await super().aput(config, checkpoint, metadata, new_versions)
        configurable = config["configurable"].copy()
        thread_id = configurable.pop("thread_id")
        checkpoint_ns = configurable.pop("checkpoint_ns")
        checkpoint_id = configurable.pop("checkpoint_id", None)
        copied = checkpoint.copy()
        copied["channel_values"] = copied["channel_values"].copy()
        next_config: RunnableConfig = {"configurable": {
            "thread_id": thread_id, "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint["id"]}}
        # primitive values inline in the checkpoint's row, the others in the blobs table
        blob_values = {}
        for k, v in checkpoint["channel_values"].items():
            if isinstance(v, _DeltaSnapshot):
                blob_values[k] = copied["channel_values"].pop(k)
                copied["channel_values"][k] = True
            elif v is None or isinstance(v, str | int | float | bool):
                pass
            else:
                blob_values[k] = copied["channel_values"].pop(k)
        async with self._cursor(pipeline=True) as cur:
            if blob_versions := {k: v for k, v in new_versions.items() if k in blob_values}:
                await cur.executemany(self.UPSERT_CHECKPOINT_BLOBS_SQL, self._dump_blobs(
                    thread_id, checkpoint_ns, blob_values, blob_versions))
            await cur.execute(self.UPSERT_CHECKPOINTS_SQL, (
                thread_id, checkpoint_ns, checkpoint["id"], checkpoint_id,
                Jsonb(copied, dumps=jsonsafe.dumpb),
                Jsonb(get_serializable_checkpoint_metadata(config, metadata),
                      dumps=jsonsafe.dumpb)))
        return next_config

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                          task_id: str, task_path: str = "") -> None:
        """The saver's ``aput_writes``, its rows serialised on the loop rather than on a
        thread of the default executor when fenced: a task's writes are its update, small,
        and their serialiser holds the GIL anyway; the hop to a thread and back cost more
        CPU than the serialising (0.1-0.2 ms a task)."""
        if self.fence is None or self.pipe is not None:
            await super().aput_writes(config, writes, task_id, task_path)
            return
        query = (self.UPSERT_CHECKPOINT_WRITES_SQL
                 if all(w[0] in WRITES_IDX_MAP for w in writes)
                 else self.INSERT_CHECKPOINT_WRITES_SQL)
        params = self._dump_writes(
            config["configurable"]["thread_id"], config["configurable"]["checkpoint_ns"],
            config["configurable"]["checkpoint_id"], task_id, task_path, writes)
        async with self._cursor(pipeline=True) as cur:
            await cur.executemany(query, params)

    @contextlib.asynccontextmanager
    async def _cursor(self, *, pipeline: bool = False) -> AsyncIterator[Any]:
        if not pipeline or self.fence is None or self.pipe is not None:
            async with super()._cursor(pipeline=pipeline) as cur:
                yield cur
            return
        fence = self.fence
        async with self.lock:
            recorded = Recorded()
            yield recorded  # (a write that raised meanwhile writes nothing)
            async with _ainternal.get_connection(self.conn) as conn:
                try:
                    statement = fenced_statement(recorded.calls, fence)
                    if statement is not None:
                        await conn.execute(*statement, binary=True)
                        return
                    async with conn.pipeline(), conn.transaction(), conn.cursor(
                            binary=True, row_factory=dict_row) as cur:
                        await cur.execute(PG_FENCE, (fence.run_id, fence.epoch))
                        for sql, rows in recorded.calls:
                            await cur.executemany(sql, rows)
                except psycopg.Error as exc:
                    if exc.sqlstate == "PWF01":
                        raise fence.lost() from exc
                    raise


class FencedSqliteConnection:
    """The SQLite saver's connection for one run: each commit of a write checks the run's
    :class:`Fence` first, and rolls the write back if another executor took the run."""

    def __init__(self, conn: Any, fence: Fence) -> None:
        self._conn = conn
        self._fence = fence

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    async def commit(self) -> None:
        """Commit the saver's write if the run is still held, else roll it back."""
        fence = self._fence
        held = await self._conn.execute_fetchall(SQLITE_FENCE, (fence.run_id.hex, fence.epoch))
        if not held:
            await self._conn.rollback()
            raise fence.lost()
        await self._conn.commit()


class CheckpointWriteFailed(Exception):
    """A run's checkpoint (or a task's writes) could not be saved: the run cannot go on."""


async def aretried[R](what: str, call: Callable[..., Awaitable[R]], *args: Any,
                      **kwargs: Any) -> R:
    """``call(*args, **kwargs)`` (a checkpoint ``what``: a write, an upsert, so writing it
    twice stores it once; or a read), tried again with back-off (0.1 s doubling to 2 s)
    while it fails for a transient reason, for ``CHECKPOINT_RETRY_SECONDS`` at most."""
    deadline = time.monotonic() + planwatch_setting("CHECKPOINT_RETRY_SECONDS")
    delay = 0.1
    while True:
        try:
            return await call(*args, **kwargs)
        except Exception as exc:
            if not transient(exc) or time.monotonic() + delay > deadline:
                raise
            logger.warning("a checkpoint %s failed (%s: %s); trying it again in %.1f s",
                           what, type(exc).__name__, exc, delay)
        await asyncio.sleep(delay)
        delay = min(2.0, delay * 2)


def retried_read[R](read: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]:
    """A saver's read, tried again while it fails for a transient reason: a run that
    starts while 200 others do waits for a pooled connection (``SAVER_POOL_TIMEOUT``)
    rather than failing on its first read."""

    @functools.wraps(read)
    async def again(*args: Any, **kwargs: Any) -> R:
        return await aretried("read", read, *args, **kwargs)

    return again


def whole_writes(writes: Any) -> Any:
    """A task's writes as they may be saved: a task cancelled mid-way (its executor
    stopped) keeps its control writes (the error, its answers) and none of its output.

    LangGraph saves a cancelled task's writes *so far* beside the error, and on resume a
    task with any output write counts as finished: a node whose update was written but
    whose conditional edge had not run yet would be taken as done with no next node, and
    the graph would end there ("succeeded" on a partial state). Without its output the
    task runs again when the run is taken over.
    """
    if not any(channel == ERROR and isinstance(value, asyncio.CancelledError)
               for channel, value in writes):
        return writes
    return [(channel, value) for channel, value in writes if channel in WRITES_IDX_MAP]


class WriteWatch:
    """The first error of one run's checkpoint writes.

    With durability "async" LangGraph saves a step's checkpoint in the background while
    the next step runs, and raises a failed save only when the stream ends: a graph that
    loops would go on, unsaved, until its recursion limit. The executor asks
    :meth:`check` at every part it streams instead.
    """

    def __init__(self) -> None:
        self.error: BaseException | None = None
        self.saved: set[str] = set()  # the ids of the checkpoints saved so far
        self.on_saved: Callable[[], None] | None = None  # told after each checkpoint saved

    def guard_checkpoints(self, aput: Callable[..., Awaitable[T]]
                          ) -> Callable[..., Awaitable[T]]:
        """The saver's ``aput``, guarded, noting each checkpoint saved (a run's event
        that names a checkpoint is written only once a reader can read it)."""
        guarded = self.guard(aput)

        @functools.wraps(aput)
        async def noted(config: Any, checkpoint: Any, *args: Any, **kwargs: Any) -> T:
            saved = await guarded(config, checkpoint, *args, **kwargs)
            self.saved.add(checkpoint["id"])
            if self.on_saved is not None:
                self.on_saved()
            return saved

        return noted

    def guard_writes(self, aput_writes: Callable[..., Awaitable[T]]
                     ) -> Callable[..., Awaitable[T]]:
        """The saver's ``aput_writes``, guarded, saving no part of a cancelled task's
        output (see :func:`whole_writes`)."""
        guarded = self.guard(aput_writes)

        @functools.wraps(aput_writes)  # LangGraph reads its signature (task_path)
        async def whole(config: Any, writes: Any, task_id: str, *args: Any, **kwargs: Any
                        ) -> T:
            return await guarded(config, whole_writes(writes), task_id, *args, **kwargs)

        return whole

    def guard(self, write: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
        """``write`` (a saver's ``aput`` or ``aput_writes``), noting its first error."""

        @functools.wraps(write)  # LangGraph reads aput_writes' signature (task_path)
        async def guarded(*args: Any, **kwargs: Any) -> T:
            try:
                return await aretried("write", write, *args, **kwargs)
            except Exception as exc:
                if self.error is None:
                    self.error = exc
                raise

        return guarded

    def check(self) -> None:
        """Raise :class:`CheckpointWriteFailed`, naming why, if a write failed
        (:class:`RunLost` itself if it was refused: the run is another's now)."""
        if isinstance(self.error, RunLost):
            raise self.error
        if self.error is not None:
            value = isinstance(self.error, TypeError | ValueError | OverflowError)
            raise CheckpointWriteFailed(
                f"the run's checkpoint could not be saved ({type(self.error).__name__}: "
                f"{self.error}), so it stopped there; " + (
                    "a value in the graph's state that the checkpointer cannot store (an "
                    "integer beyond 64 bits, say) must be stored another way (as a string)"
                    if value else "check the database, then start the run again from its "
                    "last checkpoint")) from self.error


class SaverHandle:
    """An open async saver plus what must be closed with it."""

    def __init__(self, saver: BaseCheckpointSaver[Any], closer: Any,
                 fork: Callable[[], BaseCheckpointSaver[Any]] | None = None) -> None:
        self.saver = saver
        self._closer = closer
        self._fork = fork

    def for_run(self, graph: Pregel[Any, Any], fence: Fence | None = None
                ) -> tuple[Pregel[Any, Any], WriteWatch]:
        """``graph`` (compiled with :attr:`saver`) as one run should execute it, and the
        watch on its checkpoint writes; with a ``fence``, every checkpoint write of the run
        is refused (:class:`RunLost`) once another executor took the run over.

        PostgreSQL: a copy with a saver of its own on the same pool. ``AsyncPostgresSaver``
        holds one asyncio lock around every operation of an instance, pool or not, so a
        single instance makes every run's checkpoint I/O wait for every other run's
        (measured on an 80-node chain, 10 at once: 5.8 runs/s with one saver, 9.5 with one
        per run; the copy costs 0.2 ms). SQLite: a shallow copy of the one saver, sharing
        its connection and its lock (which order the saver's writes and the run store's).
        Either way the copy's writes are watched (:class:`WriteWatch`).
        """
        saver = self._fork() if self._fork is not None else copy.copy(self.saver)
        if fence is not None:
            if isinstance(saver, FencedPostgresSaver):
                saver.fence = fence
            else:  # SQLite: the shared connection, its commits fenced for this run
                saver.conn = FencedSqliteConnection(saver.conn, fence)  # type: ignore[attr-defined]
        watch = WriteWatch()
        saver.aput = watch.guard_checkpoints(saver.aput)  # type: ignore[method-assign,assignment]
        saver.aput_writes = watch.guard_writes(saver.aput_writes)  # type: ignore[method-assign,assignment]
        saver.aget_tuple = retried_read(saver.aget_tuple)  # type: ignore[method-assign,assignment]
        return graph.copy(update={"checkpointer": saver}), watch

    async def aclose(self) -> None:
        """Close the pool or connection behind the saver."""
        await self._closer()


async def aopen_saver(*, pool_size: int = 10) -> SaverHandle:
    """Open the async saver for the current database on the running event loop.

    PostgreSQL: ``AsyncPostgresSaver`` on a psycopg pool (autocommit, no prepared
    statements, dict rows: what the saver requires). SQLite: ``AsyncSqliteSaver`` on its
    own aiosqlite connection to the same file, in WAL mode with a busy timeout.
    """
    settings_dict = dict(connection.settings_dict)
    if is_postgres(settings_dict):
        from psycopg import AsyncConnection
        from psycopg.rows import DictRow, dict_row
        from psycopg_pool import AsyncConnectionPool

        from config import pgpool

        pool: AsyncConnectionPool[AsyncConnection[DictRow]] = AsyncConnectionPool(
            postgres_conninfo(settings_dict),
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            open=False,
            timeout=SAVER_POOL_TIMEOUT,
            check=pgpool.acheck,  # dropped connections replaced
            configure=aend_abandoned_transactions,
        )
        await pool.open()
        return SaverHandle(FencedPostgresSaver(pool), pool.close,
                           fork=lambda: FencedPostgresSaver(pool))

    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    conn = await aiosqlite.connect(settings_dict["NAME"], timeout=30)
    await conn.execute("PRAGMA journal_mode=WAL")
    await conn.execute("PRAGMA synchronous=NORMAL")
    await conn.execute("PRAGMA busy_timeout=30000")
    saver = AsyncSqliteSaver(conn)
    saver.is_setup = True  # the tables come from a migration
    return SaverHandle(saver, conn.close)
