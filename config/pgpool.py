"""Checking a pooled PostgreSQL connection on checkout, without a round trip.

Every pool (Django's, the run store's, the savers') must not hand out a connection the
server dropped (a restart, ``pg_terminate_backend``): the write drawn on it would fail.
psycopg_pool's own ``check_connection`` finds out with an empty query, a round trip on
every checkout — 13 % of a worker's samples with the 80-node chain at 10 runs at once,
where the saver checks out a connection for every checkpoint. A connection at rest in
the pool has nothing to read; when the server drops it, its socket turns readable (the
server's last message, then the end of the stream). So the socket is polled first, and
only a connection with something to read gets the real check.
"""

from __future__ import annotations

import select
import sqlite3
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool


def needs_check(conn: Any) -> bool:
    """Whether an idle pooled connection has anything to read (or no socket at all)."""
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return True
    return bool(readable)


def check(conn: psycopg.Connection[Any]) -> None:
    """``check`` of a sync pool: raises if a connection with something to read is broken."""
    if needs_check(conn):
        ConnectionPool.check_connection(conn)


async def acheck(conn: psycopg.AsyncConnection[Any]) -> None:
    """``check`` of an async pool: raises if a connection with something to read is broken."""
    if needs_check(conn):
        await AsyncConnectionPool.check_connection(conn)


# The server dropped the connection (a restart, ``pg_terminate_backend``, a network cut): a
# pool may hand one out before the server's goodbye reaches its socket.
LOST_CAUSES = ("AdminShutdown", "InterfaceError", "ConnectionFailure", "ConnectionTimeout")
LOST_MESSAGES = ("terminating connection", "server closed the connection",
                 "connection is closed", "connection already closed", "consuming input failed",
                 "connection is lost", "the connection is bad", "ssl connection has been closed")


def connection_lost(exc: BaseException | None) -> bool:
    """Whether ``exc`` (a driver's or Django's database error) says the connection was
    dropped under the statement: a fresh connection would do, nothing is wrong with it."""
    if exc is None:
        return False
    causes = [c for c in (exc, exc.__cause__, exc.__context__) if c is not None]
    if not any(type(c).__name__ in ("OperationalError", "InterfaceError", *LOST_CAUSES)
               for c in causes):
        return False
    return (any(type(c).__name__ in LOST_CAUSES for c in causes)
            or any(m in str(c).lower() for c in causes for m in LOST_MESSAGES))



def transient(exc: BaseException) -> bool:
    """Whether a statement's error may pass if it is tried again: a dropped connection
    (:func:`connection_lost`), no connection to be had (``PoolTimeout``, too many clients),
    a busy SQLite file. A value the database cannot store is not."""
    return connection_lost(exc) or isinstance(
        exc, psycopg.OperationalError | psycopg.InterfaceError | sqlite3.OperationalError)
