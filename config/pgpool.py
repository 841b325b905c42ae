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
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool


def needs_check(conn: Any) -> bool:
    """Whether an idle pooled connection has anything to read (or no socket at all).

    ``poll``, not ``select``: a process with many sockets open (a web process with hundreds
    of streams) hands out descriptors past select's 1024, where select raises and every
    checkout fell back to the round trip (seen in a long test process)."""
    try:
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError, psycopg.Error):
        return True


def check(conn: psycopg.Connection[Any]) -> None:
    """``check`` of a sync pool: raises if a connection with something to read is broken."""
    if needs_check(conn):
        ConnectionPool.check_connection(conn)


async def acheck(conn: psycopg.AsyncConnection[Any]) -> None:
    """``check`` of an async pool: raises if a connection with something to read is broken."""
    if needs_check(conn):
        await AsyncConnectionPool.check_connection(conn)
