"""LangGraph's own long-term memory store (``BaseStore``), in the Django database.

PostgreSQL: ``PostgresStore`` / ``AsyncPostgresStore`` (langgraph-checkpoint-postgres);
SQLite: ``SqliteStore`` / ``AsyncSqliteStore`` (langgraph-checkpoint-sqlite). Their tables
come from the store's own ``setup()``, run by a migration as the savers' are. Every graph
is compiled with the async store (``get_store()`` works in its nodes); the
``/langgraph/store/`` endpoints and the admin use a sync one per request.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from django.db import connection
from langgraph.store.base import BaseStore, TTLConfig

from dashboard.runs.savers import is_postgres, postgres_conninfo

TTL: TTLConfig = {"refresh_on_read": True, "sweep_interval_minutes": None}
"""Items written with a ``ttl`` (minutes) expire; reading one gives it its time again."""


def setup_store_tables(settings_dict: dict[str, Any]) -> None:
    """Create (or migrate) the store's tables with the store's own ``setup()``."""
    if is_postgres(settings_dict):
        from langgraph.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(postgres_conninfo(settings_dict)) as store:
            store.setup()
    else:
        with open_sqlite_store(settings_dict["NAME"]):
            pass  # opening sets it up


@contextmanager
def open_sqlite_store(name: str) -> Iterator[BaseStore]:
    """A sync SQLite store on its own connection to the database file (set up)."""
    from langgraph.store.sqlite import SqliteStore

    conn = sqlite3.connect(name, check_same_thread=False, isolation_level=None, timeout=30)
    try:
        conn.execute("PRAGMA busy_timeout=30000")
        store = SqliteStore(conn, ttl=TTL)
        store.setup()  # also registers the namespace matcher on this connection
        yield store
    finally:
        conn.close()


@contextmanager
def open_store() -> Iterator[BaseStore]:
    """A sync store on the current database, for one request."""
    settings_dict = dict(connection.settings_dict)
    if is_postgres(settings_dict):
        from langgraph.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(postgres_conninfo(settings_dict), ttl=TTL) as store:
            yield store
        return
    with open_sqlite_store(settings_dict["NAME"]) as store:
        yield store


@asynccontextmanager
async def aopen_store(pool: Any = None) -> AsyncIterator[BaseStore]:
    """The async store the executor gives every graph; on PostgreSQL it shares ``pool``
    (the savers' psycopg pool) when given."""
    settings_dict = dict(connection.settings_dict)
    if is_postgres(settings_dict):
        from langgraph.store.postgres.aio import AsyncPostgresStore

        if pool is not None:
            yield AsyncPostgresStore(pool, ttl=TTL)
            return
        async with AsyncPostgresStore.from_conn_string(
                postgres_conninfo(settings_dict), ttl=TTL) as store:
            yield store
        return
    import aiosqlite
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    async with aiosqlite.connect(settings_dict["NAME"], isolation_level=None,
                                 timeout=30) as conn:
        await conn.execute("PRAGMA busy_timeout=30000")
        lite = AsyncSqliteStore(conn, ttl=TTL)
        await lite.setup()  # also registers the namespace matcher on this connection
        yield lite
